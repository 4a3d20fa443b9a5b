#!/usr/bin/env bash
# Install eval_pipeline into .venv and evaluate the bundled sample data (both runs, every lane, gates, reports).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
# The sample holds planted personal data; real traces need EVAL_PIPELINE_DEID_KEY instead of the demo key.
.venv/bin/eval-pipeline run --data data --deid-demo "$@"
