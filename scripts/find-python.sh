#!/usr/bin/env bash
# Print the path of a Python >= 3.12 (the project's interpreter; Harbor requires it).
# Honours $PYTHON; tries python3.12/python3/python3.13 on PATH, then pyenv-installed versions.
set -euo pipefail

ok() { "$@" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
real() { "$@" -c 'import sys; print(sys.executable)'; }

if [[ -n "${PYTHON:-}" ]]; then
    ok "$PYTHON" && { real "$PYTHON"; exit 0; }
    echo "PYTHON=$PYTHON is not a Python >= 3.12" >&2; exit 1
fi
for cand in python3.12 python3 python3.13; do
    command -v "$cand" >/dev/null 2>&1 && ok "$cand" && { real "$cand"; exit 0; }
done
# pyenv shims fail unless a version is selected: look at the installed versions directly.
root="${PYENV_ROOT:-$HOME/.pyenv}"
# 3.12 first: the version every pinned dependency (torch, verl, vLLM, Harbor) supports.
for dir in $(ls -d "$root"/versions/3.12* "$root"/versions/3.1[3-9]* 2>/dev/null); do
    for exe in "$dir"/bin/python3.1[2-9]; do
        [[ -x "$exe" ]] && ok "$exe" && { real "$exe"; exit 0; }
    done
done
echo "no Python >= 3.12 found: install one (e.g. 'pyenv install 3.12') or set PYTHON=/path/to/python3.12" >&2
exit 1
