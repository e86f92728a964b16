#!/usr/bin/env bash
# Oracle fix: square(x) is power(x, 2), base first.
set -euo pipefail
cd /app
sed -i 's/power(2, x)/power(x, 2)/' powers.py
grep -qF 'power(x, 2)' powers.py
