#!/usr/bin/env bash
# Verifier (Harbor): run this task's tests; write 1 (pass) or 0 (fail) to the reward file.
set -u
mkdir -p /logs/verifier
PYTHON="$(command -v python3 || command -v python || true)"
if [ -z "$PYTHON" ]; then
  echo "test.sh: no python3 or python on PATH" >&2
  echo 0 > /logs/verifier/reward.txt
  exit 1
fi
cd /app
# -I: ignore PYTHON* variables and keep /app off the front of sys.path; -B: no .pyc in /app.
# Under lego-rl's verifier its test reporter runs the tests and reports each one (per-test
# grading, [metadata] required_tests); elsewhere the test file runs itself.
run_tests() {
  if [ -n "${LEGORL_REPORT:-}" ]; then "$PYTHON" -I -B "$LEGORL_REPORT" unittest "$@"; else "$PYTHON" -I -B "$@"; fi
}
if run_tests /tests/test_stats.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
  exit 1
fi
