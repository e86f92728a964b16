"""The tasks as verl's RL dataset: one parquet row per task, naming it for our agent loop."""

from __future__ import annotations

from pathlib import Path

from lego_rl.kinds import Task
from legorl_verl.config import AGENT_NAME


def rows(tasks: list[Task]) -> list[dict[str, object]]:
    """verl RLHFDataset rows: ``prompt`` (chat messages), ``agent_name``, ``extra_info.task``."""
    return [
        {
            "data_source": "lego-rl",
            "prompt": [{"role": "user", "content": task.instruction}],
            "agent_name": AGENT_NAME,
            "extra_info": {"index": i, "task": task.name},
        }
        for i, task in enumerate(tasks)
    ]


def write_tasks(tasks: list[Task], path: Path) -> Path:
    import pandas as pd

    if not tasks:
        raise ValueError("no tasks to train on (the tasks block, after the filter, is empty)")
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows(tasks)).to_parquet(path)
    return path
