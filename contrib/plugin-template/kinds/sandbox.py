"""The {{name}} sandbox backend: where a trial's agent and tests run, isolated.

Fill in :meth:`{{Class}}.start` and the :class:`{{Class}}Sandbox` methods for your
environment (a container API, a VM service, ...); until then the preflight says so and the
behavioural contracts fail naming it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lego_rl import hookimpl
from lego_rl.kinds import ExecResult, Problem, Task
from lego_rl.registry import BuildContext

READY = False
"""TODO: set to True once start() and the sandbox's methods are written."""


class {{Class}}Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workdir: str = "/app"
    """The task's working directory inside the sandbox."""


class {{Class}}Sandbox:
    """One started sandbox of a trial."""

    def __init__(self, task: Task, trial_id: str, workdir: str) -> None:
        self.task = task
        self.trial_id = trial_id
        self.workdir = workdir

    def exec(
        self, command: str, *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> ExecResult:
        """TODO: run ``bash -c command`` inside (cwd default: workdir); stop it at ``timeout``
        and report ``timed_out``."""
        raise NotImplementedError("{{name}}: exec() is not written yet")

    def upload(self, src: Path, dst: str) -> None:
        """TODO: copy a host file or directory to ``dst`` inside."""
        raise NotImplementedError("{{name}}: upload() is not written yet")

    def download(self, src: str, dst: Path) -> None:
        """TODO: copy ``src`` from inside to the host path ``dst``."""
        raise NotImplementedError("{{name}}: download() is not written yet")

    def endpoint_url(self, host_url: str) -> str:
        """TODO: the URL at which the proxy on the host (``host_url``) is reachable from inside."""
        return host_url

    def stop(self) -> None:
        """TODO: tear the sandbox down; safe to call twice."""

    # Optional capabilities (lego_rl.kinds; CONTRIBUTING.md "Optional capabilities"):
    # PristineVerify (begin_agent, begin_verify: the sandbox.pristine-verify contract needs it),
    # ResultStream (exec_reporting), ProvidesFiles (provide), ReportsChanges (changes,
    # writable_roots), KillsCommands (kill_all), ListsProcesses (processes), ReportsLimits
    # (resources_exhausted). contrib/legorl-docker implements every one.
    # def begin_agent(self) -> None: ...
    # def begin_verify(self, task: Task) -> dict[str, Any]: ...


class {{Class}}:
    """The {{name}} sandbox backend."""

    def __init__(self, options: {{Class}}Options, ctx: BuildContext) -> None:
        self.options = options

    def preflight(self) -> list[Problem]:
        if not READY:
            return [Problem("{{name}}: the sandbox is not written yet", "fill in {{package}}/plugin.py, then set READY = True")]
        return []

    def start(self, task: Task, trial_id: str) -> {{Class}}Sandbox:
        """TODO: create the sandbox from the task's environment (task.path / 'environment')."""
        return {{Class}}Sandbox(task, trial_id, self.options.workdir)

    # Optional capability (lego_rl.kinds): TrialsRoot, the host directory the trials live in.
    # root: Path


@hookimpl
def legorl_register_sandbox(register) -> None:
    register("{{name}}", {{Class}}, options={{Class}}Options)
