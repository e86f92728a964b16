"""Conformance contracts: what every plugin of a kind must do, whoever wrote it.

``check(plugin, env)`` builds the plugin with example options and runs its kind's
contracts. Third-party authors run the same checks through the pytest plugin
(:mod:`lego_rl.testing.plugin`).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lego_rl.data import (
    CallRecord,
    Sampling,
    Termination,
    TrialResult,
)
from lego_rl.kinds import Event, Problem, Sandbox, Task
from lego_rl.registry import BuildContext, PluginInfo, Registry
from lego_rl.spec.models import ModelSpec, RunSpec, Spec


def conformance_tasks_dir() -> Path:
    """A directory of tiny Harbor-format tasks shipped with the kit."""
    return Path(str(resources.files("lego_rl.testing") / "tasks"))


@dataclass
class ContractEnv:
    """What contracts may use: a scratch directory, the registry, a tiny model spec."""

    tmp: Path
    registry: Registry
    model: ModelSpec = field(
        default_factory=lambda: ModelSpec(
            name="tiny",
            config={"hidden_size": 32, "num_hidden_layers": 1, "num_experts": 4},
        )
    )

    @property
    def tasks_dir(self) -> Path:
        return conformance_tasks_dir()

    def task(self, name: str = "fix-add") -> Task:
        import tomllib

        path = self.tasks_dir / name
        return Task(
            name=name,
            path=path,
            instruction=(path / "instruction.md").read_text(),
            config=tomllib.loads((path / "task.toml").read_text()),
        )

    def build_context(self) -> BuildContext:
        spec = Spec.model_validate(
            {
                "model": self.model.model_dump(),
                "run": RunSpec(output_dir=self.tmp, name="conformance").model_dump(),
                **{k: {"plugin": "-"} for k in _REQUIRED_BLOCKS},
            }
        )
        return BuildContext(spec=spec, run_dir=self.tmp / "conformance", spec_dir=self.tmp)

    def sandbox_backend(self) -> Any:
        """The first installed sandbox plugin that passes its own preflight."""
        for name in self.registry.names("sandbox"):
            backend = build(self.registry.get("sandbox", name), self)
            if not [p for p in backend.preflight() if p.fatal]:
                return backend
        raise ContractError("no usable sandbox plugin installed to run this contract")


_REQUIRED_BLOCKS = (
    "tasks",
    "sandbox",
    "harness",
    "dialect",
    "verifier",
    "optimizer",
    "inference",
    "trainer",
)


class ContractError(AssertionError):
    """A plugin broke its kind's contract."""


def example_options(plugin: PluginInfo, env: ContractEnv) -> BaseModel:
    """Options to build a plugin with: its defaults, a kind convention, or its own example.

    An options model with required fields gives an example through
    ``model_config = ConfigDict(json_schema_extra={"examples": [{...}]})``.
    """
    candidates: list[dict[str, Any]] = [{}]
    if plugin.kind == "tasks":
        candidates.append({"path": str(env.tasks_dir)})
    extra = plugin.options.model_config.get("json_schema_extra")
    if isinstance(extra, dict):
        candidates.extend(extra.get("examples", []))
    errors = []
    for raw in candidates:
        try:
            return plugin.options.model_validate(raw)
        except ValidationError as exc:
            errors.append(str(exc))
    raise ContractError(
        f"{plugin.kind} plugin {plugin.name!r}: options need values the kit cannot guess; "
        "give an example via json_schema_extra={'examples': [...]}\n" + "\n".join(errors)
    )


def build(plugin: PluginInfo, env: ContractEnv) -> Any:
    return plugin.factory(example_options(plugin, env), env.build_context())


def _problems(component: Any) -> list[Problem]:
    found = component.preflight() if hasattr(component, "preflight") else []
    _expect(isinstance(found, list), "preflight() must return a list of Problem")
    _expect(all(isinstance(p, Problem) for p in found), "preflight() items must be Problem")
    return found


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ContractError(message)


# ------------------------------------------------------------------ contracts per kind


def tasks_contract(component: Any, env: ContractEnv) -> None:
    tasks = component.tasks()
    _expect(isinstance(tasks, list) and tasks, "tasks() must return a non-empty list")
    names = [t.name for t in tasks]
    _expect(len(set(names)) == len(names), f"task names must be unique: {names}")
    for task in tasks:
        _expect(isinstance(task, Task), "tasks() items must be lego_rl.kinds.Task")
        _expect(task.instruction.strip() != "", f"task {task.name}: empty instruction")
        _expect((task.path / "tests").is_dir(), f"task {task.name}: no tests/ directory")


def sandbox_contract(component: Any, env: ContractEnv) -> None:
    if [p for p in _problems(component) if p.fatal]:
        raise ContractError(f"sandbox preflight failed: {_problems(component)}")
    sandbox: Sandbox = component.start(env.task(), "contract-trial")
    try:
        out = sandbox.exec("echo hello", timeout=30)
        _expect(out.exit_code == 0 and out.stdout.strip() == "hello", f"echo failed: {out}")
        _expect(sandbox.exec("exit 3", timeout=30).exit_code == 3, "exit code not propagated")
        src = env.tmp / "upload.txt"
        src.write_text("payload\n")
        sandbox.upload(src, "/tests/upload.txt")
        out = sandbox.exec("cat /tests/upload.txt", timeout=30)
        _expect(out.stdout == "payload\n", f"upload not visible inside: {out}")
        sandbox.exec(f"echo made > {sandbox.workdir}/made.txt", timeout=30)
        dst = env.tmp / "made.txt"
        sandbox.download(f"{sandbox.workdir}/made.txt", dst)
        _expect(dst.read_text() == "made\n", "download did not return the file")
        start = time.monotonic()
        out = sandbox.exec("sleep 30", timeout=1)
        _expect(out.timed_out, "a command past its timeout must report timed_out")
        _expect(time.monotonic() - start < 10, "timeout did not stop the command promptly")
        url = sandbox.endpoint_url("http://127.0.0.1:9/s/x")
        _expect(url.startswith("http"), f"endpoint_url must return a URL, got {url!r}")
    finally:
        sandbox.stop()


CONFORMANCE_COMMANDS = [
    "sed -i 's/a - b/a + b/' calc.py",
    "python3 -c 'from calc import add; assert add(2, 3) == 5' && echo tests pass",
]
"""Shell commands that solve the kit's fix-add task (edit the file, run the tests) from its
working directory. A harness turns them into its own tool calls (``conformance_script``)."""
HARNESS_CONTEXT = 32768
"""Context of the conformance policy: a harness's first request can be long (tools, system)."""


def harness_contract(component: Any, env: ContractEnv) -> None:
    """Static checks; then, for a harness with ``conformance_script(commands) -> turns``, two
    trials through the proxy with the ``scripted`` policy on fix-add: the solving script must
    earn reward 1 and the empty one 0, each with one call per turn, every sampled token trained.
    """
    _expect(isinstance(component.dialect, str) and component.dialect, "harness needs a dialect")
    _expect(
        component.dialect in env.registry.names("dialect"),
        f"harness speaks {component.dialect!r}, which no installed dialect plugin serves",
    )
    fatal = [str(p) for p in _problems(component) if p.fatal]
    _expect(not fatal, f"harness preflight failed: {'; '.join(fatal)}")
    if not hasattr(component, "conformance_script"):
        return
    for commands, expected in ((CONFORMANCE_COMMANDS, 1.0), ([], 0.0)):
        turns = component.conformance_script(list(commands))
        result, sampled = scripted_trial(component, turns, env, f"contract-harness-{int(expected)}")
        what = f"{'solving' if commands else 'do-nothing'} script"
        _expect(
            result.termination == Termination.COMPLETED,
            f"{what}: trial ended {result.termination}: {result.reason}",
        )
        _expect(result.reward == expected, f"{what}: reward {result.reward} != {expected}")
        _expect(result.calls == len(turns), f"{what}: {result.calls} calls for {len(turns)} turns")
        trained = result.trajectory.trained_tokens if result.trajectory else 0
        _expect(
            trained == sampled > 0,
            f"{what}: {trained} trained tokens, but the policy sampled {sampled}",
        )


def scripted_trial(
    harness: Any, turns: list[dict[str, Any]], env: ContractEnv, trial_id: str
) -> tuple[TrialResult, int]:
    """One trial of ``harness`` on fix-add, the ``scripted`` policy answering with ``turns``
    through the proxy; returns the result and the number of completion tokens sampled."""
    from lego_rl.engine.trial import TrialRunner, TrialSetup
    from lego_rl.proxy.server import ProxyServer

    for kind, name in (("inference", "scripted"), ("verifier", "test-script")):
        _expect(name in env.registry.names(kind), f"the harness contract needs the {kind} plugin {name!r}")
    env = replace(env, model=env.model.model_copy(update={"max_context": HARNESS_CONTEXT}))
    ctx = env.build_context()
    inference = env.registry.build("inference", "scripted", {"turns": turns, "device": "cpu"}, ctx)
    calls: list[CallRecord] = []
    proxy = ProxyServer(
        inference,
        {harness.dialect: env.registry.build("dialect", harness.dialect, None, ctx)},
        model_name=env.model.name,
        max_context=HARNESS_CONTEXT,
        chat_template=env.model.chat_template,
        on_call=calls.append,
    )
    setup = TrialSetup(
        sandbox=env.sandbox_backend(),
        harness=harness,
        verifier=env.registry.build("verifier", "test-script", None, ctx),
        proxy=proxy,
        dialect=harness.dialect,
        model_name=env.model.name,
        sampling=Sampling(temperature=1.0, max_tokens=512),
        max_calls=len(turns) + 2,
    )
    proxy.start()
    try:
        result = TrialRunner(setup).run(env.task("fix-add"), trial_id)
    finally:
        proxy.stop()
    return result, sum(len(c.completion_ids) for c in calls if c.error is None)


def dialect_contract(component: Any, env: ContractEnv) -> None:
    _expect(isinstance(component.name, str) and component.name, "dialect needs a name")
    routes = list(component.routes)
    _expect(routes, "dialect must serve at least one route")
    for method, path in routes:
        _expect(method in {"GET", "POST", "HEAD"}, f"bad method {method}")
        _expect(path.startswith("/"), f"route {path!r} must start with /")
    body = component.error(400, "bad request", "invalid_request_error")
    json.dumps(body)


def verifier_contract(component: Any, env: ContractEnv) -> None:
    backend = env.sandbox_backend()
    task = env.task()
    for solve, expected in ((True, 1.0), (False, 0.0)):
        sandbox = backend.start(task, f"contract-verify-{int(solve)}")
        try:
            if solve:
                sandbox.upload(task.path / "solution", "/solution")
                out = sandbox.exec("bash /solution/solve.sh", timeout=60)
                _expect(out.exit_code == 0, f"oracle failed: {out}")
            verdict = component.score(sandbox, task)
        finally:
            sandbox.stop()
        _expect(
            verdict.reward == expected,
            f"reward {verdict.reward} != {expected} ({'oracle' if solve else 'untouched'})",
        )


def anticheat_contract(component: Any, env: ContractEnv) -> None:
    _expect(isinstance(component.name, str) and component.name, "anticheat needs a name")
    backend = env.sandbox_backend()
    task = env.task()
    sandbox = backend.start(task, "contract-anticheat")
    try:
        _expect(component.before_agent(sandbox, task) == [], "honest trial flagged before agent")
        _expect(component.before_verify(sandbox, task) == [], "honest trial flagged before verify")
    finally:
        sandbox.stop()


def filter_contract(component: Any, env: ContractEnv) -> None:
    tasks = [env.task()]
    kept = component.select_tasks(tasks)
    _expect(all(t in tasks for t in kept), "select_tasks must return a subset of its input")
    group = [_result(1.0), _result(0.0)]
    _expect(isinstance(component.keep_group(group), bool), "keep_group must return a bool")


def optimizer_contract(component: Any, env: ContractEnv) -> None:
    adv = component.advantages([_result(r) for r in (1.0, 0.0, 1.0, 0.0)])
    _expect(len(adv) == 4 and all(math.isfinite(a) for a in adv), f"bad advantages {adv}")
    _expect(adv[0] > adv[1], "a rewarded trial must get a higher advantage than a failed one")
    flat = component.advantages([_result(1.0), _result(1.0)])
    _expect(all(a == 0 for a in flat), "a group whose rewards agree carries no advantage")


def inference_contract(component: Any, env: ContractEnv) -> None:
    _problems(component)
    tok = component.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    ids = tok.encode(text, add_special_tokens=False)
    gen = component.generate(list(ids), Sampling(max_tokens=4, temperature=1.0))
    n = len(gen.completion_ids)
    _expect(1 <= n <= 4, f"expected 1..4 tokens, got {n}")
    _expect(len(gen.logprobs) == n, "one log-prob per sampled token")
    _expect(all(lp <= 1e-6 for lp in gen.logprobs), "log-probs must be <= 0")
    if gen.routing is not None:
        _expect(len(gen.routing) == n, "one routing entry per sampled token")
    _expect(isinstance(component.policy_version, int), "policy_version must be an int")


def trainer_contract(component: Any, env: ContractEnv) -> None:
    _problems(component)
    _expect(callable(getattr(component, "run", None)), "trainer must have run(ctx)")


def observer_contract(component: Any, env: ContractEnv) -> None:
    record = CallRecord(
        session="t", index=0, dialect="openai-chat", prompt_ids=[1], completion_ids=[2], logprobs=[-0.1]
    )
    for kind, data in (
        ("run_start", {"run_dir": str(env.tmp)}),
        ("call", {"record": record}),
        ("trial_end", {"result": _result(1.0)}),
        ("step", {"step": 0, "reward_mean": 0.5}),
        ("run_end", {"status": "ok"}),
    ):
        component.emit(Event(kind=kind, data=data, time=time.time()))
    component.close()


CONTRACTS: dict[str, Callable[[Any, ContractEnv], None]] = {
    "tasks": tasks_contract,
    "sandbox": sandbox_contract,
    "harness": harness_contract,
    "dialect": dialect_contract,
    "verifier": verifier_contract,
    "anticheat": anticheat_contract,
    "filter": filter_contract,
    "optimizer": optimizer_contract,
    "inference": inference_contract,
    "trainer": trainer_contract,
    "observer": observer_contract,
}


def check(plugin: PluginInfo, env: ContractEnv) -> None:
    """Build ``plugin`` and run its kind's contract; raises ContractError on a breach."""
    env.tmp.mkdir(parents=True, exist_ok=True)
    try:
        CONTRACTS[plugin.kind](build(plugin, env), env)
    finally:
        shutil.rmtree(env.tmp / "conformance", ignore_errors=True)


def _result(reward: float) -> TrialResult:
    return TrialResult(trial_id=f"t{reward}", task="t", reward=reward, termination=Termination.COMPLETED)
