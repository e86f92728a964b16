#!/usr/bin/env bash
# Set up everything lego-rl needs on a fresh machine: system packages, a virtualenv with
# the core and the first-party plugins. Idempotent and fast when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${LEGORL_VENV:-.venv}"
STAMP="$VENV/.legorl-setup"

# bubblewrap: the local sandbox runs every trial command inside it.
if ! command -v bwrap >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing bubblewrap (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
    else
        echo "warning: bubblewrap (bwrap) is missing; the local sandbox needs it: sudo apt-get install bubblewrap" >&2
    fi
fi

want="$(cat pyproject.toml plugins/*/pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/legorl" ]]; then
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    PY="$(scripts/find-python.sh)"
    echo "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
pip_install() {
    # pip's notes about unreadable local index locations are noise here.
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
        | { grep -v "^WARNING: Location '.*' is ignored" || true; }
    return "${PIPESTATUS[0]}"
}
# torch first and pinned: an unpinned resolve would pull a newer multi-GB build.
pip_install "torch==2.13.0"
pip_install -e ".[test]" -e plugins/legorl-std -e plugins/legorl-embedded -e plugins/legorl-mini-swe-agent
echo "$want" > "$STAMP"
echo "setup done: $VENV"
