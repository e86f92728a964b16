"""Sandbox contracts of verification: every backend verifies in a fresh copy of the sealed
starting state where only the agent's crossing change lands (:class:`~lego_rl.kinds.PristineVerify`),
and a result stream, where the backend offers one, carries what the command wrote to it."""

from __future__ import annotations

from typing import Any

from lego_rl.kinds import RESULTS_FD_ENV, PristineVerify, ResultStream
from lego_rl.testing.contracts.base import ContractEnv, contract, expect
from lego_rl.testing.contracts.sandbox import brief, started

AGENT = (
    "sed -i 's/a - b/a + b/' /app/calc.py && echo 'import os' > /app/conftest.py && "
    "echo '[pytest]' > /app/pytest.toml && mkdir -p /app/.git && echo x > /app/.git/planted && "
    "echo note > /app/notes.md"
)
"""An agent's change: a fix (crosses), planted runner configuration and git metadata (never
cross), a new data file (crosses)."""


@contract("sandbox", "pristine-verify")
def pristine_verify(backend: Any, env: ContractEnv) -> None:
    """verification runs in a fresh copy of the starting state with only the agent's crossing change"""
    task = env.task()
    with started(backend, env, "contract-pristine") as sandbox:
        expect(
            isinstance(sandbox, PristineVerify),
            f"{type(sandbox).__name__} has no begin_agent/begin_verify (lego_rl.kinds.PristineVerify): "
            "every sandbox must verify in a fresh copy where only the agent's change lands",
        )
        assert isinstance(sandbox, PristineVerify)
        sealed = sandbox.exec("echo sealed > /app/start.md", timeout=30)
        expect(sealed.exit_code == 0, f"could not prepare the starting state: {brief(sealed)}")
        sandbox.begin_agent()
        out = sandbox.exec(f"{AGENT} && rm /app/start.md", timeout=30)
        expect(out.exit_code == 0, f"the agent's change failed: {brief(out)}")
        details = sandbox.begin_verify(task)
        crossing = details.get("crossing", {}) if isinstance(details, dict) else {}
        expect(
            isinstance(crossing, dict) and "crossed_paths" in crossing and "dropped_paths" in crossing,
            f"begin_verify must return what crossed and what was dropped (details['crossing']), got {details!r:.300}",
        )
        seen = sandbox.exec("ls -A /app; cat /app/calc.py", timeout=30)
        listing = seen.stdout.split()
        expect("a + b" in seen.stdout, f"the agent's fix did not reach verification: {brief(seen)}")
        for planted in ("conftest.py", "pytest.toml", "start.md"):
            expect(planted not in listing, f"/app/{planted} is in the verification copy: {brief(seen)}")
        expect("notes.md" in listing, f"the agent's new data file did not cross: {brief(seen)}")
        git = sandbox.exec("cat /app/.git/planted", timeout=30)
        expect(git.exit_code != 0, "the agent's .git/planted reached verification (git metadata never crosses)")


@contract("sandbox", "result-stream")
def result_stream(backend: Any, env: ContractEnv) -> None:
    """a result stream, where offered, carries exactly what the command wrote to it"""
    with started(backend, env, "contract-stream") as sandbox:
        if not isinstance(sandbox, ResultStream):
            return  # optional: the verifier falls back to a file under /logs/verifier
        out, stream = sandbox.exec_reporting(
            f'echo one >&"${RESULTS_FD_ENV}"; echo two >&"${RESULTS_FD_ENV}"; echo stdout', timeout=30
        )
        expect(out.exit_code == 0 and out.stdout == "stdout\n", f"the command failed: {brief(out)}")
        expect(stream == "one\ntwo\n", f"the stream gave {stream!r}, not what was written to it")
        _, again = sandbox.exec_reporting("true", timeout=30)
        expect(again == "", f"a second command's stream holds the first's: {again!r}")
