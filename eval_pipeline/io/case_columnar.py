"""The columnar read of case lines: the lines it can vouch for become rows of the cases frame at once.

pyarrow reads them against a strict schema, polars checks the Case contract's rules, orjson decodes the free-form
values; a line it cannot vouch for is left to the per-line validation of inputs.load_cases.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import MILESTONE_OPERATORS
from eval_pipeline.contracts.identifiers import HIDDEN_CHARACTER_REGEX
from eval_pipeline.io.columnar import (
    ESCAPED_KEY,
    NOT_COLUMNAR_BYTES,
    every_element,
    null_for_default,
    read_json_lines,
    start_columnar_read,
)
from eval_pipeline.io.forked import Forked, results_of
from eval_pipeline.io.loaders import DEFAULT_MAX_LINE_BYTES, collector_paused

# A case line as the columnar read parses it: every field of the contract with a JSON type of its own; the free-form
# ones only as far as telling whether they are given, and with the right kind of JSON value.
_FREE_OBJECT = pa.struct([])
CASE_LINE_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("case_revision", pa.int64()),
        ("lanes", pa.list_(pa.string())),
        ("input", pa.string()),
        ("criticality", pa.string()),
        ("required_doc_ids", pa.list_(pa.string())),
        ("expected_answer_contains", pa.list_(pa.string())),
        ("reference_answer", pa.string()),
        ("expect_refusal", pa.bool_()),
        ("multi_hop", pa.bool_()),
        ("allowed_tools", pa.list_(pa.string())),
        ("forbidden_tools", pa.list_(pa.string())),
        ("tool_match", pa.string()),
        ("dependencies", pa.list_(pa.list_(pa.string()))),
        ("clock", pa.string()),
        ("fault", pa.struct([("kind", pa.string()), ("tool", pa.string())])),
        ("unsafe_after_fault", pa.list_(pa.string())),
        ("escalation_tools", pa.list_(pa.string())),
        ("reference_tool_calls", pa.list_(_FREE_OBJECT)),
        ("alternatives", pa.list_(pa.list_(_FREE_OBJECT))),
        ("fixtures", _FREE_OBJECT),
        ("milestones", _FREE_OBJECT),
        ("scope", _FREE_OBJECT),
    ]
)
_CASE_FREE_FORM = ("reference_tool_calls", "alternatives", "fixtures", "milestones", "scope")
_CASE_PARSE = pa_json.ParseOptions(explicit_schema=CASE_LINE_SCHEMA, unexpected_field_behavior="ignore")
# What pyarrow reads and Case.model_validate_json must not get (may_break_limits: NaN, Infinity, a surrogate escape,
# numbers that may pass a double or 64 bits), nor orjson (an integer beyond 64 bits it reads as a float).
_CASE_NOT_COLUMNAR = rf"NaN|Inf|\\u[dD]|[0-9]{{19}}|[0-9][eE]\+?[0-9]{{3}}|{NOT_COLUMNAR_BYTES}"
# Fields with a default that null may not replace (pyarrow reads a missing one and a null one alike).
_CASE_DEFAULTED = [
    "case_revision",
    "input",
    "criticality",
    "required_doc_ids",
    "expected_answer_contains",
    "expect_refusal",
    "multi_hop",
    "forbidden_tools",
    "tool_match",
    "dependencies",
    "unsafe_after_fault",
    "escalation_tools",
    "reference_tool_calls",
    "alternatives",
    "fixtures",
    "milestones",
]
_CASE_NULL_FOR_DEFAULT = null_for_default(_CASE_DEFAULTED)
# a line naming a field only the per-line path reads (or spelling a key with an escape) is decoded to see whether it
# has one
_PER_LINE_FIELDS = ("value_rules", "tags", "counterfactual_of", "changed_fact")
_MAY_NAME_VALUE_RULES = rf"{'|'.join(_PER_LINE_FIELDS)}|{ESCAPED_KEY}"
_STRING_LISTS = (
    "required_doc_ids",
    "expected_answer_contains",
    "allowed_tools",
    "forbidden_tools",
    "unsafe_after_fault",
    "escalation_tools",
)
_LITERALS = {"criticality": ["high", "normal"], "tool_match": ["strict_order", "unordered", "goal_only"]}
_FAULT_KINDS = ["tool_error", "empty", "timeout", "injected_instruction"]
_CASE_FREE_FORM_SCHEMA: dict[str, pl.DataType] = {
    "_row": pl.Int64,
    **{
        name: frames.CASES_SCHEMA[name]
        for name in ("reference_tool_calls", "alternatives", "fixtures_json", "milestones", "scope_json")
    },
}


def columnar_cases(raw: pl.Series, dataset_version: str, source: str) -> tuple[np.ndarray, pl.DataFrame]:
    """The case lines a columnar read can vouch for, as (their positions, their rows of the cases frame): those that
    Case.model_validate_json would accept with the same values; the others are left to the per-line path."""
    # the free-form columns of every line that may have any, written on other cores while pyarrow reads the lines
    text, candidates, lines, written, parts = start_columnar_read(
        raw,
        DEFAULT_MAX_LINE_BYTES,
        _CASE_NOT_COLUMNAR,
        _CASE_MAY_HAVE_FREE_FORM,
        _case_free_form_part,
        _PARALLEL_FREE_FORM,
    )
    with parts if isinstance(parts, Forked) else nullcontext():
        table, rows = read_json_lines(lines, _CASE_PARSE) if candidates.size else (None, candidates)
        del lines
        if table is None:
            return np.zeros(0, dtype=np.int64), frames.empty(frames.CASES_SCHEMA)
        positions = candidates[rows]
        given = np.zeros(table.num_rows, dtype=bool)
        left_out = np.zeros(table.num_rows, dtype=bool)  # a free-form field with a default, missing or null
        for name in _CASE_FREE_FORM:
            valid = pc.is_valid(table.column(name)).to_numpy(zero_copy_only=False)
            given |= valid
            if name in _CASE_DEFAULTED:
                left_out |= ~valid
        parsed = pl.from_arrow(table.drop_columns(list(_CASE_FREE_FORM)))
        holds = _case_holds(parsed, text, positions, left_out)
        given |= text.gather(positions).str.contains(_MAY_NAME_VALUE_RULES).to_numpy()
        del table, text
        written_rows = [row for part in results_of(parts) for row in part]
    free_form = np.flatnonzero(holds & given)
    # each line with free-form values has them written, or goes per line
    at = np.searchsorted(written, positions[free_form]).tolist()
    decoded_rows: list[int] = []
    decoded: list[bytes] = []
    for row, index in zip(free_form.tolist(), at, strict=True):
        written_row = written_rows[index] if index < len(written_rows) and written[index] == positions[row] else None
        if written_row is None:
            holds[row] = False
        else:
            decoded_rows.append(row)
            decoded.append(written_row)
    kept = np.flatnonzero(holds)
    free = _free_form_frame(decoded_rows, decoded)
    no_calls = pl.lit([], dtype=frames.CASES_SCHEMA["reference_tool_calls"])
    parsed = parsed.with_columns(_row=pl.int_range(parsed.height, dtype=pl.Int64))
    if kept.size < parsed.height:
        parsed = parsed[kept]
    frame = (
        parsed.join(free, on="_row", how="left", maintain_order="left")
        .select(
            pl.lit(dataset_version, dtype=pl.String).alias("dataset_version"),
            "case_id",
            pl.col("case_revision").fill_null(1),
            "lanes",
            pl.col("input").fill_null(""),
            pl.col("criticality").fill_null("normal"),
            *[
                pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String)))
                for name in ("required_doc_ids", "expected_answer_contains")
            ],
            "reference_answer",
            pl.col("expect_refusal").fill_null(False),
            pl.col("multi_hop").fill_null(False),
            "allowed_tools",
            pl.col("forbidden_tools").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            pl.col("reference_tool_calls").fill_null(no_calls),
            pl.col("tool_match").fill_null("strict_order"),
            pl.col("alternatives").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["alternatives"])),
            pl.col("dependencies").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["dependencies"])),
            pl.col("fixtures_json").fill_null("{}"),
            "clock",
            pl.col("milestones").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["milestones"])),
            pl.col("fault").struct.field("kind").alias("fault_kind"),
            pl.col("fault").struct.field("tool").alias("fault_tool"),
            *[
                pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String)))
                for name in ("unsafe_after_fault", "escalation_tools")
            ],
            "scope_json",
            pl.lit(None, dtype=pl.String).alias("value_rules_json"),
            pl.lit(source, dtype=pl.String).alias("source_file"),
            pl.lit([], dtype=frames.CASES_SCHEMA["tags"]).alias("tags"),
            pl.lit(None, dtype=pl.String).alias("counterfactual_of"),
            pl.lit(None, dtype=pl.String).alias("changed_fact"),
        )
        .cast(frames.CASES_SCHEMA)
    )
    return positions[kept], frame


def _case_holds(parsed: pl.DataFrame, text: pl.Series, positions: np.ndarray, left_out: np.ndarray) -> np.ndarray:
    """Per row of the columnar read (of line positions[row] of `text`; `left_out`: rows missing a free-form field
    with a default, or giving it as null), whether the Case contract holds beyond the types pyarrow checked: required
    fields present, values of the literals, pairs as dependencies, the RAG contract, and a null only where the field
    may be left out."""
    element = pl.element()
    lanes = pl.col("lanes")
    fault = pl.col("fault")
    checked = (
        parsed.lazy()
        .select(
            holds=(
                (pl.col("case_id").str.len_bytes() > 0).fill_null(False)
                & ~pl.col("case_id").str.contains(HIDDEN_CHARACTER_REGEX).fill_null(True)
                & (lanes.list.len() > 0).fill_null(False)
                & every_element(lanes, element.is_in(["rag", "agent"]).fill_null(False))
                & pl.all_horizontal(
                    pl.col(name).is_null() | pl.col(name).is_in(values) for name, values in _LITERALS.items()
                )
                & pl.all_horizontal(every_element(pl.col(name), element.is_not_null()) for name in _STRING_LISTS)
                & every_element(
                    pl.col("dependencies"),
                    (element.list.len() == 2).fill_null(False) & every_element(element, pl.element().is_not_null()),
                )
                & (
                    fault.is_null()
                    | (
                        fault.struct.field("kind").is_in(_FAULT_KINDS).fill_null(False)
                        & fault.struct.field("tool").is_not_null()
                    )
                )
                # a rag case names the documents to retrieve, or expects a refusal
                & (
                    ~lanes.list.contains("rag")
                    | (pl.col("required_doc_ids").list.len() > 0).fill_null(False)
                    | pl.col("expect_refusal").fill_null(False)
                )
            ),
            defaulted=pl.any_horizontal(pl.col(name).is_null() for name in parsed.columns if name in _CASE_DEFAULTED),
        )
        .collect()
    )
    holds = checked["holds"].fill_null(False).to_numpy().copy()
    defaulted = np.flatnonzero((checked["defaulted"].fill_null(True).to_numpy() | left_out) & holds)
    if defaulted.size:
        holds[defaulted[text.gather(positions[defaulted]).str.contains(_CASE_NULL_FOR_DEFAULT).to_numpy()]] = False
    return holds


_PARALLEL_FREE_FORM = 4_000
# a line with free-form values names them (or spells a key with an escape)
_CASE_MAY_HAVE_FREE_FORM = rf'"(?:{"|".join(_CASE_FREE_FORM)})"|{_MAY_NAME_VALUE_RULES}'


def _case_free_form_part(payload: tuple, start: int, stop: int) -> list[bytes | None]:
    """The free-form columns of lines start..stop of the payload (the lines), each line's as one JSON object (the
    columns of _CASE_FREE_FORM_SCHEMA but `_row`), None for a line left to the per-line path."""
    (lines,) = payload
    written: list[bytes | None] = []
    with collector_paused():
        for line in lines[start:stop]:
            try:
                # JSON text, not the dicts: a worker's result is pickled to this process, where nested dicts took
                # several times longer to unpickle and to turn into Arrow than polars takes to decode the text
                written.append(orjson.dumps(_case_free_form(orjson.loads(line))))
            except Exception:  # noqa: BLE001 - whatever the reason, the per-line path decides
                written.append(None)
    return written


_FREE_FORM_STRUCT = pl.Struct({name: dtype for name, dtype in _CASE_FREE_FORM_SCHEMA.items() if name != "_row"})


def _free_form_frame(rows: list[int], written: list[bytes]) -> pl.DataFrame:
    """The _CASE_FREE_FORM_SCHEMA frame of the rows whose free-form columns the workers wrote as JSON objects.

    Every value in them is a string, a list of strings, null or a list of objects of those, so decoding the text
    gives back exactly the values written."""
    if not rows:
        return frames.empty(_CASE_FREE_FORM_SCHEMA)
    return (
        pl.DataFrame({"_row": pl.Series(rows, dtype=pl.Int64), "_free": pl.Series(written, dtype=pl.Binary)})
        .select("_row", pl.col("_free").cast(pl.String).str.json_decode(_FREE_FORM_STRUCT))
        .unnest("_free")
        .cast(_CASE_FREE_FORM_SCHEMA)
    )


class _NotColumnar(ValueError):
    """A free-form value the contract reads otherwise than as given, or refuses: the per-line path decides."""


def _case_free_form(value: dict) -> dict[str, Any]:
    """The free-form columns of a case row (as case_row writes them) from a decoded line the columnar read accepted;
    raises where Case would refuse or convert a value."""
    for name in _PER_LINE_FIELDS:
        if name in value:
            raise _NotColumnar(name)
    fixtures = value.get("fixtures", {})
    scope = value.get("scope")
    milestones = value.get("milestones", {})
    calls = value.get("reference_tool_calls", [])
    alternatives = value.get("alternatives", [])
    if type(fixtures) is not dict or (scope is not None and type(scope) is not dict) or type(milestones) is not dict:
        raise _NotColumnar("fixtures, scope or milestones")
    if (
        type(calls) is not list
        or type(alternatives) is not list
        or any(type(path) is not list for path in alternatives)
    ):
        raise _NotColumnar("reference_tool_calls or alternatives")
    return {
        "reference_tool_calls": [_tool_call(call) for call in calls],
        "alternatives": [[_tool_call(call) for call in path] for path in alternatives],
        "fixtures_json": frames.sorted_json(fixtures),
        "milestones": [_milestone(name, milestone) for name, milestone in milestones.items()],
        "scope_json": frames.canonical_json(scope) if scope is not None else None,
    }


def _tool_call(call: object) -> dict[str, Any]:
    """A TOOL_CALL row of a decoded ToolCall (strict: every value of its own JSON type)."""
    if type(call) is not dict:
        raise _NotColumnar("tool call")
    name, args, accepted, optional = (
        call.get("name"),
        call.get("args", {}),
        call.get("accepted"),
        call.get("optional", []),
    )
    if type(name) is not str or not name or type(args) is not dict:
        raise _NotColumnar("tool call name or args")
    if accepted is not None and (
        type(accepted) is not dict or any(type(values) is not list for values in accepted.values())
    ):
        raise _NotColumnar("accepted")
    if type(optional) is not list or any(type(item) is not str for item in optional):
        raise _NotColumnar("optional")
    if accepted and any(not values and name not in optional for name, values in accepted.items()):
        raise _NotColumnar("empty accepted values")
    return {
        "name": name,
        "args_json": frames.canonical_json(args),
        "accepted_json": frames.canonical_json(accepted) if accepted is not None else None,
        "optional": list(optional),
    }


_MILESTONE_KEYS = frozenset({"path", *MILESTONE_OPERATORS})
# the largest integer a float holds exactly: gte and lte read an integer as a float
_EXACT_FLOAT_INT = 2**53


def _milestone(name: str, milestone: object) -> dict[str, Any]:
    """A MILESTONE row of a decoded Milestone: a path and exactly one operator, whose operand Milestone keeps as given
    (or, for gte and lte, an integer as its float)."""
    if type(milestone) is not dict or not _MILESTONE_KEYS.issuperset(milestone):
        raise _NotColumnar("milestone")
    path = milestone.get("path")
    operators = [op for op in MILESTONE_OPERATORS if op in milestone]
    if type(path) is not str or not path or len(operators) != 1:
        raise _NotColumnar("milestone path or operator")
    operator = operators[0]
    operand = milestone[operator]
    if operator in ("exists", "absent") and operand is not None and type(operand) is not bool:
        raise _NotColumnar("milestone flag")
    if operator in ("gte", "lte") and operand is not None:
        if type(operand) is int and abs(operand) <= _EXACT_FLOAT_INT:
            operand = float(operand)
        elif type(operand) is not float:
            raise _NotColumnar("milestone bound")
    return {"name": name, "path": path, "op": operator, "value_json": frames.canonical_json(operand)}
