"""The real launcher: each trial runs on its own daemon thread through the TrialRunner.

A thread per trial (not a fixed executor) so that a trial the watchdog gave up on cannot
hold a slot: the pool counts slots, the stuck thread ends when its sandbox is stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lego_rl.data import TrialResult
from lego_rl.engine.faults import timed_out
from lego_rl.engine.pool import Job
from lego_rl.engine.trial import TrialRunner


class ThreadLauncher:
    """Runs pool jobs with :class:`TrialRunner` on worker threads."""

    def __init__(self, runner: TrialRunner):
        self.runner = runner

    def launch(self, job: Job, done: Callable[[TrialResult], None]) -> None:
        def work() -> None:
            result = self.runner.run(
                job.task, job.trial_id, step=job.version, group=job.group.name
            )
            done(result)

        threading.Thread(target=work, name=f"trial-{job.trial_id}", daemon=True).start()

    def abort(self, job: Job, why: str = "") -> TrialResult:
        verdict = timed_out(
            job.trial_id,
            job.task.name,
            job.group.name,
            job.version,
            self.runner.phase(job.trial_id) or "sandbox_start",
            job.limit,
            why,
        )
        self.runner.abort(job.trial_id, verdict)
        return verdict
