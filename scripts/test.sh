#!/usr/bin/env bash
# Install eval_pipeline with its test dependencies and the test harness (harness/) into .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]" -e ./harness
.venv/bin/python -m pytest "$@"
