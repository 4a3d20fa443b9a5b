"""DAGSTER_HOME: the variable when set, else the project's .dagster with its dagster.yaml, else a home folder."""

import os

from eval_pipeline import instance


def test_a_set_dagster_home_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "mine"))
    assert instance.ensure_dagster_home().path == tmp_path / "mine"


def test_the_project_folder_gets_a_dot_dagster_with_its_dagster_yaml(monkeypatch, tmp_path):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (tmp_path / "workspace.yaml").write_text("load_from: []\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    home = instance.ensure_dagster_home().path
    assert home == tmp_path / ".dagster"
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    assert os.environ["DAGSTER_HOME"] == str(home)
    # the project's dagster.yaml changed: the copy follows
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    monkeypatch.delenv("DAGSTER_HOME")
    assert (instance.ensure_dagster_home().path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_outside_a_project_the_home_folder_holds_a_sqlite_instance(monkeypatch, tmp_path):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    home = instance.ensure_dagster_home().path
    assert home == tmp_path / "home" / ".eval_pipeline" / "dagster"
    assert "sqlite" in (home / "dagster.yaml").read_text()


def test_the_instance_says_where_it_is_why_and_how_to_open_the_ui_on_it(monkeypatch, tmp_path):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    outside = instance.ensure_dagster_home().announcement()
    home = tmp_path / "home" / ".eval_pipeline" / "dagster"
    assert outside.splitlines() == [
        f"Dagster instance: {home} (no project folder (dagster.yaml beside workspace.yaml) in {tmp_path / 'elsewhere'} "
        "or above it)",
        f"  to see these runs in the UI: DAGSTER_HOME={home} eval-pipeline ui",
    ]
    monkeypatch.delenv("DAGSTER_HOME")
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (tmp_path / "workspace.yaml").write_text("load_from: []\n")
    inside = instance.ensure_dagster_home()
    assert inside.project == tmp_path
    assert inside.announcement() == (
        f"Dagster instance: {tmp_path / '.dagster'} (the project folder {tmp_path}, "
        "which holds dagster.yaml and workspace.yaml)"
    )
    assert instance.ensure_dagster_home().reason == "DAGSTER_HOME is set"
