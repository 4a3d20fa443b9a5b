"""The layers point down, the Dagster layer reads no environment, and nothing imports Dagster's private modules."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "eval_pipeline"


def _lint_imports() -> str:
    found = Path(sys.executable).with_name("lint-imports")
    if found.exists():
        return str(found)
    which = shutil.which("lint-imports")
    if which is None:
        pytest.fail("lint-imports is not installed: it comes with the test extra (import-linter)")
    return which


def test_every_import_linter_contract_is_kept():
    result = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout and " kept, 0 broken." in result.stdout


def _modules(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_module_imports_a_private_dagster_module():
    offenders = []
    for path, tree in _modules(PACKAGE):
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.startswith("dagster._")]
    assert offenders == []


def test_the_dagster_layer_reads_no_environment_variable_itself():
    offenders = []
    for path, tree in _modules(PACKAGE / "defs"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
