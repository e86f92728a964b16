"""Level 4 of the ``bugfix`` source: candidate fixes only the visible tests tell apart.

Every task is checked by running its own files on the host: the untouched module and the
decoy score 0, the oracle 1, a decoy corrected by the fix 1; the visible tests fail on the bug
and the decoy and pass on the fix. And the two fixed policies the warm start demonstrates are
measured on the same tasks: editing without verifying (always the first candidate) against
verifying and correcting.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from legorl_std.tasks.bugfix import GeneratorError, generate_task, generate_tasks, write_task
from legorl_std.tasks.bugfix.candidates import (
    ARITHMETIC,
    COMPARISON,
    INTEGER,
    alternatives,
    apply_rewrite,
    rewrite_command,
)

from lego_rl.engine.evaluate import blind_baseline
from lego_rl.engine.warmstart import demonstration_commands
from lego_rl.kinds import Task

KINDS = ["wrong-operator", "wrong-comparison", "wrong-constant", "off-by-one"]


def run(task_dir: Path, scratch: Path, commands: list[str]) -> tuple[str, list[int]]:
    """Run ``commands`` in a copy of the task's /app, then its test.sh: (reward, the commands'
    exit codes)."""
    app, logs = scratch / "app", scratch / "logs"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(task_dir / "environment" / "app", app)
    env = {"PATH": "/usr/bin:/bin", "APP": str(app), "LOGS": str(logs)}
    codes = [
        subprocess.run(["bash", "-c", c.replace("/app/", f"{app}/")], env=env, capture_output=True, check=False).returncode
        for c in commands
    ]
    subprocess.run(["bash", str(task_dir / "tests" / "test.sh")], env=env, capture_output=True, check=False)
    return (logs / "reward.txt").read_text().strip(), codes


@pytest.fixture(scope="module", params=[False, True], ids=["inline", "fix-files"])
def tasks(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> list[tuple[Path, dict]]:
    """Tasks with the candidates in the instruction, and as sed scripts (``fix_files``)."""
    root = tmp_path_factory.mktemp("level4")
    out = []
    for split in ("train", "heldout"):
        for task in generate_tasks(16, seed=2, split=split, levels=[4], kinds=KINDS, fix_files=request.param):
            write_task(task, root / task.name)
            out.append((root / task.name, tomllib.loads((root / task.name / "task.toml").read_text())["metadata"]))
    return out


def test_every_task_oracle_1_no_op_0_decoy_0_corrected_1(tasks: list[tuple[Path, dict]], tmp_path: Path):
    for path, meta in tasks:
        check, oracle = meta["check_command"], meta["oracle_command"]
        (decoy,) = [c for c in meta["candidate_commands"] if c != oracle]
        assert oracle in meta["candidate_commands"] and len(meta["candidate_commands"]) == 2
        assert run(path, tmp_path, [check]) == ("0", [1]), f"{path.name}: no-op must fail, tests too"
        assert run(path, tmp_path, [oracle, check]) == ("1", [0, 0]), f"{path.name}: oracle"
        assert run(path, tmp_path, [decoy, check]) == ("0", [0, 1]), f"{path.name}: the decoy must fail"
        assert run(path, tmp_path, [decoy, check, oracle, check]) == ("1", [0, 1, 0, 0]), path.name


def test_verifying_pays_against_the_best_fixed_guess(tasks: list[tuple[Path, dict]], tmp_path: Path):
    """Editing without verifying succeeds as often as its guess (first or second candidate);
    trying the first, running the tests and correcting on a failure always succeeds."""
    rates = {}
    for policy in ("first", "second", "verify"):
        rewards = []
        for path, meta in tasks:
            first, second = meta["candidate_commands"]
            check = meta["check_command"]
            if policy == "verify":
                reward, codes = run(path, tmp_path, [first, check])
                if codes[-1] != 0:
                    reward, _ = run(path, tmp_path, [first, check, second, check])
            else:
                reward, _ = run(path, tmp_path, [first if policy == "first" else second])
            rewards.append(reward == "1")
        rates[policy] = sum(rewards) / len(rewards)
    assert rates["verify"] == 1.0
    assert 0.2 <= rates["first"] <= 0.8 and rates["first"] + rates["second"] == 1.0, rates


def test_instruction_names_the_line_the_candidates_and_the_check():
    task = generate_task(4, "heldout", 1, levels=[4], kinds=KINDS)
    assert f"line {task.line_number}, `{task.buggy_line}`" in task.instruction
    assert all(f"`{c}`" in task.instruction for c in task.candidate_commands)
    assert f"`{task.check_command}` runs the tests." in task.instruction
    assert all(name not in c for c in task.candidate_commands for name in (task.module, task.function))
    patterns = {c.split("s/", 1)[1].split("/")[0] for t in generate_tasks(64, levels=[4], kinds=KINDS) for c in t.candidate_commands}
    assert len(patterns) <= 3, patterns  # one pattern per token class: nothing task-specific to copy


def test_fix_files_offer_the_same_two_commands_for_every_task_and_ship_each_rewrite(tmp_path: Path):
    """With ``fix_files`` the choice is one token: the commands are fixed, the scripts are the
    inline form's rewrites (same draws, so the same fix at the same place)."""
    inline = generate_tasks(32, seed=3, split="heldout", levels=[4], kinds=KINDS)
    files = generate_tasks(32, seed=3, split="heldout", levels=[4], kinds=KINDS, fix_files=True)
    assert {t.candidate_commands for t in files} == {
        ("sed -i -E -f /app/fixes/1.sed /app/*.py", "sed -i -E -f /app/fixes/2.sed /app/*.py")
    }
    assert {t.oracle_command for t in files} == set(files[0].candidate_commands)  # either place is correct
    for a, b in zip(inline, files, strict=True):
        assert [c.split("'")[1] + "\n" for c in a.candidate_commands] == list(b.fix_scripts)
        assert (a.buggy_source, a.fixed_source, a.candidate_commands.index(a.oracle_command)) == (
            b.buggy_source, b.fixed_source, b.candidate_commands.index(b.oracle_command)
        )
        assert all(f"`{c}`" in b.instruction for c in b.candidate_commands)
    write_task(files[0], tmp_path / "t")
    assert sorted(p.name for p in (tmp_path / "t" / "environment" / "app" / "fixes").iterdir()) == ["1.sed", "2.sed"]
    assert tomllib.loads((tmp_path / "t" / "task.toml").read_text())["metadata"]["candidate_commands"] == list(
        files[0].candidate_commands
    )


def test_rewrites_match_any_candidate_token_and_escape_what_sed_reads(tmp_path: Path):
    """Real sed: each rewrite gives its line from the bug's, the fix's and the decoy's token."""
    target = tmp_path / "app"
    target.mkdir()
    for line, cls, tokens in (
        ("    return a <= b and c < d", COMPARISON, ["<", "<=", ">=", "!="]),
        ("    return (a * 9) / 5 + 32", ARITHMETIC, ["+", "-", "*", "/"]),
        ("    return [x for x in xs][:10] + [2]", INTEGER, ["10", "11", "9"]),
    ):
        for start in tokens:
            for goal in tokens:
                begin = apply_rewrite(line, cls, start)
                (target / "m.py").write_text(f"x = 1\n{begin}\n")
                command = rewrite_command(2, cls, goal).replace("/app/", f"{target}/")
                subprocess.run(["bash", "-c", command], check=True)
                assert (target / "m.py").read_text() == f"x = 1\n{apply_rewrite(line, cls, goal)}\n", command
                assert apply_rewrite(begin, cls, goal).count(goal) >= 1
    assert alternatives("<=", "<") == [">=", ">", "==", "!="]
    assert alternatives("2", "4") == ["3", "1"]
    assert alternatives("pow", "x") == []


def test_kinds_without_a_decoy_are_refused_by_name():
    with pytest.raises(GeneratorError, match="'wrong-return' has no site with a decoy"):
        generate_tasks(2, levels=[4], kinds=["wrong-return"])


def test_warm_start_demonstrations_check_a_share_and_correct_wrong_guesses(tasks: list[tuple[Path, dict]]):
    path, meta = tasks[0]
    task = Task(name=path.name, path=path, instruction="", config={"metadata": meta})
    check, oracle = meta["check_command"], meta["oracle_command"]
    drawn = [demonstration_commands(task, i, 0.25) for i in range(400)]
    checking = [d for d in drawn if check in d]
    assert 0.18 <= len(checking) / len(drawn) <= 0.32
    assert all(d == [oracle] for d in drawn if check not in d)
    assert {tuple(d) for d in checking} == {(oracle, check), (*[c for c in meta["candidate_commands"] if c != oracle], check, oracle, check)}
    assert all(demonstration_commands(task, i, 0.0) == [oracle] for i in range(20))


def test_listed_order_demonstrations_try_the_candidates_as_the_instruction_lists_them(
    tasks: list[tuple[Path, dict]],
):
    check = tasks[0][1]["check_command"]
    shapes = set()
    for path, meta in tasks:
        task = Task(name=path.name, path=path, instruction="", config={"metadata": meta})
        candidates, oracle = meta["candidate_commands"], meta["oracle_command"]
        right = candidates.index(oracle)
        listed = [demonstration_commands(task, i, 1.0, order="listed") for i in range(5)]
        assert all(d == [step for c in candidates[: right + 1] for step in (c, check)] for d in listed)
        shapes.add(right)
    assert shapes == {0, 1}  # both positions occur, so a correction (first listed wrong) is demonstrated


def test_the_fix_is_drawn_per_task_so_no_fixed_policy_reads_it_from_the_candidates():
    """Held-out tasks reuse the templates' sites; were a site's fix always the template's, a
    policy remembering each candidate set's fix would score ~0.97 without testing."""

    def as_task(t) -> Task:
        meta = {"oracle_command": t.oracle_command, "candidate_commands": list(t.candidate_commands)}
        return Task(name=t.name, path=Path("."), instruction=t.instruction, config={"metadata": meta})

    train = generate_tasks(256, seed=0, split="train", levels=[4], kinds=KINDS)
    heldout = generate_tasks(128, seed=0, split="heldout", levels=[4], kinds=KINDS)
    assert blind_baseline([as_task(t) for t in heldout]) <= 0.65
    remembered: dict[frozenset[str], Counter[str]] = {}
    for t in train:
        remembered.setdefault(frozenset(t.candidate_commands), Counter())[t.oracle_command] += 1
    hits = [(remembered.get(frozenset(t.candidate_commands)) or Counter({"": 1})).most_common(1)[0][0] == t.oracle_command
            for t in heldout]  # fmt: skip
    assert sum(hits) / len(hits) <= 0.65  # what a policy fitted on the training tasks gets right
