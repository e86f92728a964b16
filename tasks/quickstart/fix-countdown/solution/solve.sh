#!/usr/bin/env bash
# Oracle fix: the range must stop after 1, not before it.
set -euo pipefail
cd /app
sed -i 's/range(n, 1, -1)/range(n, 0, -1)/' countdown.py
grep -qF 'range(n, 0, -1)' countdown.py
