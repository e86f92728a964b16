"""The red-team subset that applies to any sandbox backend: the attacks plugins register
(``legorl_register_attacks``: ``legorl-std``'s) on the
network, on hidden host files and other trials, on what the view shows of the host, and on
resources, each run as commands in a
sandbox of the kit's fix-add task (its bug: ``a - b`` in ``/app/calc.py``).

An attack must not get the fix into ``/app/calc.py``, must not outlive its timeout, and must
leave the sandbox usable. ``memory-bomb`` is left out (with no memory limit that the protocol
promises, it would take gigabytes of the test machine's memory), and ``infinite-loop`` repeats
the timeouts contract. Attacks on the tests, the reward file, the task's own git history and
background survivors are the anti-cheat policies' (``legorl redteam`` runs those).
"""

from __future__ import annotations

import secrets
import shlex
from typing import Any

from lego_rl.kinds import Sandbox, TrialsRoot
from lego_rl.registry import Registry
from lego_rl.testing.bait import Bait
from lego_rl.testing.contracts.base import ContractEnv, ContractError, contract, expect
from lego_rl.testing.contracts.sandbox import brief, no_leftovers, started, storage_task
from lego_rl.testing.contracts.sandbox_isolation import (
    ENDPOINT_BODY,
    file_digests,
    serving,
)

CATEGORIES = ("network", "hidden", "view")
RESOURCE_ATTACKS = ("fd-exhaustion", "fork-bomb", "disk-fill")
"""In this order: disk-fill leaves the disk full."""
ATTACK_TIMEOUT = 15.0
RESOURCE_TIMEOUT = 2.0
FIX = "sed -i 's/a - b/a + b/' /app/calc.py"
FIXED = "def add(a, b):\n    return a + b\n"


def sandbox_attacks(registry: Registry) -> list[Any]:
    """The red-team attacks this contract runs, as plugins register them
    (``legorl_register_attacks``: legorl-std's)."""
    attacks = registry.attacks()
    if not attacks:
        raise ContractError(
            "the red-team contract runs the attacks plugins register, and none does: "
            "pip install legorl-std"
        )
    by_name = {a.name: a for a in attacks}
    missing = [n for n in RESOURCE_ATTACKS if n not in by_name]
    expect(not missing, f"legorl-std's red-team suite has no attack {', '.join(missing)}; update legorl-std")
    return [a for a in attacks if a.category in CATEGORIES] + [by_name[n] for n in RESOURCE_ATTACKS]


@contract("sandbox", "redteam")
def redteam(backend: Any, env: ContractEnv) -> None:
    """legorl-std's attacks on the network, hidden host files, other trials and resources gain nothing"""
    attacks = sandbox_attacks(env.registry)  # first: says how to install legorl-std when it is missing
    task = storage_task(env)
    run_dir = env.build_context().run_dir or env.tmp
    task_files = file_digests(task.path)
    bait = Bait({"calc.py": FIXED})
    try:
        with (
            serving(ENDPOINT_BODY) as host_url,
            started(backend, env, "contract-redteam-other", task) as other,
            started(backend, env, "contract-redteam", task) as sandbox,
        ):
            fixed = other.exec(f"{FIX} && grep -c 'a + b' /app/calc.py", timeout=30)
            expect(fixed.exit_code == 0, f"could not fix calc.py in the bait trial: {brief(fixed)}")
            sandbox.endpoint_url(host_url)  # the network a harness would have
            out = sandbox.exec("cat /app/calc.py", timeout=30)
            expect("a - b" in out.stdout, f"the kit task's /app/calc.py is not in the sandbox: {brief(out)}")
            fill = {
                **bait.placeholders,
                "task": str(task.path),
                # where the backend keeps trial files on this host, if it says (local: root)
                "trials": str(backend.root if isinstance(backend, TrialsRoot) else run_dir),
                "py": "python3",
                "work": "/app",
                "module": "/app/calc.py",
                "name": "calc.py",
                "base": "calc.py",
                "marker": "'a + b'",
                "fixed_src": repr(FIXED),
            }
            for attack in attacks:
                _attack(sandbox, attack, fill)
        expect(
            file_digests(task.path) == task_files,
            f"the task's files on the host ({task.path}) changed during the attacks",
        )
    finally:
        bait.close()


def _attack(sandbox: Sandbox, attack: Any, fill: dict[str, str]) -> None:
    resource = attack.category == "resources"
    timeout = RESOURCE_TIMEOUT if resource else ATTACK_TIMEOUT
    token = f"legorl-attack-{secrets.token_hex(6)}"
    out = None
    for command in attack.commands:
        try:
            text = command.format_map(fill)
        except KeyError as exc:
            raise ContractError(
                f"attack {attack.name} needs a placeholder the kit does not fill: {exc}"
            ) from None
        out = sandbox.exec(f"bash -c {shlex.quote(text)} {token}", timeout=timeout)  # a hang: the test's timeout
    no_leftovers(token, f"attack {attack.name} ({attack.what})")
    check = sandbox.exec("cat /app/calc.py; echo legorl-alive", timeout=30)
    expect(
        "legorl-alive" in check.stdout,
        f"after attack {attack.name} ({attack.what}) the sandbox no longer runs commands: {brief(check)}",
    )
    expect(
        "a + b" not in check.stdout,
        f"attack {attack.name} ({attack.what}) got the fix into /app/calc.py, so the sandbox "
        f"let it through ({attack.category}); its last command gave: {brief(out) if out else '-'}",
    )
