"""The dashboard in a real browser: headless Chromium (Debian package) driven by Playwright.

Never downloads a browser: Playwright is pointed at /usr/bin/chromium, which
scripts/setup.sh installs (apt-get, as root).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lego_rl.data import TrialResult
from lego_rl.kinds import Event
from lego_rl.observe.export import export_html
from lego_rl.observe.reader import connect
from lego_rl.observe.report import write_report
from lego_rl.observe.server import DashboardServer
from lego_rl.observe.store import RunStore

RUN = Path(__file__).parent / "fixtures" / "quickstart-run"
CHROMIUM = os.environ.get("LEGORL_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",  # Chromium's own sandbox cannot run as root
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"{CHROMIUM} missing: run scripts/setup.sh (apt-get install chromium)",
    ),
]
playwright = pytest.importorskip(
    "playwright.sync_api", reason="pip install -e '.[test]' (playwright)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(0)  # waits as long as the page takes; bound: the test timeout
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    assert not errors, errors


def count(page: Any, selector: str) -> int:
    return page.locator(selector).count()


def ended(result: TrialResult) -> Event:
    return Event("trial_end", {"result": result}, 0.0)


@contextmanager
def served_with(page: Any, tmp_path: Path, events: list[Event]) -> Iterator[None]:
    """A copy of the recorded run with ``events`` added, open in ``page`` and ready."""
    run = tmp_path / "quickstart-run"
    shutil.copytree(RUN, run)
    store = RunStore(run)
    for event in events:
        store.emit(event)
    store.close()
    server = DashboardServer([run], port=0)
    try:
        page.goto(server.start())
        page.wait_for_selector("body[data-ready='1']")
        yield
    finally:
        server.stop()


def check_views(page: Any) -> None:
    page.wait_for_selector("body[data-ready='1']")
    assert not page.is_visible("#report-section")  # no report, no evaluation yet
    steps, trials = 3, 12
    assert count(page, "svg[data-chart=reward] g[data-series=mean] circle") == steps
    assert count(page, "svg[data-chart=reward] g[data-series=trials] circle") == trials
    assert count(page, "svg[data-chart=informative] circle") == steps
    assert count(page, "svg[data-chart=terminations] g[data-series=max_turns] rect") == steps
    assert count(page, "svg[data-chart=attribution] g[data-series=policy] rect") == steps
    assert count(page, "svg[data-chart=logp_diff_abs] circle") == steps
    assert count(page, "svg[data-chart=trials_per_min] circle") == steps
    assert count(page, "svg[data-chart=edit_share] circle") == steps
    assert count(page, "svg[data-chart=reward_hacking_flags] circle") == steps  # none flagged: 0s
    assert count(page, "svg[data-chart=reward_hacking_rewarded] circle") == 0  # none rewarded
    assert count(page, "svg[data-chart=trials] circle") == trials
    # the trial browser: filter, then open the trial whose trajectory is stored
    with connect(RUN) as db:
        trial_id = min(t for (t,) in db.execute("SELECT trial_id FROM trajectories"))
    page.select_option("#f-task", "fix-pass-mark")
    assert count(page, ".trial-list button") == 2
    page.click(f".trial-list button[data-trial='{trial_id}']")
    page.wait_for_selector(f"#trial h3[data-trial='{trial_id}']")
    assert count(page, "svg[data-chart=calls] g[data-series=completion] rect") == 3
    assert count(page, "svg[data-chart=segments] g.series") == 3
    assert count(page, "svg[data-chart=segments] line.mark") == 2  # two rewrites
    assert page.inner_text("#trial-transcript").startswith("[system]")
    assert "exit_code" in page.inner_text("#trial-verifier")


def test_live_page_renders_the_recorded_run(page: Any) -> None:
    server = DashboardServer([RUN], port=0)
    try:
        page.goto(server.start())
        check_views(page)
    finally:
        server.stop()


def test_exported_file_renders_without_a_server(page: Any, tmp_path: Path) -> None:
    out = export_html([RUN], tmp_path / "run.html")
    page.goto(out.as_uri())
    check_views(page)


def test_report_and_held_out_evaluations_show(page: Any, tmp_path: Path) -> None:
    run = tmp_path / "quickstart-run"
    shutil.copytree(RUN, run)
    store = RunStore(run)
    for label, version, success in (("before", 0, 0.25), ("after", 3, 0.625)):
        data = {"label": label, "policy_version": version, "success": success, "scored": 8}
        store.emit(Event("evaluation", data, 0.0))
    store.close()
    write_report(run)
    server = DashboardServer([run], port=0)
    try:
        page.goto(server.start())
        page.wait_for_selector("body[data-ready='1']")
        assert page.is_visible("#report-section")
        assert "0.25 → 0.625" in page.inner_text("[data-fact=heldout]")
        assert "0 → 0" in page.inner_text("[data-fact=gain]")  # the report's windows
        assert "generation" in page.inner_text("[data-fact=split]")
        assert count(page, "svg[data-chart=reward] g[data-series=held-out] circle") == 2
        assert count(page, "svg[data-chart=reward] g[data-series=mean10] circle") == 3
    finally:
        server.stop()


def test_reward_hacking_flags_show_per_step_and_on_the_trial(page: Any, tmp_path: Path) -> None:
    flags = [
        {"file": "/app/calc.py", "lineno": 3, "pattern": "runner-in-sys-modules", "kind": "runner",
         "line": 'if "pytest" in sys.modules:', "crossed": True},
        {"file": "/app/conftest.py", "lineno": 1, "pattern": "pytest-internals", "kind": "runner",
         "line": "import _pytest", "crossed": False},
    ]  # fmt: skip
    record = {"flags": flags, "flags_total": 2, "evidence": ["result stream: line 4 is forged"], "blocked": False}
    result = TrialResult(trial_id="s0001-09-hacked-0", task="hacked", group="s0001-09-hacked", step=1,
                         reward=1.0, verifier={"reward_hacking": record})  # fmt: skip
    with served_with(page, tmp_path, [ended(result)]):
        points = page.locator("svg[data-chart=reward_hacking_flags] circle title").all_text_contents()
        assert points == [f"reward_hacking_flags: step {n}: {int(n == 1)}" for n in range(3)]
        shares = page.locator("svg[data-chart=reward_hacking_rewarded] circle title").all_text_contents()
        assert shares == ["reward_hacking_rewarded: step 1: 1"]  # the only rewarded trial
        page.click(".trial-list button[data-trial='s0001-09-hacked-0']")
        page.wait_for_selector("#trial h3[data-trial='s0001-09-hacked-0']")
        items = page.locator("#trial-hacking li").all_inner_texts()
        assert len(items) == 3 and "/app/calc.py:3 runner-in-sys-modules" in items[0]
        assert "(did not cross)" in items[1] and "line 4 is forged" in items[2]
        assert count(page, ".trial-list button.flagged") == 1


def test_proxy_cache_bytes_chart_every_step(page: Any, tmp_path: Path) -> None:
    with connect(RUN) as db:
        steps = [(n, json.loads(m)) for n, m in db.execute("SELECT step, metrics FROM steps")]
    # the step events again, with what the pool adds now
    sized = [
        Event("step", {**metrics, "proxy_cache_bytes": 3e6 + n, "proxy_cache_tokenizer_chunks_bytes": 2e6 + n}, 0.0)
        for n, metrics in steps
    ]
    with served_with(page, tmp_path, sized):
        for series in ("proxy_cache_bytes", "proxy_cache_tokenizer_chunks_bytes"):
            assert count(page, f"svg[data-chart=cache_bytes] g[data-series={series}] circle") == 3


def test_what_trials_do_after_a_failed_test_run_charts_per_step(page: Any, tmp_path: Path) -> None:
    """Three trials of step 1 see a test run fail: one edits anew, one re-applies its edit, one
    stops; the chart shows each share at step 1 only (no other step saw a failure)."""

    def bash(command: str, code: int = 0) -> dict[str, Any]:
        return {"function": {"name": "bash", "arguments": {"command": command}}, "exit_code": code}

    wrong, right, test = "sed -i 's/-/+/' /app/calc.py", "sed -i 's/-/*/' /app/calc.py", "python3 /app/tests/run_tests.py"
    moves = {"changed": [wrong, test, right], "repeated": [wrong, test, wrong], "stopped": [wrong, test]}
    results = [
        TrialResult(trial_id=f"s0001-2{n}-{move}-0", task=move, group=f"s0001-{move}", step=1, reward=float(move == "changed"),
                    harness={"tool_calls": [bash(c, int(c == test)) for c in commands]})  # fmt: skip
        for n, (move, commands) in enumerate(moves.items())
    ]
    with served_with(page, tmp_path, [ended(r) for r in results]):
        for move in moves:
            points = page.locator(f"svg[data-chart=after_failure] g[data-series=after_failure_{move}] circle title")
            assert points.all_text_contents() == [f"after_failure_{move}: step 1: {1 / 3:.3g}"]


@pytest.fixture(autouse=True)
def _no_downloaded_browsers() -> None:
    assert shutil.which("chromium") or Path(CHROMIUM).exists()
