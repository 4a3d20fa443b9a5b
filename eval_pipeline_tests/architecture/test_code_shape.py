"""The code's shape: modules a reader can hold, a stated public API per package, and ruff's format and lint clean."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "eval_pipeline"
MAX_LINES = 600
EXPLAINED_OVER = 400
# Where ruff looks: the product, its tests, the harness and the benchmark scripts (pyproject.toml [tool.ruff]).
RUFF_PATHS = ["eval_pipeline", "eval_pipeline_tests", "harness", "bench"]


def _sizes() -> list[tuple[int, str]]:
    sizes = []
    for path in PACKAGE.rglob("*.py"):
        with path.open(encoding="utf-8") as handle:
            sizes.append((sum(1 for _ in handle), str(path.relative_to(ROOT))))
    return sorted(sizes, reverse=True)


def test_no_product_module_is_over_600_lines():
    sizes = _sizes()
    listing = "\n".join(f"{lines:5d} {name}" for lines, name in sizes[:15])
    print(f"the largest modules of eval_pipeline:\n{listing}")
    assert [name for lines, name in sizes if lines > MAX_LINES] == [], listing


def test_a_module_over_400_lines_says_why_in_its_docstring():
    unexplained = []
    for lines, name in _sizes():
        if lines <= EXPLAINED_OVER:
            break
        docstring = ast.get_docstring(ast.parse((ROOT / name).read_text(encoding="utf-8"))) or ""
        if "400 lines" not in docstring:
            unexplained.append(f"{name} ({lines} lines)")
    assert unexplained == [], "say in the module docstring why it is over 400 lines: " + ", ".join(unexplained)


def test_every_module_opens_with_a_docstring():
    missing = [
        str(path.relative_to(ROOT))
        for path in sorted(PACKAGE.rglob("*.py"))
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert missing == []


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            return list(ast.literal_eval(node.value))
    return None


def test_every_package_states_its_public_api():
    """Every package's `__init__` has `__all__`, naming only public names it defines, imports or holds as modules."""
    problems = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        declared = _declared_all(tree)
        name = str(init.relative_to(ROOT))
        if declared is None:
            problems.append(f"{name}: no __all__")
            continue
        bound = {
            target.id
            for node in ast.walk(tree)
            for target in getattr(node, "targets", [])
            if isinstance(target, ast.Name)
        }
        bound |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        bound |= {
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        bound |= {path.stem for path in init.parent.glob("*.py")} | {
            path.name for path in init.parent.iterdir() if (path / "__init__.py").exists()
        }
        problems += [
            f"{name}: __all__ names {entry!r}, which it does not define" for entry in declared if entry not in bound
        ]
        problems += [f"{name}: __all__ names the private {entry!r}" for entry in declared if entry.startswith("_")]
    assert problems == []


def _ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    if found.exists():
        return str(found)
    which = shutil.which("ruff")
    if which is None:
        pytest.fail("ruff is not installed: it comes with the test extra")
    return which


def test_ruff_lint_is_clean():
    result = subprocess.run(
        [_ruff(), "check", "--no-cache", "--output-format", "concise", *RUFF_PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_ruff_format_is_clean():
    result = subprocess.run(
        [_ruff(), "format", "--check", "--no-cache", *RUFF_PATHS], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
