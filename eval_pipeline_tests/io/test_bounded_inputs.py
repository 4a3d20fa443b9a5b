"""Bounded inputs: YAML aliases limited in every YAML file (a case file over the limits is a reject row, a configuration
file a clear error), ids that are not strings or hold format characters are reject rows with reasons."""

import json

import pytest
import yaml

from eval_pipeline.contracts.identifiers import HIDDEN_CHARACTER_REGEX, identifier_problem, text_id_problem
from eval_pipeline.io import ingest, inputs, loaders
from eval_pipeline.io.storage import open_location
from eval_pipeline.io.strict_yaml import MAX_ALIAS_NODES, MAX_ALIASES, YamlError, load_yaml
from eval_pipeline.runner import RunnerError, validate_configuration

GOOD = {"case_id": "rag-1", "lanes": ["rag"], "input": "q", "required_doc_ids": ["d1"]}


def laughs(field: str = "lol", levels: int = 9) -> str:
    """A 'billion laughs' YAML: each level nine aliases of the one before (9**9 strings once expanded)."""
    text = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for level in range(1, levels):
        text += f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]\n"
    return text + f"{field}: *l{levels - 1}\n"


def test_a_billion_laughs_yaml_is_refused_with_its_place():
    text = laughs()
    assert len(text.encode()) < 500
    with pytest.raises(YamlError) as error:
        load_yaml(text, "bomb.yaml")
    # levels 1 to 4 add 74,718 nodes; the first alias of level 5 (line 6) adds 66,430 more and passes the limit
    assert str(error.value) == (
        f"bomb.yaml:6:10: aliases expand to more than {MAX_ALIAS_NODES} nodes (nested aliases); "
        "write the values out or use fewer aliases"
    )


def test_too_many_aliases_and_recursive_aliases_are_refused():
    many = "a: &a 1\nb: [" + ",".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(YamlError, match=rf"^many.yaml:2:{5 + 3 * MAX_ALIASES}: more than {MAX_ALIASES} aliases"):
        load_yaml(many, "many.yaml")
    assert load_yaml("a: &a 1\nb: [" + ",".join(["*a"] * MAX_ALIASES) + "]\n", "ok.yaml")["b"] == [1] * MAX_ALIASES
    with pytest.raises(YamlError, match=r"^loop.yaml:1:8: alias used inside its own anchor"):
        load_yaml("a: &a [*a]\n", "loop.yaml")


def test_ordinary_anchors_and_merge_keys_still_work():
    text = "base: &b {x: 1, y: [1, 2]}\nother:\n  <<: *b\n  y: 3\nagain: *b\n"
    assert load_yaml(text, "ok.yaml") == {
        "base": {"x": 1, "y": [1, 2]},
        "other": {"x": 1, "y": 3},
        "again": {"x": 1, "y": [1, 2]},
    }


def _cases(root, files: dict[str, str]):
    folder = root / "cases" / "ds"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return inputs.load_cases(open_location(root), "ds")


def test_a_case_file_over_the_alias_limits_is_a_reject_row_and_the_others_load(tmp_path):
    bomb = laughs("fixtures") + "case_id: agent-1\nlanes: [agent]\n"
    # also in a key the case contract ignores: never expanded by the loader, still refused
    ignored = laughs("unused") + "case_id: agent-2\nlanes: [agent]\n"
    loaded = _cases(tmp_path, {"a.yaml": bomb, "b.yaml": ignored, "c.yaml": yaml.safe_dump(GOOD)})
    assert loaded.frame["case_id"].to_list() == ["rag-1"]
    rejects = loaders.rejects_frame(loaded.rejects)
    assert rejects.select("source_file", "line", "case_id").rows() == [
        ("cases/ds/a.yaml", 6, None),
        ("cases/ds/b.yaml", 6, None),
    ]
    assert rejects["reason"].to_list() == [
        f"invalid YAML: cases/ds/{name}:6:10: aliases expand to more than {MAX_ALIAS_NODES} nodes (nested aliases); "
        "write the values out or use fewer aliases"
        for name in ("a.yaml", "b.yaml")
    ]


def _run_root(root):
    (root / "cases" / "ds").mkdir(parents=True)
    (root / "cases" / "ds" / "rag-1.yaml").write_text(yaml.safe_dump(GOOD))
    (root / "corpus" / "kb").mkdir(parents=True)
    (root / "traces" / "r1").mkdir(parents=True)
    (root / "traces" / "r1" / "run.yaml").write_text(
        yaml.safe_dump({"run_id": "r1", "candidate": "bot", "corpus_version": "kb", "dataset_version": "ds"})
    )
    (root / "policy").mkdir()


@pytest.mark.parametrize("config", ["policy/gates.yaml", "traces/r1/run.yaml"])
def test_a_configuration_file_over_the_alias_limits_is_a_configuration_error(tmp_path, config):
    _run_root(tmp_path)
    path = tmp_path / config
    original = yaml.safe_load(path.read_text()) if path.exists() else {"version": 1, "gates": []}
    path.write_text(laughs("notes") + yaml.safe_dump(original))
    with pytest.raises(RunnerError) as error:
        validate_configuration(open_location(tmp_path), ["r1"])
    assert str(error.value) == (
        f"{tmp_path / config}:6:10: aliases expand to more than {MAX_ALIAS_NODES} nodes "
        "(nested aliases); write the values out or use fewer aliases"
    )


@pytest.mark.parametrize(("value", "kind"), [([1, 2], "list"), ({"a": 1}, "dict"), (7, "int"), (None, "NoneType")])
def test_a_case_id_that_is_not_a_string_is_a_reject_row(tmp_path, value, kind):
    line = json.dumps({**GOOD, "case_id": value})
    loaded = _cases(
        tmp_path, {"a.yaml": yaml.safe_dump({**GOOD, "case_id": value}), "b.jsonl": f"{line}\n{json.dumps(GOOD)}\n"}
    )
    assert loaded.frame["case_id"].to_list() == ["rag-1"]
    rejects = loaders.rejects_frame(loaded.rejects)
    assert rejects.select("source_file", "line", "case_id").rows() == [
        ("cases/ds/a.yaml", 1, None),
        ("cases/ds/b.jsonl", 1, None),
    ]
    assert set(rejects["reason"]) == {"case_id: Input should be a valid string"}


@pytest.mark.parametrize(
    "character",
    [
        "\u202e",
        "\u202a",
        "\u2066",
        "\u2067",
        "\u2068",
        "\u2069",
        "\u200b",
        "\u200d",
        "\ufeff",
        "\u061c",
        "\u2028",
        "\x1b",
    ],
)
def test_a_case_id_with_a_bidi_or_format_control_is_a_reject_row(tmp_path, character):
    bad = f"rag{character}1"
    loaded = _cases(
        tmp_path,
        {
            "a.yaml": yaml.safe_dump({**GOOD, "case_id": bad}, allow_unicode=True),
            "b.jsonl": json.dumps({**GOOD, "case_id": bad}, ensure_ascii=False)
            + "\n"
            + json.dumps({**GOOD, "case_id": bad})
            + "\n"
            + json.dumps(GOOD)
            + "\n",
        },
    )
    assert loaded.frame["case_id"].to_list() == ["rag-1"]
    rejects = loaders.rejects_frame(loaded.rejects)
    assert rejects.select("source_file", "line", "case_id").rows() == [
        ("cases/ds/a.yaml", 1, None),
        ("cases/ds/b.jsonl", 1, None),
        ("cases/ds/b.jsonl", 2, None),
    ]
    assert set(rejects["reason"]) == {
        f"case_id: {bad!r} must not contain control characters (found U+{ord(character):04X})"
    }


def test_a_trace_whose_ids_hold_format_controls_is_a_reject_row(tmp_path):
    (tmp_path / "cases" / "ds").mkdir(parents=True)
    (tmp_path / "cases" / "ds" / "rag-1.yaml").write_text(yaml.safe_dump(GOOD))
    run = tmp_path / "traces" / "r1"
    run.mkdir(parents=True)
    trace = {"trace_id": "t1", "case_id": "rag-1", "attempt": 1, "status": "ok", "answer": {"text": "a"}}
    lines = [
        trace,
        {**trace, "trace_id": "t\u202e2"},
        {**trace, "trace_id": "t3", "case_id": "rag-\u20661"},
        {**trace, "trace_id": ["t4"]},
    ]
    (run / "batch.jsonl").write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    location = open_location(tmp_path)
    parsed = ingest.parse_traces(ingest.read_raw_lines(location, "r1"), inputs.load_cases(location, "ds").frame, "r1")
    assert parsed.traces["trace_id"].to_list() == ["t1"]
    assert parsed.rejects.select("line", "trace_id", "case_id").rows() == [
        (2, None, "rag-1"),
        (3, "t3", None),
        (4, None, "rag-1"),
    ]
    assert parsed.rejects["reason"].to_list() == [
        "trace_id: 't\\u202e2' must not contain control characters (found U+202E)",
        "case_id: 'rag-\\u20661' must not contain control characters (found U+2066)",
        "trace_id: Input should be a valid string",
    ]


def test_format_controls_are_refused_in_every_id_and_the_columnar_class_matches():
    import polars as pl

    for character in ("\u202e", "\u2066", "\u2069", "\u200b", "\u00ad"):
        assert (
            text_id_problem(f"a{character}b") == f"must not contain control characters (found U+{ord(character):04X})"
        )
        assert (
            identifier_problem(f"a{character}b")
            == f"must not contain control characters (found U+{ord(character):04X})"
        )
    assert text_id_problem("a/b") is None and text_id_problem("café 1") is None and text_id_problem(["a"]) is not None
    hidden = pl.Series(["a\u202eb", "a\u2066b", "a\u200bb", "a\tb", "a\u2029b", "café/1", "a b"]).str.contains(
        HIDDEN_CHARACTER_REGEX
    )
    assert hidden.to_list() == [True, True, True, True, True, False, False]
