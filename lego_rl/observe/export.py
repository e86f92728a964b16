"""Export runs to one self-contained HTML file: the dashboard page with its data inlined."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lego_rl.observe.server import STATIC, Runs


def snapshot(run_dirs: list[Path]) -> dict[str, Any]:
    """Every API answer the page would ask for, keyed by path (all trials opened)."""
    runs = Runs(run_dirs)
    api: dict[str, Any] = {"/api/runs": runs.listing()}
    for run_id, view in runs.scan().items():
        api[f"/api/runs/{run_id}"] = view.data()
        for trial in view.reader.trials():
            api[f"/api/runs/{run_id}/trials/{trial['trial_id']}"] = view.trial(trial["trial_id"])
    return {"api": api}


def export_html(run_dirs: list[Path], out: Path) -> Path:
    """Write the page with styles, scripts and data inline; it needs no server and no network."""
    if not Runs(run_dirs).scan():
        raise FileNotFoundError(f"no run store (store.sqlite) in {', '.join(map(str, run_dirs))}")
    page = (STATIC / "index.html").read_text()
    css = (STATIC / "style.css").read_text()
    data = json.dumps(snapshot(run_dirs), separators=(",", ":")).replace("</", "<\\/")
    page = page.replace(
        '<link rel="stylesheet" href="static/style.css">', f"<style>\n{css}</style>"
    )
    scripts = "".join(
        f"<script>\n{(STATIC / name).read_text()}</script>\n" for name in ("charts.js", "app.js")
    )
    page = page.replace(
        '<script src="static/charts.js"></script>\n<script src="static/app.js"></script>\n', ""
    )
    page = page.replace(
        "</body>", f"<script>window.LEGORL_STATIC = {data};</script>\n{scripts}</body>"
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
