"""Anti-cheat ``git-history``: the agent's repository holds only the task's starting state.

Before the agent runs: every other git repository, object store, pack or bundle under the
writable roots (a leftover copy of the original ``.git``, an alternates target), found by
its content whatever its name (:mod:`legorl_std.anticheat.git_leftovers`), is removed,
and the workdir's ``.git`` is replaced by a fresh repository that holds the task's own HEAD
commit alone, fetched at depth 1 (same commit id, history cut as a shallow clone cuts it, so
an eval script's ``git checkout <base commit> -- tests`` and ``git diff <base commit>`` still
work), on the same branch name, the working tree as the task left it; a repository without
a commit gets one commit of the starting tree instead. No other commits, branches, tags,
reflog, packed refs, ORIG_HEAD, stash, index entries, dangling objects or alternates. Then
that state is checked (and the scan run again if it removed anything); a leftover or a
repository that still shows more is refused (an infrastructure error: the removal or the
rewrite failed).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.kinds import CheatDemo, Check, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy, PolicyError, writable_roots
from legorl_std.anticheat.git_leftovers import SETUP, scan

GIT = "git -c safe.directory='*' -c core.hooksPath=/dev/null -c commit.gpgsign=false"
_REWRITE = """set -u
if cd "$W" 2>/dev/null && [ -e .git ]; then
branch=$({git} symbolic-ref --short HEAD 2>/dev/null || echo main)
head=$({git} rev-parse --verify -q 'HEAD^{{commit}}' 2>/dev/null || true)
new=$(mktemp -d 2>/dev/null) || new=""
if [ -n "$head" ] && [ -n "$new" ] && {git} init -q "$new" \
    && {git} -C "$new" -c protocol.file.allow=always fetch -q --no-tags --depth=1 "file://$W/.git" "$head" 2>/dev/null; then
  rm -rf .git && mv "$new/.git" .git || exit 3
  {git} update-ref "refs/heads/$branch" "$head" && {git} symbolic-ref HEAD "refs/heads/$branch" && {git} reset -q || exit 4
else
  rm -rf .git
  {git} init -q && {git} symbolic-ref HEAD "refs/heads/$branch" || exit 3
  {git} add -A >/dev/null && {git} -c user.name=lego-rl -c user.email=lego-rl@localhost \
    commit -q --allow-empty --no-verify -m "task start" || exit 4
fi
rm -rf "$new" .git/logs .git/ORIG_HEAD .git/FETCH_HEAD .git/hooks/*
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
        roots = writable_roots(sandbox)
        script = "\n".join(
            [
                f"W={workdir}",
                SETUP,
                scan(roots, "remove"),
                f"( {_REWRITE.format(git=GIT)} ) || exit $?",
                f'if [ -e "$S/removed" ]; then {scan(roots, "report")}; fi',  # else nothing was there
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


    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """The fix in the repository's history: committed, then reset away (reflog, ORIG_HEAD)."""
        who = f"{GIT} -c user.name=t -c user.email=t@localhost"
        stage = (
            f"{who} init -q && : > {_MARKED} && {who} add -A && {who} commit -qm start"
            f" && echo '# the fix' >> {_MARKED} && {who} commit -qam solution && {who} reset -q --hard HEAD~1"
        )
        return CheatDemo("before_agent", stage=stage, works=f"{GIT} log --all --reflog --format=%s | grep -qx solution")


_MARKED = "history-demo.txt"
"""The file the demonstration's solution commit changes (empty in its first commit)."""


def build(options: GitHistoryOptions, ctx: BuildContext) -> GitHistory:
    """The repo keeps only its HEAD commit (same id, history cut as a shallow clone); no leftovers."""
    return GitHistory()


def register(register: Any) -> None:
    register("git-history", build, options=GitHistoryOptions)
