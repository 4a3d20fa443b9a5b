"""Agreement of the agent lane's tool stages with BFCL's own AST checker (a benchmark, not a test).

    .venv/bin/python bench/bench_bfcl.py --bfcl-python /tmp/bfclvenv/bin/python --seed 7

Over the BFCL v4 "live" items (simple, multiple, parallel, parallel_multiple; ../shared/data/bfcl by default), it
builds model results from each item's first accepted answer and from perturbations of it (one of each kind
that applies to the item, seeded), written half in BFCL's prompting form and half in its function-calling form.
They are imported with `eval-pipeline import bfcl --results`, scored with the pipeline's tool scorer, and each
result's verdict ("every tool stage passes": policy, tool_selection, tool_arguments, tool_order, loop pass or are
not_applicable) is compared with the verdict of BFCL's checker on the same result: BFCL's decoder
(`default_decode_ast_prompting`, or the function-calling decode of its OpenAI handler) and
`bfcl_eval.eval_checker.ast_eval.ast_checker`, run unchanged in BFCL's own environment.

BFCL's checker comes from an installed bfcl-eval (never copied here), in a separate virtual environment whose
python is given by --bfcl-python. bfcl-eval's full dependency list is heavy (model SDKs, torch); the decoder and
checker need only these, so the environment is made with

    python3 -m venv /tmp/bfclvenv
    /tmp/bfclvenv/bin/pip install --no-deps bfcl-eval==2026.3.23
    /tmp/bfclvenv/bin/pip install tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 \\
        tenacity filelock

and the one module that imports every model SDK at load time, `bfcl_eval.constants.model_config`, is replaced
in that process by a mapping in which every model has `underscore_to_dot: false` (a prompting model: function
names are compared as written). Nothing else of BFCL is changed.

Prints, and with --markdown FILE writes, the agreement table per category, per perturbation kind and overall,
and one example of every disagreement class (kind x our reason x BFCL's error type).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import keyword
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple")
STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bfcl"
DEFAULT_BFCL_PYTHON = Path("/tmp/bfclvenv/bin/python")
UNDECODABLE_TEXT = "I'm sorry, I can't help with that."
# kinds BFCL should pass; the others BFCL should fail
EXPECTED_PASS = {
    "first_answer",
    "alternative_value",
    "case_change",
    "whitespace_change",
    "omitted_optional",
    "int_for_float",
    "reordered_calls",
    "nested_case_change",
}


# ---------------------------------------------------------------- BFCL's side (runs under --bfcl-python)


def bfcl_side(request_path: str, reply_path: str) -> None:
    """Decode and check every result with BFCL's own code; writes [{key, valid, error_type}]."""
    import types

    class _PromptingModel:
        underscore_to_dot = False

    class _Models(dict):
        def __missing__(self, name: str) -> _PromptingModel:
            return _PromptingModel()

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = _Models()  # type: ignore[attr-defined]
    sys.modules[stub.__name__] = stub
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting
    from bfcl_eval.utils import is_function_calling_format_output

    request = json.loads(Path(request_path).read_text())
    items, answers = {}, {}
    for category, (questions, possible) in request["files"].items():
        items[category] = {
            json.loads(line)["id"]: json.loads(line)
            for line in Path(questions).read_text().splitlines()
            if line.strip()
        }
        answers[category] = {
            json.loads(line)["id"]: json.loads(line) for line in Path(possible).read_text().splitlines() if line.strip()
        }
    reply = []
    for row in request["results"]:
        category, item_id, result = row["category"], row["id"], row["result"]
        try:
            if row["form"] == "fc":  # BFCL's function-calling decode: [{name: "<JSON args>"}]
                decoded = [{next(iter(call)): json.loads(next(iter(call.values())))} for call in result]
            else:
                decoded = default_decode_ast_prompting(result)
        except Exception as exc:  # noqa: BLE001 - BFCL counts any decoder failure as a wrong answer
            reply.append(
                {"key": row["key"], "valid": False, "error_type": f"ast_decoder:decoder_failed ({type(exc).__name__})"}
            )
            continue
        if not is_function_calling_format_output(decoded):
            reply.append({"key": row["key"], "valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"})
            continue
        verdict = ast_checker(
            items[category][item_id]["function"],
            decoded,
            answers[category][item_id]["ground_truth"],
            Language.PYTHON,
            f"live_{category}",
            "bench-prompting-model",
        )
        reply.append({"key": row["key"], "valid": bool(verdict["valid"]), "error_type": verdict.get("error_type")})
    Path(reply_path).write_text(json.dumps(reply))


# ---------------------------------------------------------------- perturbations


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _in(value: Any, accepted: list[Any]) -> bool:
    return any(type(value) is type(a) and value == a for a in accepted)


def perturbations(
    item: dict[str, Any], references: list[dict[str, Any]], rng: random.Random
) -> dict[str, list[tuple[str, dict]]]:
    """{kind: calls} of the perturbations that apply to an item (calls = [(BFCL function name, args)])."""
    functions = {f["name"]: f for f in item["function"]}
    base = [(r["name"], dict(r["args"])) for r in references]
    props = {name: f.get("parameters", {}).get("properties", {}) for name, f in functions.items()}
    required = {name: set(f.get("parameters", {}).get("required", [])) for name, f in functions.items()}
    out: dict[str, list[tuple[str, dict]]] = {"first_answer": base}

    def edit(index: int, args: dict) -> list[tuple[str, dict]]:
        calls = [(n, dict(a)) for n, a in base]
        calls[index] = (calls[index][0], args)
        return calls

    slots = [(i, p) for i, (_, args) in enumerate(base) for p in args]
    rng.shuffle(slots)

    def first(test) -> tuple[int, str] | None:
        return next(((i, p) for i, p in slots if test(i, p)), None)

    def kind_of(i: int, p: str) -> str | None:
        return props[base[i][0]].get(p, {}).get("type")

    found = first(lambda i, p: len([v for v in references[i]["accepted"].get(p, []) if v != ""]) >= 2)
    if found:
        i, p = found
        others = [v for v in references[i]["accepted"][p] if v != "" and json.dumps(v) != json.dumps(base[i][1][p])]
        if others:
            out["alternative_value"] = edit(i, {**base[i][1], p: others[0]})
    found = first(lambda i, p: isinstance(base[i][1][p], str | int | float | bool))
    if found:
        i, p = found
        value = base[i][1][p]
        wrong = (
            not value
            if isinstance(value, bool)
            else value + 7
            if _whole(value)
            else value + 7.5
            if isinstance(value, float)
            else f"zq{value}zq"
        )
        if not _in(wrong, references[i]["accepted"].get(p, [])):
            out["wrong_value"] = edit(i, {**base[i][1], p: wrong})
    found = first(lambda i, p: p in required[base[i][0]])
    if found:
        i, p = found
        out["missing_required"] = edit(i, {k: v for k, v in base[i][1].items() if k != p})
    found = first(lambda i, p: kind_of(i, p) == "integer" and _whole(base[i][1][p]))
    if found:
        i, p = found
        out["wrong_type_string"] = edit(i, {**base[i][1], p: str(base[i][1][p])})
        out["wrong_type_float"] = edit(i, {**base[i][1], p: float(base[i][1][p])})
    found = first(
        lambda i, p: kind_of(i, p) == "float" and isinstance(base[i][1][p], float) and base[i][1][p].is_integer()
    )
    if found:
        i, p = found
        out["int_for_float"] = edit(i, {**base[i][1], p: int(base[i][1][p])})
    out["extra_argument"] = edit(0, {**base[0][1], "bench_unexpected_arg": "x"})
    unused = [
        p for p, spec in props[base[0][0]].items() if p not in references[0]["accepted"] and isinstance(spec, dict)
    ]
    if unused:
        p = rng.choice(unused)
        spec = props[base[0][0]][p]
        value = (
            spec.get("default")
            if spec.get("default") is not None
            else {"integer": 1, "float": 1.5, "boolean": True, "array": [], "tuple": [], "dict": {}}.get(
                spec.get("type"), "x"
            )
        )
        out["extra_known_argument"] = edit(0, {**base[0][1], p: value})
    others = [n for n in functions if n != base[0][0]]
    if others:
        calls = [(n, dict(a)) for n, a in base]
        calls[0] = (rng.choice(others), calls[0][1])
        out["other_function"] = calls
    out["invented_function"] = [("bench_invented_function", dict(base[0][1]))] + base[1:]
    out["duplicate_call"] = base + [base[0]]
    if len(base) >= 2:
        drop = rng.randrange(len(base))
        out["dropped_call"] = [c for k, c in enumerate(base) if k != drop]
        if len({json.dumps(c, sort_keys=True) for c in base}) > 1:
            out["reordered_calls"] = list(reversed(base))
    found = first(
        lambda i, p: (
            isinstance(base[i][1][p], str)
            and base[i][1][p].upper() != base[i][1][p].lower()
            and kind_of(i, p) == "string"
        )
    )
    if found:
        i, p = found
        value = base[i][1][p]
        out["case_change"] = edit(i, {**base[i][1], p: value.upper() if value.upper() != value else value.lower()})
    found = first(
        lambda i, p: (
            isinstance(base[i][1][p], str)
            and (" " in base[i][1][p] or "," in base[i][1][p])
            and kind_of(i, p) == "string"
        )
    )
    if found:
        i, p = found
        out["whitespace_change"] = edit(i, {**base[i][1], p: base[i][1][p].replace(" ", "").replace(",", ", ")})
    found = first(lambda i, p: p in references[i]["optional"])
    if found:
        i, p = found
        out["omitted_optional"] = edit(i, {k: v for k, v in base[i][1].items() if k != p})
    found = first(lambda i, p: kind_of(i, p) == "array" and isinstance(base[i][1][p], list) and base[i][1][p])
    if found:
        i, p = found
        out["tuple_for_array"] = edit(
            i, {**base[i][1], p: tuple(base[i][1][p])}
        )  # written (a, b) in the prompting form
    nested = [
        (i, p, key)
        for i, p in slots
        if kind_of(i, p) == "dict" and isinstance(base[i][1][p], dict)
        for key in sorted(base[i][1][p])
    ]
    nested_props = lambda i, p: props[base[i][0]][p].get("properties", {})  # noqa: E731
    found = next(
        (
            (i, p, k)
            for i, p, k in nested
            if _whole(base[i][1][p][k]) and nested_props(i, p).get(k, {}).get("type") == "integer"
        ),
        None,
    )
    if found:
        i, p, k = found
        out["nested_float_for_int"] = edit(i, {**base[i][1], p: {**base[i][1][p], k: float(base[i][1][p][k])}})
    found = next(
        (
            (i, p, k)
            for i, p, k in nested
            if isinstance(base[i][1][p][k], str) and base[i][1][p][k].upper() != base[i][1][p][k].lower()
        ),
        None,
    )
    if found:
        i, p, k = found
        value = base[i][1][p][k]
        changed = value.upper() if value.upper() != value else value.lower()
        out["nested_case_change"] = edit(i, {**base[i][1], p: {**base[i][1][p], k: changed}})
    out["no_call"] = []
    return out


def _identifier(name: str) -> bool:
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split("."))


def serialize(calls: list[tuple[str, dict]], form: str) -> Any:
    """A BFCL model result of the calls: the prompting form (a Python call list) or the function-calling form."""
    if form == "fc":
        return [{name: json.dumps(args, ensure_ascii=False)} for name, args in calls]
    return "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls) + "]"


def prompting_ok(calls: list[tuple[str, dict]]) -> bool:
    """Whether the calls can be written in the prompting form (Python names and keywords)."""
    return all(
        _identifier(name) and all(k.isidentifier() and not keyword.iskeyword(k) for k in args) for name, args in calls
    )


# ---------------------------------------------------------------- synthetic edge cases


def _function(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "synthetic",
        "parameters": {"type": "dict", "required": required, "properties": properties},
    }


# (category, item id, functions, ground truth, kind, result in the prompting form): the cases where the pipeline
# and BFCL's checker are known to differ, one minimal item each, plus the cases next to them that agree
SYNTHETIC: list[tuple[str, str, list[dict[str, Any]], list[dict[str, Any]], str, str]] = [
    (
        "synthetic_parallel",
        "greedy_parallel-0",
        [_function("f", {"x": {"type": "integer"}}, ["x"])],
        [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}],
        "greedy_parallel",
        "[f(x=1), f(x=2)]",
    ),
    (
        "synthetic_simple",
        "nested_list_case-0",
        [
            _function(
                "tag",
                {"d": {"type": "dict", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}},
                ["d"],
            )
        ],
        [{"tag": {"d": [{"tags": [["alpha"]]}]}}],
        "nested_list_case",
        "[tag(d={'tags': ['ALPHA']})]",
    ),
    (
        "synthetic_simple",
        "nested_bool_for_int-0",
        [_function("setc", {"d": {"type": "dict", "properties": {"count": {"type": "integer"}}}}, ["d"])],
        [{"setc": {"d": [{"count": [1]}]}}],
        "nested_bool_for_int",
        "[setc(d={'count': True})]",
    ),
    (
        "synthetic_simple",
        "widened_type-0",
        [_function("rooms", {"n": {"type": "integer"}}, ["n"])],
        [{"rooms": {"n": [2.5]}}],
        "answer_type_of_own_item",
        "[rooms(n=2.5)]",
    ),
    (
        "synthetic_simple",
        "widened_type-1",
        [_function("rooms", {"n": {"type": "integer"}}, ["n"])],
        [{"rooms": {"n": [2]}}],
        "answer_type_of_another_item",
        "[rooms(n=2.0)]",
    ),
    (
        "synthetic_simple",
        "tuple_param-0",
        [_function("span", {"t": {"type": "tuple", "items": {"type": "integer"}}}, ["t"])],
        [{"span": {"t": [[1, 2]]}}],
        "tuple_for_tuple",
        "[span(t=(1, 2))]",
    ),
]


def build_synthetic(work: Path) -> tuple[dict[str, tuple[Path, Path]], dict[str, Path], list[dict[str, Any]]]:
    """Question, answer and result files of the synthetic edge cases, and their rows."""
    sources: dict[str, tuple[Path, Path]] = {}
    files: dict[str, Path] = {}
    rows: list[dict[str, Any]] = []
    grouped: dict[str, list[tuple[str, list, list, str, str]]] = defaultdict(list)
    for category, item_id, functions, truth, kind, result in SYNTHETIC:
        grouped[category].append((item_id, functions, truth, kind, result))
    for category, entries in grouped.items():
        questions = work / "synthetic" / f"BFCL_v4_live_{category}.json"
        answers = work / "synthetic" / "possible_answer" / questions.name
        answers.parent.mkdir(parents=True, exist_ok=True)
        questions.write_text(
            "".join(
                json.dumps({"id": i, "question": [[{"role": "user", "content": k}]], "function": f}) + "\n"
                for i, f, _, k, _ in entries
            )
        )
        answers.write_text("".join(json.dumps({"id": i, "ground_truth": t}) + "\n" for i, _, t, _, _ in entries))
        files[category] = work / "synthetic" / f"BFCL_v4_live_{category}_result.json"
        files[category].write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, _, _, _, r in entries))
        sources[category] = (questions, answers)
        rows += [
            {
                "key": f"{category}:{i}#1",
                "category": category,
                "id": i,
                "attempt": 1,
                "kind": k,
                "form": "prompting",
                "result": r,
            }
            for i, _, _, k, r in entries
        ]
    return sources, files, rows


# ---------------------------------------------------------------- our side


def build_results(
    data: Path, seed: int, work: Path
) -> tuple[dict[str, tuple[Path, Path]], dict[str, Path], list[dict[str, Any]]]:
    """(question and answer files, result file) per category and the rows.

    The rows are (key, category, id, attempt, kind, form, result).
    """
    from eval_pipeline.importers.bfcl_schema import reference_call

    rows, files, sources = [], {}, {}
    for category in CATEGORIES:
        questions = data / f"BFCL_v4_live_{category}.json"
        answers = data / "possible_answer" / questions.name
        sources[category] = (questions, answers)
        gold = {json.loads(line)["id"]: json.loads(line) for line in answers.read_text().splitlines() if line.strip()}
        lines = []
        for text in questions.read_text().splitlines():
            if not text.strip():
                continue
            item = json.loads(text)
            functions = {f["name"]: f for f in item["function"]}
            references = [
                reference_call(name, answer, functions[name], item["id"])
                for entry in gold[item["id"]]["ground_truth"]
                for name, answer in entry.items()
            ]
            rng = random.Random(f"{seed}:{item['id']}")
            attempt = 0
            for kind, calls in perturbations(item, references, rng).items():
                if kind == "no_call":
                    form = rng.choice(("prompting", "fc"))
                    result: Any = "[]" if form == "prompting" else []
                elif kind == "tuple_for_array":
                    if not prompting_ok(calls):
                        continue  # a tuple exists only in the prompting form
                    form = "prompting"
                    result = serialize(calls, form)
                else:
                    form = rng.choice(("prompting", "fc")) if prompting_ok(calls) else "fc"
                    result = serialize(calls, form)
                attempt += 1
                row = {
                    "key": f"{category}:{item['id']}#{attempt}",
                    "category": category,
                    "id": item["id"],
                    "attempt": attempt,
                    "kind": kind,
                    "form": form,
                    "result": result,
                }
                rows.append(row)
                lines.append(json.dumps({"id": item["id"], "result": result}, ensure_ascii=False))
            attempt += 1
            rows.append(
                {
                    "key": f"{category}:{item['id']}#{attempt}",
                    "category": category,
                    "id": item["id"],
                    "attempt": attempt,
                    "kind": "undecodable",
                    "form": "prompting",
                    "result": UNDECODABLE_TEXT,
                }
            )
            lines.append(json.dumps({"id": item["id"], "result": UNDECODABLE_TEXT}))
        files[category] = work / f"BFCL_v4_live_{category}_result.json"
        files[category].write_text("\n".join(lines) + "\n")
    return sources, files, rows


def our_verdicts(
    sources: dict[str, tuple[Path, Path]], files: dict[str, Path], work: Path
) -> tuple[dict[str, tuple[bool, str]], list[str], float]:
    """{key: (every tool stage passes, the failing stages' reasons)}, the import commands, seconds spent scoring."""
    import polars as pl

    from eval_pipeline.cli import main as cli
    from eval_pipeline.io import ingest, inputs, loaders
    from eval_pipeline.io.storage import open_location
    from eval_pipeline.scoring.tools import score_tools

    root = work / "data"
    verdicts, commands, spent = {}, [], 0.0
    for category, results in files.items():
        questions, answers = sources[category]
        argv = [
            "import",
            "bfcl",
            "--questions",
            str(questions),
            "--answers",
            str(answers),
            "--results",
            str(results),
            "--run",
            f"bench-{category}",
            "--data",
            str(root),
            "--force",
        ]
        commands.append("eval-pipeline " + " ".join(argv))
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the import summaries are long; the report says what ran
            status = cli(argv)
        if status != 0:
            raise SystemExit(f"import of {category} failed (exit {status})")
        location = open_location(root)
        manifest = loaders.load_manifest(location, f"bench-{category}")
        cases = inputs.load_cases(location, manifest.dataset_version)
        tools = inputs.load_tools(location, manifest.environment_version)
        parsed = ingest.parse_traces(
            ingest.read_raw_lines(location, f"bench-{category}"), cases.frame, f"bench-{category}"
        )
        tool_scores, _ = score_tools(parsed.traces, cases.frame, tools)
        spent += time.perf_counter() - started
        passing = pl.all_horizontal([pl.col(f"{s}_stage").is_in(["pass", "not_applicable"]) for s in STAGES])
        reasons = pl.concat_str(
            [
                pl.when(pl.col(f"{s}_stage") == "fail").then(pl.format("{}: {}", pl.lit(s), pl.col(f"{s}_reason")))
                for s in STAGES
            ],
            separator=" | ",
            ignore_nulls=True,
        )
        for case_id, attempt, ok, why in tool_scores.select(
            "case_id", "attempt", passing.alias("ok"), reasons.alias("why")
        ).iter_rows():
            verdicts[f"{category}:{case_id}#{attempt}"] = (bool(ok), why or "")
    return verdicts, commands, spent


def bfcl_verdicts(
    python: Path, sources: dict[str, tuple[Path, Path]], rows: list[dict[str, Any]], work: Path
) -> dict[str, tuple[bool, str]]:
    """{key: (BFCL's checker passes, its error type)} from BFCL's own code under `python`."""
    request, reply = work / "bfcl_request.json", work / "bfcl_reply.json"
    files = {c: [str(q), str(a)] for c, (q, a) in sources.items()}
    request.write_text(json.dumps({"files": files, "results": rows}, ensure_ascii=False))
    subprocess.run([str(python), __file__, "--bfcl-side", str(request), str(reply)], check=True)
    return {r["key"]: (r["valid"], r["error_type"] or "") for r in json.loads(reply.read_text())}


# ---------------------------------------------------------------- the report


def _reason_class(reason: str) -> str:
    """Our failure reason without the call text: the stage and the kind of finding."""
    if not reason:
        return "all stages pass"
    parts = []
    for part in reason.split(" | "):
        stage, _, text = part.partition(": ")
        if "schema: " in text:
            finding = text.split("schema: ", 1)[1]
            finding = finding.split(": ", 1)[1] if ": " in finding.split(" ", 1)[0] + " " else finding
            head = "schema: " + finding.split(" (")[0].split("'")[0][:60].strip()
        elif "args match no reference call" in text:
            head = "args match no reference call"
        else:
            head = text.split("(")[0].split(":")[0].strip()
        parts.append(f"{stage}: {head}")
    return " | ".join(sorted(set(parts)))


def report(
    rows: list[dict[str, Any]],
    ours: dict[str, tuple[bool, str]],
    theirs: dict[str, tuple[bool, str]],
    commands: list[str],
    argv: list[str],
    spent: float,
) -> str:
    """The agreement tables and the disagreement classes, as markdown."""
    by_category: dict[str, Counter] = defaultdict(Counter)
    by_kind: dict[str, Counter] = defaultdict(Counter)
    classes: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        our_ok, why = ours[row["key"]]
        bfcl_ok, error = theirs[row["key"]]
        synthetic_row = row["category"].startswith("synthetic")
        for table in (
            (by_kind[row["kind"]],)
            if synthetic_row
            else (by_category[row["category"]], by_kind[row["kind"]], by_category["all"])
        ):
            table["n"] += 1
            table["agree"] += our_ok == bfcl_ok
            table["ours_pass"] += our_ok
            table["bfcl_pass"] += bfcl_ok
        if our_ok != bfcl_ok:
            classes[(row["kind"], _reason_class(why), error)].append({**row, "why": why})

    def table(title: str, counters: dict[str, Counter], order: list[str]) -> list[str]:
        out = [
            f"| {title} | results | agree | agreement | pipeline passes | BFCL passes |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name in order:
            c = counters[name]
            out.append(
                f"| {name} | {c['n']} | {c['agree']} | {c['agree'] / c['n']:.2%} | "
                f"{c['ours_pass']} | {c['bfcl_pass']} |"
            )
        return out

    real = [k for k in by_kind if not any(r["kind"] == k and r["category"].startswith("synthetic") for r in rows)]
    synthetic = [k for k in by_kind if k not in real]
    kinds = sorted(real, key=lambda k: (k not in EXPECTED_PASS, k))
    lines = [
        "```",
        "python bench/bench_bfcl.py " + " ".join(argv),
        "```",
        "",
        "Imports run by the bench:",
        "",
        "```",
        *commands,
        "```",
        "",
        f"Import and scoring time, all categories: {spent:.1f} s.",
        "",
        *table("category", by_category, [*CATEGORIES, "all"]),
        "",
        *table("perturbation kind", by_kind, kinds),
        "",
        "Synthetic edge cases (one minimal item each, not from the BFCL data):",
        "",
        *table("edge case", by_kind, synthetic),
        "",
        "## Disagreement classes",
        "",
    ]
    if not classes:
        lines.append("None: every result got BFCL's verdict.")
    for (kind, why, error), members in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        example = members[0]
        result = (
            example["result"]
            if isinstance(example["result"], str)
            else json.dumps(example["result"], ensure_ascii=False)
        )
        lines += [
            f"- **{kind}**, {len(members)} results: pipeline `{why}`; BFCL `{error or 'valid'}`.",
            f"  Example {example['id']} attempt {example['attempt']}: `{result[:300]}`",
            f"  Pipeline reason: `{example['why'][:300]}`" if example["why"] else "  Pipeline: every stage passes.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--bfcl-side":
        bfcl_side(sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"the BFCL live files (default: {DEFAULT_DATA})"
    )
    parser.add_argument(
        "--bfcl-python",
        type=Path,
        default=DEFAULT_BFCL_PYTHON,
        help=f"python of a virtual environment with bfcl-eval installed (default: {DEFAULT_BFCL_PYTHON})",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--work", type=Path, help="folder for the result files and the data root (default: a temporary one)"
    )
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    if not args.bfcl_python.exists():
        print(
            f"bench_bfcl: BFCL's checker is needed: no python at {args.bfcl_python}; make the environment as the "
            "module docstring says and pass --bfcl-python",
            file=sys.stderr,
        )
        return 2
    shown = [a for a in (argv if argv is not None else sys.argv[1:])]
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        sources, files, rows = build_results(args.data, args.seed, work)
        more_sources, more_files, more_rows = build_synthetic(work)
        sources, files, rows = {**sources, **more_sources}, {**files, **more_files}, rows + more_rows
        ours, commands, spent = our_verdicts(sources, files, work)
        theirs = bfcl_verdicts(args.bfcl_python, sources, rows, work)
        text = report(rows, ours, theirs, [c.replace(str(work), "<work>") for c in commands], shown, spent)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
