"""`legorl dashboard` / `legorl export` and the `dashboard` observer of `legorl apply`."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from lego_rl.cli.main import app
from lego_rl.kinds import Event
from lego_rl.observe.store import RunStore
from lego_rl.registry import BuildContext

RUN = Path(__file__).parent / "fixtures" / "quickstart-run"


def test_export_command_writes_one_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(RUN), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert "window.LEGORL_STATIC" in (tmp_path / "r.html").read_text()
    result = CliRunner().invoke(app, ["dashboard", str(RUN), "--export", str(tmp_path / "d.html")])
    assert result.exit_code == 0 and (tmp_path / "d.html").exists()


def test_dashboard_refuses_without_a_run_or_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dashboard", str(tmp_path)])
    assert result.exit_code == 1 and "store.sqlite" in result.output
    result = CliRunner().invoke(app, ["dashboard", str(RUN), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "token" in result.output


def test_observer_serves_the_run_while_it_goes(tmp_path: Path) -> None:
    from legorl_std.observers.dashboard import DashboardOptions, dashboard

    store = RunStore(tmp_path)
    observer = dashboard(DashboardOptions(port=0, token="tok"), BuildContext(run_dir=tmp_path))
    assert observer.server is None  # nothing starts before the run does
    try:
        for obs in (store, observer):
            obs.emit(
                Event(
                    "run_start",
                    {"spec": {"run": {"name": "live"}}, "run_dir": str(tmp_path)},
                    time.time(),
                )
            )
        assert observer.server is not None
        base = f"http://127.0.0.1:{observer.server.port}"
        assert httpx.get(f"{base}/api/runs").status_code == 401
        runs = httpx.get(f"{base}/api/runs", headers={"Authorization": "Bearer tok"}).json()
        assert [(r["name"], r["status"]) for r in runs] == [("live", "running")]
    finally:
        observer.close()
        store.close()
    assert observer.server is None


def test_observer_preflight_names_the_missing_token(tmp_path: Path) -> None:
    from legorl_std.observers.dashboard import DashboardOptions, dashboard

    observer = dashboard(DashboardOptions(host="0.0.0.0"), BuildContext(run_dir=tmp_path))
    (problem,) = observer.preflight()
    assert "token" in problem.message and "token" in problem.fix
