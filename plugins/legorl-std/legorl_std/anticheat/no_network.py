"""Anti-cheat ``no-network``: the agent phase has no route out.

Before the agent runs, the sandbox must show no network interface but loopback (so no
DNS, TCP, UDP or raw packets leave it; the proxy is relayed on loopback). A sandbox that
fails this is misconfigured: the trial ends as an infrastructure error, not a cheat. The
verifier phase gets what the task declares; that is the sandbox's business.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.kinds import CheatDemo, Check, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy, PolicyError


class NoNetworkOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoNetwork(CheckedPolicy):
    name = "no-network"

    def before_agent_check(self, sandbox: Sandbox, task: Task) -> Check:
        def judge(text: str) -> list[Violation]:
            interfaces = interface_names(text)
            if interfaces - {"lo"}:
                raise PolicyError(
                    f"no-network: the agent phase of {task.name} sees network interfaces "
                    f"{sorted(interfaces)}; the sandbox must give it loopback only "
                    "(local sandbox: agent_network: false)"
                )
            return []

        return Check(self.name, "cat /proc/net/dev", judge)

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """A routed interface in the agent phase (no agent can add one: a sandbox's doing)."""
        return CheatDemo("before_agent", seen=_PROC_NET_DEV_ROUTED)


_PROC_NET_DEV_ROUTED = """Inter-|   Receive                            |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0:    1280      12    0    0    0     0          0         0      960      10    0    0    0     0       0          0
"""


def interface_names(proc_net_dev: str) -> set[str]:
    """Names of the network interfaces in ``/proc/net/dev``'s text."""
    return {line.split(":", 1)[0].strip() for line in proc_net_dev.splitlines()[2:] if ":" in line}


def build(options: NoNetworkOptions, ctx: BuildContext) -> NoNetwork:
    """The agent phase sees loopback only (checked before the agent runs)."""
    return NoNetwork()


def register(register: Any) -> None:
    register("no-network", build, options=NoNetworkOptions)
