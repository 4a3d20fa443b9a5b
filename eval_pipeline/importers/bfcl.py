"""Import Berkeley Function Calling Leaderboard items and model results (`eval-pipeline import bfcl`).

Input: a BFCL question file (JSON Lines `{"id", "question": [[messages]], "function": [{name, description,
parameters}]}`), its possible-answer file (`{"id", "ground_truth": [{FUNCTION: {PARAM: [accepted values]}}]}`,
`""` among the values = the parameter may be left out) and either BFCL's model result file (`--results`, JSONL
`{"id", "result", ...}`) or `--self-check` (one trace per item made of its first accepted answer).

- Each item becomes a case: `case_id` = the BFCL id, lanes [agent], input = the last user message,
  `tool_match: unordered` (BFCL checks parallel calls in any order), `allowed_tools` = the functions the item
  offers, one reference call per ground-truth entry: `args` = the first accepted value of each parameter (left
  out when that value is `""`, except for a parameter the function requires), `accepted` = every accepted value
  (BFCL's dict-of-lists answers of `dict` parameters, and lists of them, expanded into concrete values: a
  cartesian product, `""` = the key may be absent, at most `max_expansion` values a parameter), `optional` =
  the parameters whose list holds `""` and that the function does not require. No milestones: BFCL has no world
  state, so the outcome is not_applicable.
- The registry: one tool per function, BFCL's types written as JSON Schema (`dict` → object, `float` → number,
  `tuple` → array, `any` → no type; `properties`, `required`, `items`, `description` and `default` kept; the top
  level `additionalProperties: false`, BFCL's "unexpected parameter"), every tool `read_only: false` (BFCL
  checks every call, whatever its name says), `value_rules: bfcl` (strings compared as BFCL's checker
  compares them, an integer parameter given 2.0 is a type error). Three rules follow BFCL's checker rather
  than plain JSON Schema: `enum` is kept as the annotation `x-bfcl-enum`, not enforced (BFCL never checks it,
  and for 104 parameters of the live items the first accepted value lies outside the enum); a nested dict's
  `required` is kept as `x-bfcl-required` (BFCL checks nested keys against the answers only); a parameter whose
  first accepted value is of another type than the one declared (BFCL's "variable" rule: `number_of_rooms:
  "dontcare"`, `None`) gets that type too, in that item's definition only.
- A function name that items define differently (other parameters, or answers that widen a type: 191 of the
  528 names of the four live files, 161 within live_multiple alone, so one environment version per file does not
  avoid it) is registered once per definition, as `<name>@<first item defining it>`; the calls and reference
  calls of an item resolve to the definition that item offers, so every item is checked against its own
  function. `collisions="error"` refuses such a file instead, naming both items.
- Results: the prompting form (a string `"[f(a=1, b='x'), g(c=[1, 2])]"`, decoded with Python's `ast` as
  BFCL's decoder does, never evaluated) or the function-calling form (a list of `{name: {args}}` or
  `{name: "<JSON args>"}`, or of JSON strings of those, or OpenAI tool calls) becomes tool_call steps (status
  ok, result null). Lines of the same id are attempts 1, 2, ... in file order. A result that cannot be decoded
  is written as a trace whose only step is a `finish` step holding the raw output: no call, so
  tool_selection fails on the missing calls, which is how BFCL counts it (a decoder failure is a wrong answer,
  not a missing one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import validators as schema_validators

from eval_pipeline.contracts.cases import ToolRegistry
from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.importers.bfcl_items import (
    FORMAT,
    Names,
    answer_extras,
    function_names,
    item_cases,
    item_registry,
    read_answers,
    usable_items,
)
from eval_pipeline.importers.bfcl_results import note_ids, result_traces, self_check_traces
from eval_pipeline.importers.bfcl_schema import MAX_EXPANSION
from eval_pipeline.importers.common import ImporterError, ImportSummary, existing_registry, finish_import, start_import
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.io.storage import open_location


def import_bfcl(
    source: str | Path,
    run: ImportRun,
    *,
    answers: str | Path | None = None,
    results: str | Path | None = None,
    self_check: bool = False,
    tool_match: str = "unordered",
    collisions: str = "qualify",
    underscore_to_dot: bool = False,
    max_expansion: int = MAX_EXPANSION,
) -> ImportSummary:
    """Write the cases, registry, traces and run manifest of a BFCL question file and its results under the run's
    data root.

    `source` is the question file; `answers` its possible-answer file (default: `possible_answer/<same name>` beside
    it, BFCL's layout). Exactly one of `results` (BFCL's model result file) and `self_check` gives the traces.
    `underscore_to_dot`: a called name that is an offered name with '.' written '_' is that function (BFCL's flag
    for models whose API forbids '.' in function names).
    """
    _check_options(run, results, self_check, collisions)
    started = start_import(FORMAT, source, run)
    path, summary, rejects = started.path, started.summary, started.rejects
    answers_path = Path(answers) if answers is not None else path.parent / "possible_answer" / path.name
    by_id = read_answers(answers_path)
    items, refused = usable_items(run.run_id, path.name, started.records, by_id, answers_path.name)
    rejects += refused
    extras = answer_extras(items, by_id)
    names = function_names(items, extras, collisions)
    cases, refused = item_cases(run.run_id, path.name, items, by_id, names, tool_match, max_expansion)
    rejects += refused
    registry = item_registry(items, names, extras, summary.environment_version)
    _check_existing_registry(run.data_root, registry)
    _note_registry(summary, registry, cases)
    if results is None:  # --self-check: _check_options let exactly one of the two through
        written = _Traces(self_check_traces(run.run_id, cases), [], cases, "self-check.jsonl", "bfcl-self-check")
    else:
        written = _result_run(run.run_id, Path(results), cases, names, underscore_to_dot, summary)
    return finish_import(
        summary,
        run,
        list(written.cases.values()),
        written.traces,
        registry,
        rejects + written.rejects,
        trace_file=written.trace_file,
        default_candidate=written.candidate,
    )


def _check_options(run: ImportRun, results: str | Path | None, self_check: bool, collisions: str) -> None:
    """Refuse options that do not apply to BFCL or contradict each other, before anything is read."""
    if run.tools is not None:
        raise ImporterError("bfcl builds its registry from the items' function definitions; --tools does not apply")
    if (results is None) == (not self_check):
        raise ImporterError("give exactly one of --results FILE (BFCL's model result file) and --self-check")
    if collisions not in ("qualify", "error"):
        raise ImporterError(f"collisions must be qualify or error, not {collisions!r}")


def _check_existing_registry(data_root: str | Path, registry: dict[str, Any]) -> None:
    """Refuse to import against a tools/<environment_version>/tools.yaml that holds other tools than these items
    define."""
    existing = existing_registry(open_location(data_root), registry["environment_version"])
    if existing is None:
        return
    built = ToolRegistry.model_validate(registry).model_dump(mode="json")
    if canonical_json(existing) != canonical_json(built):
        raise ImporterError(
            f"tools/{registry['environment_version']}/tools.yaml exists with other tools than these items define; "
            "import this question file into another --environment-version (one per BFCL file)"
        )


def _unsatisfiable(reference: Mapping[str, Any], schema: dict[str, Any], checkers: dict[str, Any], tool: str) -> bool:
    """Whether a reference call's own canonical args break its tool's schema (the ground truth contradicts the
    function: BFCL can pass no call)."""
    if tool not in checkers:
        checkers[tool] = schema_validators.validator_for(schema)(schema)
    required = set(schema.get("required", ()))
    empty = any(not values and name in required for name, values in reference["accepted"].items())
    return empty or not checkers[tool].is_valid(reference["args"])


def _note_registry(summary: ImportSummary, registry: Mapping[str, Any], cases: Mapping[str, dict[str, Any]]) -> None:
    """Summary notes on the registry: the function names registered once per definition, and the items whose ground
    truth breaks their own function's schema."""
    qualified = sorted(t["name"] for t in registry["tools"] if "@" in t["name"])
    if qualified:
        clashing = sorted({name.split("@", 1)[0] for name in qualified})
        summary.notes.append(
            f"{len(clashing)} function names are defined differently by different items: "
            f"registered as {len(qualified)} tools <name>@<first item defining it> "
            f"(e.g. {qualified[0]}); each item's calls resolve to the definition it offers"
        )
    schemas = {t["name"]: t["args"] for t in registry["tools"]}
    checkers: dict[str, Any] = {}
    note_ids(
        summary,
        "items whose ground truth breaks their own function's schema (BFCL can pass no call for them)",
        [
            cid
            for cid, case in cases.items()
            if any(_unsatisfiable(r, schemas[r["name"]], checkers, r["name"]) for r in case["reference_tool_calls"])
        ],
    )


@dataclass
class _Traces:
    """The traces an import writes, the rejects found reading them, the cases they attempt, the trace file's name and
    the run's candidate unless the run names one."""

    traces: list[dict[str, Any]]
    rejects: list[dict[str, Any]]
    cases: dict[str, dict[str, Any]]
    trace_file: str
    candidate: str


def _result_run(
    run_id: str,
    results_path: Path,
    cases: dict[str, dict[str, Any]],
    names: Names,
    underscore_to_dot: bool,
    summary: ImportSummary,
) -> _Traces:
    """The traces of BFCL's model result file; the items with no result line get no case."""
    traces, rejects = result_traces(run_id, results_path, cases, names, underscore_to_dot, summary)
    attempted = {t["case_id"] for t in traces}
    note_ids(summary, "items have no result line (no case written for them)", [c for c in cases if c not in attempted])
    attempted_cases = {cid: case for cid, case in cases.items() if cid in attempted}
    return _Traces(traces, rejects, attempted_cases, f"{results_path.stem}.jsonl", results_path.stem)


__all__ = ["import_bfcl"]
