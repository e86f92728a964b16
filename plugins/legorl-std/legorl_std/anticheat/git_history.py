"""Anti-cheat ``git-history``: the agent's repository holds only the task's starting state.

Before the agent runs: every other git repository, object store, pack or bundle under the
writable roots (a leftover copy of the original ``.git``, an alternates target) is removed,
and the workdir's ``.git`` is replaced by a fresh repository with one commit of the
starting tree on the same branch name (no other commits, branches, tags, reflog, packed
refs, ORIG_HEAD, stash, dangling objects or alternates). Then that state is checked; a
repository that still shows more is refused (an infrastructure error: the rewrite failed).
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.kinds import Check, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy, PolicyError, writable_roots

GIT = "git -c safe.directory='*' -c core.hooksPath=/dev/null -c commit.gpgsign=false"
_FIND_LEFTOVERS = r"""find {roots} -xdev -path "$W/.git" -prune -o \( -name .git -o -name '*.bundle' \
  -o -name '*.pack' -o -name packed-refs -o -type d -name pack -o -type f -name HEAD \
  -o -regextype posix-extended -regex '.*/[0-9a-f]{{2}}/[0-9a-f]{{38}}' \) -print 2>/dev/null |
while IFS= read -r p; do
  case "$p" in
    */.git|*.bundle|*.pack|*/packed-refs) echo "$p" ;;
    */pack) echo "${{p%/pack}}" ;;
    */HEAD) [ -d "${{p%/HEAD}}/objects" ] && echo "${{p%/HEAD}}" ;;
    *) d=${{p%/*}}; echo "${{d%/*}}" ;;
  esac
done | sort -u"""
"""Other git dirs, bare repos, object stores (any name: found by their layout), packs, bundles."""

_REWRITE = """set -u
W={workdir}
{find} | while IFS= read -r p; do rm -rf -- "$p" && echo "removed $p" >&2; done
if cd "$W" 2>/dev/null && [ -e .git ]; then
branch=$({git} symbolic-ref --short HEAD 2>/dev/null || echo main)
rm -rf .git
{git} init -q && {git} symbolic-ref HEAD "refs/heads/$branch" || exit 3
{git} add -A >/dev/null && {git} -c user.name=lego-rl -c user.email=lego-rl@localhost \
  commit -q --allow-empty --no-verify -m "task start" || exit 4
rm -rf .git/logs .git/ORIG_HEAD .git/FETCH_HEAD .git/hooks/*
fi
"""

_CHECK = """cd {workdir} 2>/dev/null && [ -e .git ] || exit 0
echo "commits $({git} rev-list --all --reflog --count 2>/dev/null)"
echo "refs $({git} for-each-ref | wc -l)"
for f in packed-refs ORIG_HEAD logs refs/stash objects/info/alternates; do [ -e .git/$f ] && echo "present $f"; done
echo "unreachable $({git} fsck --unreachable --no-reflogs 2>/dev/null | wc -l)"
"""


class GitHistoryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GitHistory(CheckedPolicy):
    name = "git-history"

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check:
        workdir = shlex.quote(sandbox.workdir)
        roots = " ".join(shlex.quote(r) for r in writable_roots(sandbox))
        find = _FIND_LEFTOVERS.format(roots=roots)
        script = "\n".join(
            [
                f"( {_REWRITE.format(workdir=workdir, find=find, git=GIT)} ) || exit $?",
                f"W={workdir}; {find} | sed 's/^/leftover /'",
                _CHECK.format(workdir=workdir, git=GIT),
            ]
        )

        def judge(text: str) -> list[Violation]:
            problems = [
                line
                for line in text.splitlines()
                if line.startswith(("present", "leftover"))
                or line == "commits 0"
                or (line.split(" ")[0] in ("commits", "refs") and line.split(" ")[-1] not in ("0", "1"))
                or (line.startswith("unreachable") and line != "unreachable 0")
            ]
            if problems:
                raise PolicyError(
                    f"git-history: could not reduce {task.name}'s repository to its starting state: "
                    + "; ".join(problems)
                )
            return []

        return Check(self.name, script, judge)


def build(options: GitHistoryOptions, ctx: BuildContext) -> GitHistory:
    """The repo's history is rewritten to one commit of the starting tree; no leftovers."""
    return GitHistory()


def register(register: Any) -> None:
    register("git-history", build, options=GitHistoryOptions)
