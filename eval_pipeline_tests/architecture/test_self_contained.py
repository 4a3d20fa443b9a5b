"""The repository documents its own contract: nothing in the code, the README or docs/ points at a file outside it."""

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# A specification or data folder beside the repository, which a clone does not have.
OUTSIDE = re.compile(r"SPEC|§|\bshared/")


def test_no_reference_points_outside_the_repository():
    code = [
        path
        for folder in ("eval_pipeline", "harness")
        for path in (REPO_ROOT / folder).rglob("*")
        if path.suffix in {".py", ".json", ".yaml", ".md"} and "egg-info" not in str(path)
    ]
    files = [
        REPO_ROOT / "README.md",
        REPO_ROOT / "CONTRIBUTING.md",
        REPO_ROOT / "data" / "README.md",
        REPO_ROOT / "data" / "planted.json",
        *(REPO_ROOT / "docs").rglob("*.md"),
        *code,
    ]
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_docs_links_and_their_anchors_resolve_inside_the_repository():
    broken = []
    for page in [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *(REPO_ROOT / "docs").rglob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            linked = (page.parent / target) if target else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO_ROOT)} → {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{page.relative_to(REPO_ROOT)} → {target}#{anchor}")
    assert broken == []


def test_the_docs_sections_the_code_cites_exist():
    cited = {
        (match.group(1), match.group(2))
        for path in (REPO_ROOT / "eval_pipeline").rglob("*.py")
        for match in re.finditer(r"(docs/[\w/]+\.md)(?:#([\w-]+))?", path.read_text(encoding="utf-8"))
    }
    assert cited
    missing = [
        f"{page}#{anchor}" if anchor else page
        for page, anchor in sorted(cited, key=str)
        if not (REPO_ROOT / page).is_file() or (anchor and anchor not in _anchors(REPO_ROOT / page))
    ]
    assert missing == []
