"""Git leftovers found by what they hold, not by their names: a shell scan for the sandbox.

A copy of a repository's objects is usable whatever it is called, so the scan reads the
first 12 bytes of every file of at least 12 bytes under the roots (one ``head | od`` per
batch of files, not per file) and knows git's formats by their signatures:

- pack (``PACK`` + version 2 or 3), pack index (``\\377tOc`` v2), bundle (``# v2 git bundle``
  / ``# v3 git bundle``), multi-pack-index (``MIDX`` v1), commit-graph (``CGPH`` v1), pack
  reverse index (``RIDX`` v1);
- a loose object: a zlib header (any of the 32 valid ones without a preset dictionary);
  git confirms it by reading the file's header as an object of a scratch repository (the
  name git looks up need not be the object's hash), so a text that happens to start
  ``x^`` is left alone.

No git format fits in fewer than 12 bytes (a pack's header alone is 12, the smallest loose
object 15), so smaller files are skipped unread. Directories are repositories when named
``.git`` or when they hold ``objects/`` beside ``refs/`` or ``HEAD`` and git or the usual
``objects/pack`` / ``objects/info`` layout confirms it; they go as a whole. Archives (a tar
or zip of a ``.git``) are not opened: like any other encoding of the objects (base64, xor)
they are out of reach of a signature scan.

The script needs ``find``, ``head``, ``od``, ``grep``, ``ls`` and ``git`` inside, not python.
"""

from __future__ import annotations

import shlex
from typing import Literal

_ZLIB = [(c, f) for c in range(0x08, 0x80, 0x10) for f in range(256) if (c * 256 + f) % 31 == 0 and not f & 0x20]
"""zlib's two header bytes: deflate with any window (CMF), a valid check, no preset dictionary."""
SIGNATURES = {
    "pack": "50 41 43 4b 00 00 00 0[23]",
    "pack-index": "ff 74 4f 63 00 00 00 02",
    "bundle": "23 20 76 3[23] 20 67 69 74 20 62 75 6e",  # "# v2 git bun"
    "multi-pack-index": "4d 49 44 58 01",
    "commit-graph": "43 47 50 48 01",
    "pack-reverse-index": "52 49 44 58 00 00 00 01",
    "loose-object": "(" + "|".join(f"{c:02x} {f:02x}" for c, f in _ZLIB) + ")",
}
"""Each kind's first bytes as ``od -tx1`` writes them (a regular expression)."""

_FAKE = "1" * 40
_END = "legorl-scan\n"
"""The content of a file read after the others: its line in the output shows they lined up."""
_END_HEX = " ".join(f"{b:02x}" for b in _END.encode())
_CASES = "\n".join(
    f'  " {sig[:5]}"*) what={kind} ;;' for kind, sig in SIGNATURES.items() if kind != "loose-object"
)
_FIRST_BYTES = "'^ (" + "|".join([*SIGNATURES.values(), _END_HEX]) + ")'"
_SCAN = f"""# sh -c "$SCAN" scan MODE dir|file PATH...: act on the git leftovers among PATHs
mode=$1 kind=$2; shift 2
ulimit -c 0
hit() {{
  if [ "$mode" = report ]; then echo "leftover $1 $2"; return; fi
  : > "$S/removed"; rm -rf -- "$2" 2>/dev/null  # a mount point stays, emptied
  if [ -e "$2" ] && [ -n "$(ls -A -- "$2" 2>/dev/null)" ]; then echo "could not remove $1 $2" >&3
  else echo "removed $1 $2" >&3; fi
}}
loose() {{  # git reads $1 as an object (under a made-up name: git does not check it here)
  [ -d "$S/r" ] || git init -q --bare --template= "$S/r" >/dev/null 2>&1 || return 1
  mkdir -p "$S/r/objects/{_FAKE[:2]}" && head -c 65536 -- "$1" > "$S/r/objects/{_FAKE[:2]}/{_FAKE[2:]}" || return 1
  case $(git --git-dir="$S/r" cat-file -t {_FAKE} 2>/dev/null) in blob|tree|commit|tag) return 0 ;; esac
  return 1
}}
if [ "$kind" = dir ]; then
  case $1 in */.git) hit repository "$1"; exit 0 ;; esac
  d=${{1%/objects}}
  [ "$d" != "$W" ] || exit 1
  [ -d "$d/refs" ] || [ -f "$d/HEAD" ] || exit 1
  [ -d "$1/pack" ] || [ -d "$1/info" ] || git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1 || exit 1
  hit repository "$d"; exit 0
fi
for f; do shift; [ -f "$f" ] && set -- "$@" "$f"; done  # less those a removal took away
[ $# -gt 0 ] || exit 0
# one line of hex per file: its first 12 bytes; the line numbers of those git knows
[ -e "$S/end" ] || printf '{_END.strip()}\\n' > "$S/end"
hits=$(head -q -c 12 -- "$@" "$S/end" 2>/dev/null | od -An -v -tx1 -w12 | grep -n -E {_FIRST_BYTES})
if [ "${{hits##*"
"}}" != "$(($# + 1)): {_END_HEX}" ]; then  # a file went missing or shrank: one at a time
  hits=$(for f; do l=$(head -c 12 -- "$f" 2>/dev/null | od -An -v -tx1 -w12); echo "${{l:- --}}"; done |
    grep -n -E {_FIRST_BYTES})
fi
[ -n "$hits" ] && printf '%s\\n' "$hits" | while IFS=: read -r i hex; do
  [ "$i" -le $# ] || continue
  eval "f=\\${{$i}}"
  case $hex in
{_CASES}
  *) loose "$f" || continue; what=loose-object ;;
  esac
  hit "$what" "$f"
done
true
"""

SETUP = f"""LC_ALL=C; export LC_ALL
unset GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_INDEX_FILE
GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; export GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL
for tool in find head od grep ls git; do
  command -v $tool >/dev/null || {{ echo "git leftover scan: $tool is missing in the sandbox" >&2; exit 6; }}
done
S=$(mktemp -d) || exit 5
export S W
trap 'rm -rf "$S"' EXIT
SCAN={shlex.quote(_SCAN)}
"""
"""Sets up the scan (needs ``$W``, the workdir, whose ``.git`` is never scanned): a
scratch dir ``$S`` removed on exit, git not steered by environment or config. After a
``remove`` scan, ``$S/removed`` exists if it found anything."""


def scan(roots: list[str], mode: Literal["remove", "report"]) -> str:
    """The scan of ``roots`` after :data:`SETUP`: ``remove`` deletes each leftover (stderr:
    ``removed KIND PATH``), ``report`` prints ``leftover KIND PATH`` for each. find's own
    complaints (unreadable dirs, paths a removal took away) are dropped."""
    where = " ".join(shlex.quote(r) for r in roots)
    run = f'sh -c "$SCAN" scan {mode}'
    return (
        f"find {where} -xdev \\( -path \"$W/.git\" -o -path \"$S\" -o -path /proc -o -path /sys -o -path /dev \\) "
        f"-prune -o \\( -name .git -o -type d -name objects \\) -exec {run} dir {{}} \\; -prune "
        f"-o -type f -size +11c -readable -exec {run} file {{}} + 3>&2 2>/dev/null; true"
    )
