#!/usr/bin/env bash
# lego-rl's own Docker daemon for the docker sandbox (contrib/legorl-docker): no bridge, no
# NAT, its own socket and data root (see contrib/legorl-docker/legorl_docker/daemon.py).
#   scripts/dockerd.sh start|stop|status|host
# Then point the sandbox at it: DOCKER_HOST="$(scripts/dockerd.sh host)" (or its `host` option).
# Runs as root. The docker sandbox's tests start it themselves when it is down.
set -euo pipefail
cd "$(dirname "$0")/.."
py=python3
[[ -x .venv/bin/python ]] && py=.venv/bin/python
exec "$py" contrib/legorl-docker/legorl_docker/daemon.py "$@"
