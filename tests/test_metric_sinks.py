"""The tensorboard and wandb observers write the step metrics, read back with each tool's reader."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from legorl_std.observers.metric_sinks import (
    MetricsObserver,
    TensorBoardOptions,
    TensorBoardWriter,
    WandbOptions,
    numeric_fields,
    tensorboard,
    wandb,
)

from lego_rl.data import Termination, TrialResult
from lego_rl.kinds import Event
from lego_rl.registry import BuildContext

STEPS = [
    {"step": 0, "reward_mean": 0.25, "loss": 1.5, "trials": 4, "rollout": {"staleness": 0.0}},
    {"step": 1, "reward_mean": 0.5, "loss": 1.25, "trials": 4, "rollout": {"staleness": 1.0}},
    {"step": 2, "reward_mean": 0.75, "loss": 1.0, "trials": 4, "rollout": {"staleness": 2.0}},
]


def run_events(observer: MetricsObserver, run_dir: Path) -> None:
    """run_start, then per step two trials (one timed out at step 1) and the step, run_end."""
    emit = lambda kind, **data: observer.emit(Event(kind, data, time.time()))
    emit("run_start", run_dir=str(run_dir))
    for metrics in STEPS:
        for i in range(2):
            ended = (
                Termination.AGENT_TIMEOUT if metrics["step"] == 1 and i else Termination.COMPLETED
            )
            result = TrialResult(trial_id=f"t{metrics['step']}{i}", task="t", termination=ended)
            emit("trial_end", result=result)
        emit("step", **metrics, note="text is skipped", ok=True)
    emit("run_end", status="ok")
    observer.close()


def expected(step: int) -> dict[str, float]:
    metrics = STEPS[step]
    out = {"reward_mean": metrics["reward_mean"], "loss": metrics["loss"], "trials": 4.0}
    out["rollout/staleness"] = metrics["rollout"]["staleness"]
    out["termination/completed"] = 1.0 if step == 1 else 2.0
    if step == 1:
        out["termination/agent_timeout"] = 1.0
    return out


def test_numeric_fields_flattens_and_skips_non_numbers():
    data = {"a": 1, "b": {"c": 2.5, "d": "x"}, "e": True, "f": float("nan"), "g": None}
    assert numeric_fields(data) == {"a": 1.0, "b/c": 2.5}


def test_construction_writes_nothing(tmp_path):
    observer = tensorboard(TensorBoardOptions(), BuildContext(run_dir=tmp_path))
    observer.emit(Event("run_start", {}, time.time()))
    observer.close()
    assert observer.preflight() == []
    assert list(tmp_path.iterdir()) == []


def test_preflight_names_the_install_command_when_the_package_is_missing():
    observer = MetricsObserver("wandb", "no_such_package_xyz", TensorBoardWriter)
    [problem] = observer.preflight()
    assert problem.fatal and "pip install no_such_package_xyz" in problem.fix


def test_tensorboard_scalars_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    run_events(tensorboard(TensorBoardOptions(), BuildContext(run_dir=tmp_path)), tmp_path)

    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    series = {
        tag: {e.step: float(make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)}
        for tag in accumulator.Tags()["tensors"]
    }
    for step in range(3):
        for tag, value in expected(step).items():
            assert series[tag][step] == pytest.approx(value), (tag, step)
    assert set(series["reward_mean"]) == {0, 1, 2}
    assert set(series["termination/agent_timeout"]) == {1}
    assert "ok" not in series and "note" not in series and "step" not in series


def test_wandb_offline_run_holds_the_metrics(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    observer = wandb(WandbOptions(project="p", name="sinks"), BuildContext(run_dir=tmp_path))
    run_events(observer, tmp_path)

    [run_file] = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    while True:  # wandb-core, a separate process, may still be flushing (bound: the test timeout)
        records = wandb_records(run_file)
        history = wandb_history(records)
        if len(history) >= 3:
            break
        time.sleep(0.2)
    assert history == {step: expected(step) for step in range(3)}
    [run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.display_name) == ("p", "sinks")


def wandb_history(records: list) -> dict[int, dict[str, float]]:
    """The logged rows by step (internal ``_`` fields left out)."""
    history: dict[int, dict[str, float]] = {}
    for record in records:
        if record.WhichOneof("record_type") == "history":
            row = {
                item.key or "/".join(item.nested_key): item.value_json
                for item in record.history.item
            }
            history[int(row.pop("_step"))] = {
                k: float(v) for k, v in row.items() if not k.startswith("_")
            }
    return history


def wandb_records(path: Path) -> list:
    """The protobuf records of a ``.wandb`` file (a W&B header, then LevelDB log blocks)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, chunk, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's zero-padded tail
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    return records
