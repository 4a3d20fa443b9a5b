"""The persistent Dagster instance of the command line: which folder DAGSTER_HOME is."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def _project_dagster_home(start: Path) -> Path:
    """<dir holding dagster.yaml>/.dagster, with that dagster.yaml copied in; ~/.eval_pipeline/dagster when none is found."""
    for folder in [start, *start.parents]:
        config = folder / "dagster.yaml"
        if config.is_file() and (folder / "workspace.yaml").is_file():
            home = folder / ".dagster"
            home.mkdir(exist_ok=True)
            if not (home / "dagster.yaml").exists() or (home / "dagster.yaml").read_bytes() != config.read_bytes():
                shutil.copyfile(config, home / "dagster.yaml")
            return home
    home = Path.home() / ".eval_pipeline" / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\ntelemetry:\n  enabled: false\n")
    return home


def ensure_dagster_home() -> Path:
    """The persistent Dagster instance folder (DAGSTER_HOME, else the project's .dagster)."""
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"])
    home = _project_dagster_home(Path.cwd())
    os.environ["DAGSTER_HOME"] = str(home)
    return home
