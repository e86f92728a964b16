#!/usr/bin/env bash
# Oracle fix: reaching the pass mark is enough (>=, not >).
set -euo pipefail
cd /app
sed -i 's/score > PASS_MARK/score >= PASS_MARK/' grades.py
grep -qF 'score >= PASS_MARK' grades.py
