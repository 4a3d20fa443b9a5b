"""The repository documents its own contract: nothing in the code, the README or docs/ points at a file outside it."""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# A specification or data folder beside the repository, which a clone does not have.
OUTSIDE = re.compile(r"SPEC|shared/|\.\./shared")


def test_no_reference_points_outside_the_repository():
    files = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md"),
             *(path for path in (REPO_ROOT / "eval_pipeline").rglob("*") if path.suffix in {".py", ".json", ".yaml", ".md"})]
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}"
             for path in files for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == []


def test_docs_links_resolve_inside_the_repository():
    broken = []
    for page in [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *(REPO_ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO_ROOT)} → {target}")
    assert broken == []
