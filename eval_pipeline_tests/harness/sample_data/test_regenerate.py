"""The committed sample is exactly what the generator writes: regenerating gives the same bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from eval_pipeline_harness.sample_data import planted

DATA = Path(__file__).resolve().parents[3] / "data"
OUTPUTS = ("warehouse", "reports", ".judge_cache")


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in OUTPUTS
    }


def test_cli_regenerates_data_byte_for_byte(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "eval_pipeline_harness.sample_data", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    generated, committed = _files(tmp_path), _files(DATA)
    assert sorted(generated) == sorted(committed)
    # 76 case files + corpus + tools + gates + 2 label files + 2 manifests + 5 trace files + planted.json
    # + README.md = 90
    assert len(generated) == 90
    assert [name for name in generated if generated[name] != committed[name]] == []
    assert f"wrote 90 files under {tmp_path}" in result.stderr


def test_planted_structure_equals_planted_json():
    assert planted() == json.loads((DATA / "planted.json").read_text(encoding="utf-8"))


def test_help_names_both_modes():
    result = subprocess.run(
        [sys.executable, "-m", "eval_pipeline_harness.sample_data", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    for option in ("--out", "--traces", "--seed", "--run-id"):
        assert option in result.stdout


def test_seed_without_traces_is_a_usage_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "eval_pipeline_harness.sample_data", "--out", str(tmp_path), "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--traces" in result.stderr
    assert list(tmp_path.iterdir()) == []
