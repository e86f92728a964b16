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

# chromium (Debian package): the dashboard's browser test drives it headless through
# Playwright (never a downloaded browser).
if [[ ! -x /usr/bin/chromium ]]; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing chromium (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    else
        echo "warning: chromium is missing; the dashboard browser test is skipped: sudo apt-get install chromium" >&2
    fi
fi

# Harness CLIs from npm (claude-code, codex; opencode, the worked third-party example in
# contrib/): each distribution pins its CLI in
# package.json + package-lock.json; `npm ci` installs it into that distribution's node_modules
# (the native binaries come as the packages' optional npm dependencies). Cached per lock file.
for lock in plugins/*/package-lock.json contrib/*/package-lock.json; do
    [[ -f "$lock" ]] || continue
    dir="$(dirname "$lock")"
    stamp="$dir/node_modules/.legorl-npm-ci"
    lock_sum="$(sha256sum "$lock" | cut -d' ' -f1)"
    [[ -f "$stamp" && "$(cat "$stamp")" == "$lock_sum" ]] && continue
    if ! command -v npm >/dev/null 2>&1; then
        echo "warning: npm is missing; the harness in $dir needs it: apt-get install npm, then rerun scripts/setup.sh" >&2
        continue
    fi
    echo "installing the pinned harness CLI in $dir (npm ci)"
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) && echo "$lock_sum" > "$stamp"
done

# OpenHands CLI: its own virtualenv (its pins conflict with ours, e.g. rich<14.3; ~800 MB, a few
# minutes), which the openhands harness plugin finds next to itself. Cached per requirements file.
oh="plugins/legorl-openhands"
oh_sum="$(sha256sum "$oh/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$oh/.venv/bin/openhands" || "$(cat "$oh/.venv/.legorl-req" 2>/dev/null)" != "$oh_sum" ]]; then
    echo "installing the pinned OpenHands CLI in $oh/.venv (a few minutes)"
    rm -rf "$oh/.venv"
    if "$(scripts/find-python.sh)" -m venv "$oh/.venv" \
        && "$oh/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$oh/requirements.txt" 2>&1 \
            | { grep -v "^WARNING: Location '.*' is ignored" || true; } \
        && [[ -x "$oh/.venv/bin/openhands" ]]; then
        echo "$oh_sum" > "$oh/.venv/.legorl-req"
    else
        echo "warning: the OpenHands CLI could not be installed into $oh/.venv; rerun scripts/setup.sh" >&2
        rm -rf "$oh/.venv"
    fi
fi
want="$(cat pyproject.toml plugins/*/pyproject.toml contrib/*/pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
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
pip_install -e ".[test]" -e plugins/legorl-std -e plugins/legorl-embedded -e plugins/legorl-mini-swe-agent \
    -e plugins/legorl-claude-code -e plugins/legorl-codex -e contrib/legorl-opencode \
    -e plugins/legorl-openhands -e plugins/legorl-harbor -e plugins/legorl-swe-bench \
    -e plugins/legorl-vllm -e plugins/legorl-verl
echo "$want" > "$STAMP"
echo "setup done: $VENV"
