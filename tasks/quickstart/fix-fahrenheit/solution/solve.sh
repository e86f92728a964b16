#!/usr/bin/env bash
# Oracle fix: the freezing point of water is 32 degrees Fahrenheit.
set -euo pipefail
cd /app
sed -i 's/^FREEZING_F = 23$/FREEZING_F = 32/' convert.py
grep -qF 'FREEZING_F = 32' convert.py
