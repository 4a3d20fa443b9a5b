"""Commands that do not validate a table never import Great Expectations (seconds of start-up, on the hot path of
`gate`, `show`, `compare` and `export`); `run` validates in a process of its own (quality/test_validator.py)."""

import subprocess
import sys

import pytest

PROBE = """
import sys
from eval_pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("exit", code, "great_expectations" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "command",
    [
        ["gate", "--candidate", "cand-42"],
        ["show", "rag-031", "--run", "cand-42"],
        ["compare", "retrieval_scores", "recall_at_10", "--run", "cand-42"],
        ["export", "retrieval_scores", "--format", "csv", "--output", "{tmp}/scores.csv"],
    ],
    ids=lambda c: c[0],
)
def test_a_command_that_does_not_validate_leaves_great_expectations_unimported(scored, tmp_path, command):
    warehouse = str(scored["warehouse"].root)
    options = ["--warehouse", warehouse] + (["--data", str(scored["data"])] if command[0] in ("gate", "show") else [])
    argv = [part.replace("{tmp}", str(tmp_path)) for part in command] + options
    result = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=300)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("exit ") and last.endswith(" False"), result.stderr[-2000:]
    # the command did its work (gate exits 1 for the planted regression, compare 2: the sample has one version)
    assert last.split()[1] in ("0", "1", "2"), result.stderr[-2000:]
