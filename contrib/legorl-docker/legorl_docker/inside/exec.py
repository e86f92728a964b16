"""Wraps one command of a trial: ``python3 -I -S /run/legorl/exec.py N`` (run as root by
``docker exec``) reads the host's spec ``/run/legorl/exec/N.spec`` (NUL-separated fields: the
command, its cwd, uid, gid, the result stream's path or '', its variable, the rlimits as
``NAME:SOFT:HARD``, then ``KEY=VALUE`` of the environment; no json: its import costs a start), writes its own pid to
``N.pid`` (the host tracks the command by it), makes itself a child subreaper (what the command
starts stays in its tree), opens the result stream where there is one (a root-only host file,
so nothing inside can open it by path, only this descriptor), sets the resource limits, drops
to the trial's user and becomes ``bash -c COMMAND`` (the image's own bash, found on the system
PATH, never on the trial's, where the agent may put a shim first).
"""

import ctypes
import os
import resource
import sys

RUN = "/run/legorl/exec"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PR_SET_CHILD_SUBREAPER = 36


def main():
    n = sys.argv[1]
    with open(f"{RUN}/{n}.spec", encoding="utf-8", errors="surrogateescape", newline="") as f:  # a CR stays a CR
        command, cwd, uid, gid, results, results_env, rlimits, *pairs = f.read().split("\0")
    with open(f"{RUN}/{n}.pid.partial", "w") as f:
        f.write(str(os.getpid()))
    os.rename(f"{RUN}/{n}.pid.partial", f"{RUN}/{n}.pid")
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
    if results:
        fd = os.open(results, os.O_WRONLY | os.O_APPEND)
        os.set_inheritable(fd, True)
        env[results_env] = str(fd)
    for limit in filter(None, rlimits.split(" ")):
        name, soft, hard = limit.split(":")
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
    os.setgroups([])
    os.setgid(int(gid))
    os.setuid(int(uid))
    try:
        os.chdir(cwd)
    except OSError as exc:
        sys.stderr.write(f"legorl-exec: cannot enter {cwd}: {exc.strerror}\n")
        sys.exit(1)
    bash = next((d + "/bash" for d in SYSTEM_PATH.split(":") if os.access(d + "/bash", os.X_OK)), "bash")
    os.execve(bash, ["bash", "-c", command], env)


main()
