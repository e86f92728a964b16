#!/usr/bin/env bash
# Conformance task verifier: reward 1 iff add() adds.
mkdir -p /logs/verifier
cd /app
if python3 -c 'from calc import add; assert add(2, 3) == 5 and add(-1, 1) == 0'; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
