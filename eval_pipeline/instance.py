"""The persistent Dagster instance of the command line: which folder DAGSTER_HOME is, and why.

See docs/pipeline.md#the-dagster-instance.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DagsterHome", "ensure_dagster_home", "project_folder", "resolve_dagster_home"]

# Where runs started outside any project folder are kept, so they are not lost in a temporary folder.
USER_HOME = Path("~") / ".eval_pipeline" / "dagster"
USER_HOME_CONFIG = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\ntelemetry:\n  enabled: false\n"


@dataclass(frozen=True)
class DagsterHome:
    """The instance folder, why it was chosen, and the project folder (dagster.yaml + workspace.yaml), if any."""

    path: Path
    reason: str
    project: Path | None

    def announcement(self) -> str:
        """What the command line prints about the instance: where, why, and how to open the UI on it."""
        line = f"Dagster instance: {self.path} ({self.reason})"
        if self.project is None:
            line += f"\n  to see these runs in the UI: DAGSTER_HOME={self.path} eval-pipeline ui"
        return line


def project_folder(start: Path) -> Path | None:
    """The nearest folder from `start` upwards that holds both dagster.yaml and workspace.yaml (a project), or None."""
    for folder in [start, *start.parents]:
        if (folder / "dagster.yaml").is_file() and (folder / "workspace.yaml").is_file():
            return folder
    return None


def resolve_dagster_home(start: Path | None = None) -> DagsterHome:
    """DAGSTER_HOME when set; else <project>/.dagster with the project's dagster.yaml; else ~/.eval_pipeline/dagster."""
    if os.environ.get("DAGSTER_HOME"):
        return DagsterHome(Path(os.environ["DAGSTER_HOME"]), "DAGSTER_HOME is set", project_folder(start or Path.cwd()))
    start = start or Path.cwd()
    project = project_folder(start)
    if project is not None:
        home, config = project / ".dagster", project / "dagster.yaml"
        home.mkdir(exist_ok=True)
        if not (home / "dagster.yaml").exists() or (home / "dagster.yaml").read_bytes() != config.read_bytes():
            shutil.copyfile(config, home / "dagster.yaml")
        return DagsterHome(home, f"the project folder {project}, which holds dagster.yaml and workspace.yaml", project)
    home = USER_HOME.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(USER_HOME_CONFIG)
    return DagsterHome(home, f"no project folder (dagster.yaml beside workspace.yaml) in {start} or above it", None)


def ensure_dagster_home(start: Path | None = None) -> DagsterHome:
    """The persistent Dagster instance (resolve_dagster_home), exported as DAGSTER_HOME for this process."""
    home = resolve_dagster_home(start)
    os.environ["DAGSTER_HOME"] = str(home.path)
    return home
