"""The dashboard's data: reading a recorded quickstart run, live reads, the API and the export."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lego_rl.data import CallRecord, Termination, TrialResult
from lego_rl.kinds import Event
from lego_rl.observe.export import export_html
from lego_rl.observe.reader import RunReader, connect, find_runs
from lego_rl.observe.server import check_bind, create_app
from lego_rl.observe.store import RunStore
from lego_rl.observe.view import RunView, metric_keys

RUN = Path(__file__).parent / "fixtures" / "quickstart-run"


def stored_trajectory() -> str:
    """The first trial of the recorded run whose trajectory the store keeps."""
    with connect(RUN) as db:
        return min(t for (t,) in db.execute("SELECT trial_id FROM trajectories"))


def test_recorded_run_gives_one_row_per_step() -> None:
    data = RunView(RunReader(RUN)).data()
    assert [s["step"] for s in data["steps"]] == [0, 1, 2]
    assert data["info"]["harness"] == "mini-swe-agent" and data["info"]["status"] == "ok"
    assert len(data["trials"]) == 12
    for row in data["steps"]:
        assert sum(row["terminations"].values()) == len(row["rewards"]) == 4
        assert row["trials_per_min"] > 0 and row["sampled_tokens_per_s"] > 0
        assert row["behaviour"]["trials"] == 4
    assert data["metric_keys"]["consistency"]["logp_diff_abs"] == ["logp_diff_abs"]


def test_metric_names_are_read_defensively() -> None:
    keys = metric_keys([{"prob_pearson": 0.99, "k3_inference": 0.1, "routing_agreement": 0.98,
                         "trainer_wait_fraction": 0.2, "staleness_mean": 1.0, "note": "x", "updated": True,
                         "rollout_mismatch_k3": 0.01, "rollout_ess": 0.9, "rollout_masked_fraction": 0.1,
                         "tis_capped_fraction": 0.0, "boundary_drift_tokens_mean": 3.0,
                         "trained_non_sampled_tokens": 0.0}])  # fmt: skip
    assert keys["consistency"] == {
        "prob_pearson": ["prob_pearson"], "k3": ["k3_inference", "rollout_mismatch_k3"],
        "logp_diff_abs": [], "routing_agreement": ["routing_agreement"],
        "correction": ["rollout_ess", "rollout_masked_fraction", "tis_capped_fraction"],
        "token_boundary": ["boundary_drift_tokens_mean", "trained_non_sampled_tokens"],
    }  # fmt: skip
    assert keys["scheduling"] == {
        "trainer_wait": ["trainer_wait_fraction"],
        "staleness": ["staleness_mean"],
    }


def test_trial_detail_has_calls_segments_and_transcript() -> None:
    view = RunView(RunReader(RUN))
    trial_id = stored_trajectory()
    detail = view.trial(trial_id)
    assert detail is not None
    assert len(detail["calls"]) == detail["result"]["calls"] == 3
    assert all(c["prompt_tokens"] > c["completion_tokens"] > 0 for c in detail["calls"])
    segments = detail["segments"]["segments"]
    assert [s["rewrite"] for s in segments] == [False] + [True] * (len(segments) - 1)
    assert detail["result"]["harness"]["transcript"].startswith("[system]")
    assert "exit_code" in detail["result"]["verifier"]
    assert view.trial("no-such-trial") is None


def test_reads_are_safe_while_a_run_writes(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.emit(
        Event(
            "run_start",
            {"spec": {"harness": {"plugin": "scripted"}}, "run_dir": str(tmp_path)},
            time.time(),
        )
    )
    done = threading.Event()

    def write() -> None:
        for i in range(60):
            result = TrialResult(
                trial_id=f"t{i}", task="t", step=i // 4, termination=Termination.COMPLETED
            )
            record = CallRecord(
                session=f"t{i}",
                index=0,
                dialect="d",
                prompt_ids=[1],
                completion_ids=[2],
                logprobs=[-1.0],
            )
            store.emit(Event("call", {"record": record}, time.time()))
            store.emit(Event("trial_end", {"result": result}, time.time()))
            if i % 4 == 3:
                store.emit(Event("step", {"step": i // 4, "reward_mean": 0.0}, time.time()))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    view, seen = RunView(RunReader(tmp_path)), []
    while not done.is_set() or len(seen) < 2:
        data = view.data()
        seen.append((data["version"], len(data["trials"])))
    writer.join()
    store.close()
    assert len(seen) >= 2 and seen == sorted(seen)
    assert len(view.data()["trials"]) == 60
    assert not (tmp_path / "store.sqlite-journal").exists()


def test_api_serves_several_runs_and_only_reads(tmp_path: Path) -> None:
    for name in ("a", "b"):
        shutil.copytree(RUN, tmp_path / name)
    before = (tmp_path / "a" / "store.sqlite").read_bytes()
    client = TestClient(create_app([tmp_path]))
    runs = client.get("/api/runs").json()
    assert [r["id"] for r in runs] == ["a", "b"]
    data = client.get("/api/runs/a").json()
    assert client.get(f"/api/runs/a?since={data['version']}").json() == {
        "unchanged": True,
        "version": data["version"],
    }
    trial = data["trials"][0]["trial_id"]
    assert client.get(f"/api/runs/b/trials/{trial}").json()["result"]["trial_id"] == trial
    assert client.get("/api/runs/zzz").status_code == 404
    assert client.post("/api/runs").status_code == 405
    assert "charts.js" in client.get("/").text and client.get("/static/app.js").status_code == 200
    assert (tmp_path / "a" / "store.sqlite").read_bytes() == before
    assert find_runs([tmp_path / "a"]) == [(tmp_path / "a").resolve()]


def test_a_token_guards_every_request() -> None:
    client = TestClient(create_app([RUN], token="s3cret"))
    assert client.get("/api/runs").status_code == 401
    assert client.get("/").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/?token=wrong").status_code == 401
    assert client.get("/?token=s3cret").status_code == 200
    assert client.get("/api/runs").status_code == 200  # the cookie set by ?token=


def test_other_interfaces_need_a_token() -> None:
    check_bind("127.0.0.1", None)
    with pytest.raises(ValueError, match="token"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", "t")


def test_export_is_one_self_contained_file(tmp_path: Path) -> None:
    out = export_html([RUN], tmp_path / "run.html")
    page = out.read_text()
    assert 'src="static/' not in page and 'href="static/' not in page
    blob = page.split("window.LEGORL_STATIC = ", 1)[1].split(";</script>", 1)[0]
    api = json.loads(blob)["api"]
    assert len(api["/api/runs/quickstart-run"]["steps"]) == 3
    assert sum(k.startswith("/api/runs/quickstart-run/trials/") for k in api) == 12


def test_a_resumed_run_shows_as_running_until_it_ends_again(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    reader = RunReader(tmp_path)
    t = 1000.0

    def emit(kind: str, **data: object) -> None:
        nonlocal t
        t += 1.0
        store.emit(Event(kind, {"spec": {}, "run_dir": str(tmp_path), **data}, t))

    emit("run_start")
    assert reader.info()["status"] == "running" and reader.info()["resumed"] == 0
    emit("run_end", status="interrupted", error="KeyboardInterrupt()")
    info = reader.info()
    assert (info["status"], info["error"], info["ended"]) == ("interrupted", "KeyboardInterrupt()", t)
    emit("run_start", resumed_from="checkpoints/last")
    info = reader.info()
    assert (info["status"], info["error"], info["ended"]) == ("running", None, None)
    assert info["resumed"] == 1 and info["started"] == 1001.0
    emit("run_end", status="ok")
    assert reader.info()["status"] == "ok" and reader.info()["ended"] == t
    store.close()
