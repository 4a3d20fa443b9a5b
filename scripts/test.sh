#!/usr/bin/env bash
# Install eval_pipeline with its test dependencies and the test harness (harness/) into .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]" -e ./harness
# Every test, on every core (pytest-xdist; worksteal evens out the few long server tests), with the thorough
# Hypothesis profile. Arguments are passed on, e.g. `bash scripts/test.sh -m "not integration and not slow"`.
.venv/bin/python -m pytest -n auto --dist worksteal --hypothesis-profile=ci "$@"
