#!/usr/bin/env bash
# Oracle fix: divide the sum by the count instead of multiplying.
set -euo pipefail
cd /app
sed -i 's/sum(values) \* len(values)/sum(values) \/ len(values)/' stats.py
grep -qF 'sum(values) / len(values)' stats.py
