"""Anti-cheat ``no-network``: the agent phase has no route out.

Before the agent runs, the sandbox must show no network interface but loopback (so no
DNS, TCP, UDP or raw packets leave it; the proxy is relayed on loopback). A sandbox that
fails this is misconfigured: the trial ends as an infrastructure error, not a cheat. The
verifier phase gets what the task declares; that is the sandbox's business.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.data import TrialResult
from lego_rl.kinds import Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import PolicyError, run


class NoNetworkOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoNetwork:
    name = "no-network"

    def before_agent(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        interfaces = interfaces_inside(sandbox)
        if interfaces - {"lo"}:
            raise PolicyError(
                f"no-network: the agent phase of {task.name} sees network interfaces "
                f"{sorted(interfaces)}; the sandbox must give it loopback only "
                "(local sandbox: agent_network: false)"
            )
        return []

    def before_verify(self, sandbox: Sandbox, task: Task) -> list[Violation]:
        return []

    def after(self, sandbox: Sandbox, task: Task, result: TrialResult) -> list[Violation]:
        return []


def interfaces_inside(sandbox: Sandbox) -> set[str]:
    """Names of the network interfaces a command in the sandbox sees."""
    text = run(sandbox, "cat /proc/net/dev")
    return {line.split(":", 1)[0].strip() for line in text.splitlines()[2:] if ":" in line}


def build(options: NoNetworkOptions, ctx: BuildContext) -> NoNetwork:
    """The agent phase sees loopback only (checked before the agent runs)."""
    return NoNetwork()


def register(register: Any) -> None:
    register("no-network", build, options=NoNetworkOptions)
