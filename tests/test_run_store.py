"""The compact run store (schema 2): token-exact round trips, each token kept once, the bytes a
trial and a call take, the light event log, and schema 1's refusal and conversion."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from legorl_std.observers.store import JsonlObserver

from lego_rl.data import CallRecord, Segment, Trajectory, TrialResult
from lego_rl.engine.resume import choose_run_dir
from lego_rl.kinds import Event
from lego_rl.observe import codec
from lego_rl.observe.footprint import footprint
from lego_rl.observe.migrate import EVENTS_FILE, OLD_STORE, migrate, store_version
from lego_rl.observe.reader import RunReader
from lego_rl.observe.store import (
    SCHEMA_VERSION,
    RunStore,
    StoreVersionError,
    read_calls,
    read_trajectory,
    read_trials,
    to_json,
)
from lego_rl.observe.view import RunView
from lego_rl.proxy.recorder import assemble
from lego_rl.spec.load import load_spec

V1_RUN = Path(__file__).parent / "fixtures" / "store-v1-run"
VOCAB = 151_000
LAYERS, TOP_K, EXPERTS = 2, 2, 4


def routed(token: int, position: int) -> list[list[int]]:
    """A deterministic router: the same token at the same position goes to the same experts
    at prefill and at generation (as the quickstart's backend does)."""
    first = (token * 7 + position) % EXPERTS
    return [[(first + layer) % EXPERTS, (first + layer + 1) % EXPERTS] for layer in range(LAYERS)]


def route(ids: list[int], start: int = 0) -> list[list[list[int]]]:
    return [routed(t, start + i) for i, t in enumerate(ids)]


def session(rng: random.Random, sid: str, system: list[int], turns: int, *,
            appended: int = 60, completion: int = 24) -> list[CallRecord]:  # fmt: skip
    """The calls of one agent session: each prompt extends the previous call's context by a
    tool output (``appended`` ids); the first starts with the shared ``system`` prompt."""
    prompt = system + [rng.randrange(VOCAB) for _ in range(appended * 4)]
    calls = []
    for index in range(turns):
        out = [rng.randrange(8192) for _ in range(completion)]
        calls.append(
            CallRecord(
                session=sid, index=index, dialect="openai-chat", model="tiny", prompt_ids=prompt,
                completion_ids=out, logprobs=[-rng.random() * 3 for _ in out],
                routing=route(out, len(prompt)), prompt_routing=route(prompt),
                extends_previous=index > 0, started_at=1.0, ended_at=2.5,
            )
        )  # fmt: skip
        prompt = prompt + out + [rng.randrange(VOCAB) for _ in range(appended)]
    return calls


def emit(store: RunStore, kind: str, **data: object) -> None:
    store.emit(Event(kind, dict(data), time.time()))


def test_calls_and_trajectories_come_back_token_exact(tmp_path: Path) -> None:
    rng = random.Random(1)
    calls = session(rng, "t0", [5] * 40, 3)
    # a retry (same prompt: the previous generation is rolled back), a failed call, then a
    # rewritten history (a new segment), whose prompt routing is not captured
    def changed(call: CallRecord, **fields: object) -> CallRecord:
        return CallRecord.model_validate({**call.model_dump(), **fields})

    calls.append(changed(calls[-1], index=3, completion_ids=[9, 8], logprobs=[-0.5, -0.25],
                         routing=route([9, 8], 999)))  # fmt: skip
    calls.append(changed(calls[0], index=4, error="backend down", completion_ids=[], logprobs=[], routing=None))
    calls.append(CallRecord(session="t0", index=5, dialect="openai-chat", prompt_ids=[1, 2, 3],
                            completion_ids=[4], logprobs=[-0.1]))  # fmt: skip
    # a log-prob float32 cannot hold exactly stays float64
    calls[1] = changed(calls[1], logprobs=[-0.1, *calls[1].logprobs[1:]])
    trajectory = assemble(calls, "t0")
    assert len(trajectory.segments) == 2 and trajectory.rolled_back == [2]
    odd = Trajectory(session="t0.sub1", subagent=True, segments=[Segment(
        ids=[1, 2, 3], loss_mask=[0, 1, 1], logprobs=[0.5, -0.1, -2.0], routing=[None, [[1, 2]], [[3, 0, 1]]])])  # fmt: skip
    store = RunStore(tmp_path)
    for record in calls:
        emit(store, "call", record=record)
    emit(store, "trial_end", result=TrialResult(trial_id="t0", task="x", trajectory=trajectory, subagents=[odd]))
    store.close()

    assert read_calls(tmp_path, "t0") == calls
    assert read_trajectory(tmp_path, "t0") == trajectory
    reader = RunReader(tmp_path)
    assert reader.trajectory("t0", slot=1) == odd
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        blobs = dict(db.execute("SELECT slot, data FROM trajectories"))
        dictionary = db.execute("SELECT data FROM dictionaries").fetchone()[0]
    # the main trajectory is its calls (tokens kept once); the hand-made one is stored whole
    main, sub = (codec.unpack(codec.decompress(blobs[s], dictionary))[0] for s in (0, 1))
    assert main["ref"] == "calls" and main["segments"] == [[0, 1, 3], [5]]
    assert "ref" not in sub
    summary = read_trials(tmp_path)[0]
    assert summary["trajectories"] == {"main": True, "subagents": 1} and "trajectory" not in summary


def test_a_prompt_costs_what_it_appends_not_the_whole_context(tmp_path: Path) -> None:
    """40 turns, each appending 60 ids: the calls' blobs grow with the tokens added, so the
    40th call takes about what the 2nd does (stored whole, it would be 8x the 2nd's)."""
    calls = session(random.Random(2), "long", [7] * 200, 40)
    store = RunStore(tmp_path)
    for record in calls:
        emit(store, "call", record=record)
    store.close()
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        sizes = dict(db.execute("SELECT idx, length(data) FROM calls"))
    assert len(calls[39].prompt_ids) > 8 * len(calls[1].prompt_ids) - 8 * 200
    assert sizes[39] < 1.5 * sizes[1]
    assert read_calls(tmp_path, "long") == calls


def quickstart_like(run_dir: Path, trials: int, *, log: bool = True) -> tuple[int, int]:
    """A run shaped like the quickstart's (a 1,000-id system prompt every trial shares, 250 ids
    of its own, two calls of 24 sampled ids, 2 layers x top-2 routing, a verifier's report)
    through the store and the jsonl observer; returns (calls, bytes the schema-1 event log
    took for the same events)."""
    rng = random.Random(3)
    system = [rng.randrange(VOCAB) for _ in range(1000)]
    store, jsonl = RunStore(run_dir), JsonlObserver(run_dir / EVENTS_FILE)
    observers = [store, jsonl] if log else [store]
    old_log, n_calls = 0, 0

    def send(kind: str, **data: object) -> None:
        nonlocal old_log
        event = Event(kind, dict(data), time.time())
        old_log += len(json.dumps({"time": event.time, "kind": kind, "data": json.loads(to_json(data))}))
        for observer in observers:
            observer.emit(event)

    send("run_start", spec={"run": {"name": "like-quickstart"}}, run_dir=str(run_dir))
    for t in range(trials):
        sid = f"g{t // 8:05d}-task-{t}"
        send("trial_start", trial_id=sid, task="task", group=f"g{t // 8:05d}")
        calls = session(rng, sid, system, 2, appended=60)
        for record in calls:
            send("call", record=record)
        n_calls += len(calls)
        verifier = {"exit_code": 1, "stderr_tail": "FAIL: test_00 (tests.HiddenTests)\n" * 12,
                    "crossing": {"dropped_paths": [f"A /logs/agent/file-{i}: outside" for i in range(12)]}}  # fmt: skip
        result = TrialResult(trial_id=sid, task="task", group=f"g{t // 8:05d}", step=t // 32,
                             reward=float(t % 3 == 0), verifier=verifier, calls=2,
                             trajectory=assemble(calls, sid))  # fmt: skip
        send("trial_end", result=result)
        if t % 32 == 31:
            send("step", step=t // 32, reward_mean=0.3, loss=0.1)
    send("run_end", status="ok")
    store.close()
    jsonl.close()
    return n_calls, old_log


def test_bytes_per_trial_of_a_quickstart_shaped_run(tmp_path: Path) -> None:
    """The figure the README states, on a run of the quickstart's shape: the store and the
    event log together stay under 22 KB a trial, over 5x below what the schema-1 event log
    alone took for the same events."""
    calls, old_log = quickstart_like(tmp_path, 64)
    size = footprint(tmp_path)
    assert (size.trials, size.calls) == (64, calls)
    print(size.line(), f"(schema 1's events.jsonl alone: {old_log / 64 / 1e3:.1f} KB per trial)")
    assert size.bytes_per_trial <= 22_000
    assert old_log >= 5 * size.total_bytes
    assert size.event_bytes < size.store_bytes  # the log is the light one


def test_the_event_log_is_light_and_rotates(tmp_path: Path) -> None:
    calls = session(random.Random(4), "t1", [3] * 500, 3)
    log = JsonlObserver(tmp_path / "events.jsonl", rotate_bytes=2_000)
    result = TrialResult(trial_id="t1", task="x", trajectory=assemble(calls, "t1"), reward=1.0,
                         verifier={"stderr_tail": "ok"}, harness={"transcript": "[system] ..."})  # fmt: skip
    for i in range(30):
        log.emit(Event("call", {"record": calls[i % 3]}, float(i)))
    log.emit(Event("trial_end", {"result": result}, 30.0))
    log.close()
    parts = sorted(tmp_path.glob("events-*.jsonl.gz"), key=lambda p: int(p.name.split("-")[1].split(".")[0]))
    assert len(parts) >= 2
    lines = [line for p in parts for line in gzip.decompress(p.read_bytes()).decode().splitlines()]
    lines += (tmp_path / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["time"] for e in events] == [float(i) for i in range(31)]
    record = events[0]["data"]["record"]
    assert record["prompt_tokens"] == len(calls[0].prompt_ids) and record["completion_tokens"] == 24
    assert not {"prompt_ids", "completion_ids", "routing", "prompt_routing", "logprobs"} & set(record)
    summary = events[-1]["data"]["result"]
    assert summary["reward"] == 1.0 and not {"trajectory", "verifier", "harness"} & set(summary)
    detailed = JsonlObserver(tmp_path / "detailed.jsonl", details=True)
    detailed.emit(Event("trial_end", {"result": result}, 31.0))
    detailed.close()
    summary = json.loads((tmp_path / "detailed.jsonl").read_text())["data"]["result"]
    assert summary["verifier"] == {"stderr_tail": "ok"} and "trajectory" not in summary


def v1_copy(tmp_path: Path) -> Path:
    run = tmp_path / "old"
    shutil.copytree(V1_RUN, run)
    return run


def test_a_schema_1_store_is_refused_naming_its_version_and_the_conversion(tmp_path: Path) -> None:
    run = v1_copy(tmp_path)
    for read in (lambda: RunReader(run).trials(), lambda: read_trials(run)):
        with pytest.raises(StoreVersionError, match=r"schema 1 .* lego_rl\.observe\.migrate .*old"):
            read()
    with pytest.raises(StoreVersionError, match="schema 1"):
        RunStore(run).emit(Event("step", {"step": 9}, 0.0))
    assert store_version(run) == 1


def test_a_recorded_schema_1_run_converts_and_reads_the_same(tmp_path: Path) -> None:
    run = v1_copy(tmp_path)
    db = sqlite3.connect(run / "store.sqlite")
    old = {t: json.loads(r) for t, r in db.execute("SELECT trial_id, result FROM trials")}
    old_calls = db.execute("SELECT session, idx, prompt_tokens, completion_tokens FROM calls ORDER BY 1, 2").fetchall()
    db.close()
    files = {p.stem: Trajectory.model_validate_json(p.read_text()) for p in (run / "trajectories").glob("*.json")}
    before = footprint(run).total_bytes

    done = migrate(run)
    assert (done.from_version, done.trials, done.calls) == (1, 12, 36)
    assert store_version(run) == SCHEMA_VERSION and not (run / "trajectories").exists()
    assert done.bytes_after < before
    new = {t["trial_id"]: t for t in read_trials(run)}
    assert new.keys() == old.keys()
    for trial_id, summary in old.items():
        # the same fields (the TrialResult of today adds some); trajectories are stored apart
        same = [k for k in summary if k not in ("trajectory_path", "subagents")]
        assert {k: new[trial_id][k] for k in same} == {k: summary[k] for k in same}
        # every trial had a trajectory; the fixture kept two files: the others are gone, and
        # the store says so (a resumed run reruns such a trial instead of taking it as empty)
        assert new[trial_id]["trajectories"]["main"]
    for trial_id, trajectory in files.items():
        assert read_trajectory(run, trial_id) == trajectory
    reader = RunReader(run)
    assert [(c["session"], c["idx"], c["prompt_tokens"], c["completion_tokens"]) for c in
            sorted(reader.calls(), key=lambda c: (c["session"], c["idx"]))] == [tuple(c) for c in old_calls]  # fmt: skip
    data = RunView(reader).data()
    assert [s["step"] for s in data["steps"]] == [0, 1, 2] and len(data["trials"]) == 12
    assert migrate(run).line().endswith(f"already schema {SCHEMA_VERSION}")


V1_SCHEMA = """
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE steps (step INTEGER PRIMARY KEY, time REAL NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE trials (trial_id TEXT PRIMARY KEY, step INTEGER, task TEXT, grp TEXT, reward REAL, termination TEXT,
    attribution TEXT, reason TEXT, calls INTEGER, trained_tokens INTEGER, timings TEXT, trajectory_path TEXT,
    result TEXT NOT NULL);
CREATE TABLE calls (session TEXT, idx INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, finish_reason TEXT,
    extends_previous INTEGER, policy_version INTEGER, seconds REAL, error TEXT, PRIMARY KEY (session, idx));
"""
"""What schema 1's store created (lego-rl before the compact store)."""


def write_v1(run: Path, trials: dict[str, list[CallRecord]]) -> None:
    """A run directory as schema 1 wrote it: the store, trajectories/*.json, a full events.jsonl."""
    (run / "trajectories").mkdir(parents=True)
    db = sqlite3.connect(run / "store.sqlite")
    db.executescript(V1_SCHEMA)
    with (run / EVENTS_FILE).open("w") as log:
        for trial_id, calls in trials.items():
            for c in calls:
                full = c.model_dump(mode="json")
                log.write(json.dumps({"time": 1.0, "kind": "call", "data": {"record": full}}) + "\n")
                light = {k: v for k, v in full.items() if k not in ("prompt_ids", "prompt_routing", "routing")}
                db.execute("INSERT INTO events (time, kind, data) VALUES (1.0, 'call', ?)", (json.dumps({"record": light}),))
                db.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?)", (c.session, c.index, len(c.prompt_ids),
                           len(c.completion_ids), c.finish_reason, int(c.extends_previous), 0, 1.5, None))  # fmt: skip
            result = TrialResult(trial_id=trial_id, task="x", calls=len(calls), trajectory=assemble(calls, trial_id))
            path = f"trajectories/{trial_id}.json"
            (run / path).write_text(result.trajectory.model_dump_json())
            summary = {**result.model_dump(mode="json", exclude={"trajectory"}), "trajectory_path": path}
            log.write(json.dumps({"time": 2.0, "kind": "trial_end", "data": {"result": result.model_dump(mode="json")}}) + "\n")
            db.execute("INSERT INTO events (time, kind, data) VALUES (2.0, 'trial_end', ?)", (json.dumps({"result": summary}),))
            db.execute("INSERT INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", (trial_id, 0, "x", "", 0.0, "completed",
                       "none", "", len(calls), 0, "[]", path, json.dumps(summary)))  # fmt: skip
    db.commit()
    db.close()


def test_conversion_takes_prompts_and_routing_from_the_old_event_log(tmp_path: Path) -> None:
    rng = random.Random(5)
    trials = {f"t{i}": session(rng, f"t{i}", [11] * 300, 3) for i in range(3)}
    run = tmp_path / "run"
    write_v1(run, trials)
    old_log = (run / EVENTS_FILE).stat().st_size

    done = migrate(run)
    assert done.prompts_from_log == 9 and done.calls == 9
    for trial_id, calls in trials.items():
        assert read_calls(run, trial_id) == calls
        assert read_trajectory(run, trial_id) == assemble(calls, trial_id)
    lines = [json.loads(x) for x in (run / EVENTS_FILE).read_text().splitlines()]
    assert len(lines) == 12 and (run / EVENTS_FILE).stat().st_size < old_log / 5
    assert "prompt_ids" not in lines[0]["data"]["record"] and "trajectory" not in lines[3]["data"]["result"]
    assert not (run / "trajectories").exists() and not (run / OLD_STORE).exists()


def test_keep_leaves_the_old_store_files_and_log(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_v1(run, {"t0": session(random.Random(6), "t0", [1] * 50, 2)})
    log = (run / EVENTS_FILE).read_bytes()
    migrate(run, keep=True)
    assert (run / OLD_STORE).is_file() and (run / "trajectories" / "t0.json").is_file()
    assert (run / EVENTS_FILE).read_bytes() == log and store_version(run) == SCHEMA_VERSION


def test_resuming_a_schema_1_run_converts_its_store(tmp_path: Path) -> None:
    spec = load_spec(Path("specs/mini-swe-agent-local.yaml"), [f"run.output_dir={tmp_path}"])
    run = spec.run.run_dir
    shutil.copytree(V1_RUN, run)
    (run / "spec.yaml").write_text(json.dumps(spec.model_dump(mode="json")))
    (run / "checkpoints" / "last").mkdir(parents=True)
    (run / "checkpoints" / "last" / "trainer.pt").write_text("x")
    chosen = choose_run_dir(spec)
    assert chosen.resume_from is not None and chosen.path == run.resolve()
    assert "its store converted" in chosen.note and "schema 1 -> 2" in chosen.note
    assert store_version(run) == SCHEMA_VERSION and len(read_trials(run)) == 12
