"""Pristine verification through Harbor's own API: host copies of the working tree decide what
of the agent's change crosses, and build the tree a fresh environment verifies.

The working tree is downloaded when the agent phase starts (the sealed starting state, after the
before-agent checks) and when it ends; :func:`lego_rl.crossing.CrossingPolicy` decides on what
changed between the two (only the working tree is the task's: nothing else crosses). The
verification tree is the starting state with the crossed change applied by legorl-std's
:func:`~legorl_std.sandbox.verify.apply` (no symlink followed, regular files' bytes and mode
bits only); it replaces the working tree of a fresh environment of the task's image.
"""

from __future__ import annotations

import posixpath
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from legorl_std.sandbox.snapshot import Change, compare_trees, tree_diff
from legorl_std.sandbox.verify import apply, file_changes

from lego_rl.crossing import Crossing, CrossingLimit, CrossingPolicy
from lego_rl.kinds import Task


@dataclass
class AgentChange:
    """What the agent changed in the working tree, and what of it crosses."""

    changes: list[Change]
    """Paths relative to the working tree (``/rel``)."""
    crossing: Crossing
    """With in-sandbox paths, as the crossing rules saw them."""
    diff: str
    """The agent's unified diff, in-sandbox paths."""


def agent_change(task: Task, workdir: str, start: Path, agent: Path) -> AgentChange:
    """Compare the host copies ``start`` and ``agent`` of ``workdir``; raises
    :class:`~lego_rl.crossing.CrossingLimit` when the agent changed too much."""
    changes = compare_trees(start, agent)
    inside = [replace(c, path=posixpath.join(workdir, c.path.lstrip("/"))) for c in file_changes(changes, agent)]

    def is_package(directory: str) -> bool:
        return (start / posixpath.relpath(directory, workdir) / "__init__.py").is_file()

    crossing = CrossingPolicy.for_task(task, [workdir]).decide(inside, is_package)
    return AgentChange(changes, crossing, tree_diff(start, agent, changes, ["/"], inside=workdir))


def verification_tree(change: AgentChange, workdir: str, start: Path, agent: Path, target: Path) -> None:
    """Build at ``target`` the starting state with the crossed change applied."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(start, target, symlinks=True)
    relative = Crossing(
        crossed=[replace(c, path="/" + posixpath.relpath(c.path, workdir)) for c in change.crossing.crossed]
    )
    try:
        apply(relative, agent, target, None)
    except OSError as exc:
        raise CrossingLimit(f"the agent's change cannot be applied to the verification copy: {exc}") from exc
