"""Anti-cheat ``reward-guard``: the reward comes only from the verifier.

Before the verifier, ``/logs/verifier`` must be an empty real directory: a reward file, a
symlink or anything else the agent put there is a violation (the sandbox then recreates the
directory fresh for the verifier anyway, see ``LocalSandbox.begin_verify``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.kinds import CheatDemo, Check, Sandbox, Task, Violation
from lego_rl.registry import BuildContext
from legorl_std.anticheat.common import CheckedPolicy
from legorl_std.verifier.test_script import REWARD_DIR

_CHECK = f"""d={REWARD_DIR}
if [ -L "$d" ] || {{ [ -e "$d" ] && [ ! -d "$d" ]; }}; then echo "$d";
elif [ -d "$d" ]; then find "$d" -mindepth 1 -maxdepth 2 -print 2>/dev/null; fi; true"""


class RewardGuardOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RewardGuard(CheckedPolicy):
    name = "reward-guard"

    def before_verify_check(self, sandbox: Sandbox, task: Task) -> Check:
        def judge(text: str) -> list[Violation]:
            found = [line for line in text.splitlines() if line]
            return [Violation(self.name, f"the agent phase wrote {line} (only the verifier writes there)") for line in found]

        return Check(self.name, _CHECK, judge)

    def cheat_demonstration(self, scratch: Path) -> CheatDemo:
        """The agent writes its own reward file."""
        reward = f"{REWARD_DIR}/reward.txt"
        return CheatDemo("before_verify", stage=f"mkdir -p {REWARD_DIR} && echo 1 > {reward}", works=f"test -s {reward}")


def build(options: RewardGuardOptions, ctx: BuildContext) -> RewardGuard:
    """Nothing the agent writes to /logs/verifier counts; writing there is blocked."""
    return RewardGuard()


def register(register: Any) -> None:
    register("reward-guard", build, options=RewardGuardOptions)
