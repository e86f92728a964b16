#!/usr/bin/env bash
# Oracle fix: the longest word is the max by length, not the min.
set -euo pipefail
cd /app
sed -i 's/return min(words(text), key=len)/return max(words(text), key=len)/' words.py
grep -qF 'return max(words(text), key=len)' words.py
