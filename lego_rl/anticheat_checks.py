"""Anti-cheat phases: each policy's hook, with the shell checks of all policies that offer
them batched into one sandbox exec (each exec of a namespace sandbox costs tens of ms)."""

from __future__ import annotations

import secrets
from typing import Literal

from lego_rl.kinds import AntiCheat, Check, ChecksBeforeAgent, ChecksBeforeVerify, Sandbox, Task, Violation

CHECK_TIMEOUT = 120.0
Phase = Literal["before_agent", "before_verify"]


class CheckError(RuntimeError):
    """A check script failed or its output could not be told apart (the sandbox's fault)."""


def phase_violations(policies: list[AntiCheat], phase: Phase, sandbox: Sandbox, task: Task) -> list[Violation]:
    """What the policies find at ``phase``: its shell check where a policy offers one
    (:class:`~lego_rl.kinds.ChecksBeforeAgent`, :class:`~lego_rl.kinds.ChecksBeforeVerify`;
    all such checks in one exec), else its hook."""
    found: list[Violation] = []
    checks: list[Check | None] = []
    for policy in policies:
        if phase == "before_agent":
            if isinstance(policy, ChecksBeforeAgent):
                checks.append(policy.before_agent_check(sandbox, task))
            else:
                found += policy.before_agent(sandbox, task)
        elif isinstance(policy, ChecksBeforeVerify):
            checks.append(policy.before_verify_check(sandbox, task))
        else:
            found += policy.before_verify(sandbox, task)
    return found + run_checks(sandbox, [c for c in checks if c is not None])


def run_checks(sandbox: Sandbox, checks: list[Check], *, timeout: float = CHECK_TIMEOUT) -> list[Violation]:
    """Run ``checks`` in one exec, each in its own subshell; judge each by its own stdout.

    Sections are delimited by a random marker, so nothing a check prints (a file name an
    agent chose) can pass for another check's output. A check's output is held by the shell,
    never in a file, so the checks run on a disk the agent filled."""
    if not checks:
        return []
    mark = f"@@legorl-{secrets.token_hex(8)}"
    parts = []
    for i, check in enumerate(checks):  # each header starts a line: a section is its text + "\n"
        # no temporary files (the checks must run on a disk the agent filled); the '.' keeps trailing newlines
        parts.append(
            f"printf '\\n{mark} {i} 0\\n' >&2; out=$( ( {check.script}\n); rc=$?; printf .; exit $rc ); rc=$?\n"
            f"printf '\\n{mark} {i} %d\\n%s' $rc \"${{out%.}}\""
        )
    parts += [f"printf '\\n{mark} end 0\\n'; printf '\\n{mark} end 0\\n' >&2"]
    result = sandbox.exec("\n".join(parts), timeout=timeout, cwd="/")
    if result.timed_out:
        raise CheckError(f"anti-cheat checks ({', '.join(c.policy for c in checks)}) timed out after {timeout:.0f}s")
    outs, errs = _sections(result.stdout, mark), _sections(result.stderr, mark)
    violations: list[Violation] = []
    for i, check in enumerate(checks):
        if i not in outs:
            raise CheckError(
                f"{check.policy}: its check did not run (exit {result.exit_code}): {result.stderr.strip()[-500:]}"
            )
        code, out = outs[i]
        if code != 0:
            raise CheckError(
                f"{check.policy}: check script failed (exit {code}): {errs.get(i, (code, ''))[1].strip()[-500:]}"
            )
        violations += check.judge(out)
    return violations


def _sections(text: str, mark: str) -> dict[int, tuple[int, str]]:
    """Section index -> (exit code, text) between ``MARK I RC`` header lines (each preceded
    by a newline of ours, dropped again); a section cut off before its successor is absent."""
    sections: dict[int, tuple[int, str]] = {}
    current: tuple[int, int] | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if not line.startswith(mark + " "):
            lines.append(line)
            continue
        if current is not None:
            sections[current[0]] = (current[1], "".join(lines)[:-1])
        index, code = line.split()[1:3]
        current, lines = (None if index == "end" else (int(index), int(code))), []
    return sections
