"""The dirs above a container's read-only harness mounts: traversable by the agent's user,
not listable, and a dir the image lacks is no error."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from legorl_std.sandbox.mounts import traverse_above


def test_dirs_above_the_targets_get_search_permission_only(tmp_path: Path) -> None:
    home = tmp_path / "root"
    (home / ".pyenv" / "versions").mkdir(parents=True)
    home.chmod(0o700)
    (home / ".pyenv").chmod(0o700)
    targets = [str(home / ".pyenv" / "versions"), str(tmp_path / "absent" / "bin" / "tool")]
    script = traverse_above(targets)
    assert str(home / ".pyenv" / "versions") + ";" not in script  # the target itself is the mount's
    done = subprocess.run(["bash", "-c", script + "echo end"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "end\n", done.stderr
    for d in (home, home / ".pyenv"):
        mode = stat.S_IMODE(d.stat().st_mode)
        assert mode & stat.S_IXOTH and not mode & stat.S_IROTH, oct(mode)
    assert not (tmp_path / "absent").exists()
    assert traverse_above(["/opt"]) == ""  # nothing above but /
