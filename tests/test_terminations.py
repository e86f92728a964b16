"""Every termination says what it means and whose it is, and docs/terminations.md says the same
as the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lego_rl import harness_kit
from lego_rl.data import ATTRIBUTION_EFFECT, TERMINATION_WHY, Attribution, Termination, attribute, termination_rows
from lego_rl.observe import terminations

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("termination", list(Termination), ids=str)
def test_every_termination_has_a_one_line_description(termination: Termination) -> None:
    why = TERMINATION_WHY[termination]
    assert why.strip() == why and why.endswith(".") and "\n" not in why and "|" not in why
    assert 20 <= len(why) <= 160, why


def test_the_rows_follow_attribute() -> None:
    assert set(TERMINATION_WHY) == set(Termination)
    assert set(ATTRIBUTION_EFFECT) == set(Attribution)
    assert [(t, a) for t, a, _ in termination_rows()] == [(t, attribute(t)) for t in Termination]


def test_committed_document_is_fresh() -> None:
    committed = REPO / terminations.DOC_PATH
    assert committed.is_file(), f"missing: run `{terminations.COMMAND}` in {REPO}"
    assert committed.read_text() == terminations.document(), (
        f"{terminations.DOC_PATH} is stale: regenerate it with `{terminations.COMMAND}` and commit it"
    )


def test_document_lists_each_termination_with_its_attribution() -> None:
    text = terminations.document()
    for termination, attribution, why in termination_rows():
        assert f"| `{termination.value}` | {attribution.value} | {why} |" in text


def test_check_mode_says_whether_the_file_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert terminations.main(["--check"]) == 1
    assert "is stale" in capsys.readouterr().err
    assert terminations.main([]) == 0
    assert terminations.main(["--check"]) == 0
    assert (tmp_path / terminations.DOC_PATH).read_text() == terminations.document()


def test_a_table_cut_to_what_was_seen_counts_each_column() -> None:
    lines = terminations.table(["max_turns", "gone_reason"], {"training": {"max_turns": 3}, "heldout": {}})
    assert lines[0] == "| termination | attribution | training | heldout | why |"
    assert lines[2].startswith("| `max_turns` | policy | 3 | 0 | ")
    assert lines[3] == "| `gone_reason` | ? | 0 | 0 | not a termination this version knows |"
    assert len(lines) == 4


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Incomplete response returned, reason: max_output_tokens", Termination.OUTPUT_LIMIT),
        ("replies hit the output token limit", Termination.OUTPUT_LIMIT),
        ("400 this model's maximum context length is 4096 tokens", Termination.CONTEXT_OVERFLOW),
        ("litellm.ContextWindowExceededError: prompt is too long", Termination.CONTEXT_OVERFLOW),
        ("502 upstream connect error", Termination.API_ERROR),
    ],
)
def test_a_model_api_error_is_told_apart_by_what_it_says(message: str, expected: Termination) -> None:
    """A reply cut at its output limit (often a policy repeating itself) is not a context overflow,
    and neither is an API failure; the first two are the policy's, the last ours."""
    assert harness_kit.api_failure(message) is expected


def test_the_dashboard_colours_every_termination() -> None:
    """A reason without its own colour would share the fallback grey with every other such one."""
    app = (REPO / "lego_rl/observe/static/app.js").read_text()
    block = re.search(r"REASON_COLORS = \{(.*?)\};", app, re.DOTALL)
    assert block is not None
    coloured = set(re.findall(r"(\w+):\s*\"#[0-9a-f]{6}\"", block.group(1)))
    assert coloured == {t.value for t in Termination}
