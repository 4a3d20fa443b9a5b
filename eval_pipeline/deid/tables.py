"""De-identification of the traces, cases and corpus tables (SPEC §9): keyed pseudonyms, columnar hot path.

One combined regex runs over whole columns in polars and wraps every candidate match in sentinel characters;
Python classifies only the unique candidates (checksums, value spans) and computes their tokens; polars then
splits each string at the sentinels, swaps the marked candidate pieces through a hash lookup, and joins the
pieces again, so a replacement lands exactly where the regex matched and nowhere else.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from eval_pipeline.deid.columns import VALUE, LeafPath, leaf_name, leaf_values, rewrite_leaves
from eval_pipeline.deid.detectors import (
    KV_STRING_PATTERN,
    KV_STRING_RE,
    NAME_FIELD_PATTERN,
    NAME_KEY_RE,
    ROLE_KEY_RE,
    ROLE_KEYS,
    TOKEN_PATTERN,
    TOKEN_RE,
    Finding,
    classify,
    combined_pattern,
    full_name,
    locale_regions,
    name_variants,
    names_from_field_match,
    person_name,
)
from eval_pipeline.deid.pseudonymize import Pseudonymizer

# Free-text and JSON-text leaves that are de-identified; identifiers the pipeline joins on are not among them.
TRACE_TEXT_PATHS: tuple[LeafPath, ...] = (
    ("input",),
    ("error",),
    ("retrieval", "query"),
    ("context", "text"),
    ("answer_text",),
    ("citations", "quote"),
    ("steps", "args_json"),
    ("steps", "result_json"),
    ("steps", "error"),
    ("steps", "state_diff_json"),
    ("steps", "dispatched_args_json"),
    ("steps", "content"),
    ("final_state_json",),
)
CASE_TEXT_PATHS: tuple[LeafPath, ...] = (
    ("input",),
    ("reference_answer",),
    ("expected_answer_contains",),
    ("reference_tool_calls", "args_json"),
    ("reference_tool_calls", "accepted_json"),
    ("alternatives", "args_json"),
    ("alternatives", "accepted_json"),
    ("fixtures_json",),
    ("milestones", "path"),
    ("milestones", "value_json"),
    ("scope_json",),
)
CORPUS_TEXT_PATHS: tuple[LeafPath, ...] = (("text",),)

# JSON leaves whose name-like keys hold names of people (fixtures and customer records).
TRACE_JSON_PATHS: tuple[LeafPath, ...] = (
    ("steps", "args_json"),
    ("steps", "result_json"),
    ("steps", "state_diff_json"),
    ("steps", "dispatched_args_json"),
    ("final_state_json",),
)
CASE_JSON_PATHS: tuple[LeafPath, ...] = (
    ("fixtures_json",),
    ("reference_tool_calls", "args_json"),
    ("reference_tool_calls", "accepted_json"),
    ("alternatives", "args_json"),
    ("alternatives", "accepted_json"),
    ("milestones", "value_json"),
    ("scope_json",),
)

REPORT_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String,
    "field": pl.String,
    "entity_type": pl.String,
    "replacements": pl.Int64,
}

# Unicode noncharacters: valid in strings, never meant for interchange, so real text does not hold them.
_SENTINELS = tuple(chr(c) for c in range(0xFDD0, 0xFDF0))
_NAME_PATH_PATTERN = r'"path":"[^"]*\.(?i:' + NAME_KEY_RE.pattern + r')"'


@dataclass(frozen=True)
class DeidResult:
    """De-identified frames (same schemas as the inputs) and the replacement counts by table, field and type."""

    traces: pl.DataFrame
    cases: pl.DataFrame
    corpus: pl.DataFrame | None
    report: pl.DataFrame


def _unique_matches(frame: pl.DataFrame, paths: Iterable[LeafPath], pattern: str) -> list[str]:
    """Distinct whole matches of `pattern` over the given leaves."""
    found: set[str] = set()
    for path in paths:
        values = leaf_values(frame, path)[VALUE]
        found.update(values.str.extract_all(pattern).explode().drop_nulls().unique().to_list())
    return sorted(found)


def _state_diff_names(traces: pl.DataFrame) -> set[str]:
    """Names in `state_diff` entries whose path ends in a name-like key (their values sit under before/after)."""
    names: set[str] = set()
    values = leaf_values(traces, ("steps", "state_diff_json"))[VALUE]
    for text in values.filter(values.str.contains(_NAME_PATH_PATTERN)).unique().to_list():
        try:
            changes = json.loads(text)
        except ValueError:
            continue
        for change in changes if isinstance(changes, list) else []:
            if isinstance(change, dict) and NAME_KEY_RE.fullmatch(str(change.get("path", "")).rsplit(".", 1)[-1]):
                names.update(
                    n
                    for v in (change.get("before"), change.get("after"))
                    if isinstance(v, str)
                    if (n := person_name(v))
                )
    return names


def _milestone_names(cases: pl.DataFrame) -> set[str]:
    """Names that a milestone compares a name-like path against."""
    milestones = cases.select(pl.col("milestones").explode().struct.unnest()).drop_nulls("path")
    names: set[str] = set()
    for path, value_json in milestones.select("path", "value_json").unique().iter_rows():
        if value_json and NAME_KEY_RE.fullmatch(path.rsplit(".", 1)[-1]):
            try:
                value = json.loads(value_json)
            except ValueError:
                continue
            if isinstance(value, str) and (name := person_name(value)):
                names.add(name)
    return names


def _field_names(frame: pl.DataFrame, paths: tuple[LeafPath, ...]) -> set[str]:
    names = set()
    for match in _unique_matches(frame, paths, NAME_FIELD_PATTERN):
        name = names_from_field_match(match)
        if name:
            names.add(name)
    return names


def trace_names(traces: pl.DataFrame) -> set[str]:
    """Names of people under name-like keys in a traces frame's tool arguments, results, state diffs and final state."""
    return _field_names(traces, TRACE_JSON_PATHS) | _state_diff_names(traces)


def case_names(cases: pl.DataFrame) -> set[str]:
    """Names of people under name-like keys in the cases' fixtures, reference calls and milestones."""
    return _field_names(cases, CASE_JSON_PATHS) | _milestone_names(cases)


# A `"key":"value"` pair worth a look when learning name keys: its key is a name or role key, or its value starts
# with a capital letter (it may be a known name under a key no list foresaw).
_PAIR_FILTER = r'^"(?i:' + NAME_KEY_RE.pattern + "|" + ROLE_KEYS + r')"|:\s*"\p{Lu}'


class NameCollector:
    """Learns which JSON keys hold names of people from the data itself, over every batch and the cases.

    A key holds names when it is a fixed name key (`full_name`), when one of its values is a name already found
    under such a key (`"signed_by": "Dana Whitfield"` after the customer record's `full_name`), or when it names a
    role (`approved_by`, `agent_name`) and at least half of its values are full names; the names under every such
    key are the run's names.
    """

    def __init__(self) -> None:
        # key -> person-like value -> occurrences; key -> occurrences of any value (for the role-key share).
        self._persons: dict[str, Counter[str]] = {}
        self._totals: Counter[str] = Counter()
        self._seeds: set[str] = set()

    def _add_pair(self, key: str, value: str, n: int = 1) -> None:
        if TOKEN_RE.search(value):
            return
        self._totals[key] += n
        if (name := person_name(value)) is not None:
            self._persons.setdefault(key, Counter())[name] += n

    def _add_json(self, frame: pl.DataFrame, paths: tuple[LeafPath, ...]) -> None:
        for path in paths:
            values = leaf_values(frame, path)[VALUE]
            matches = values.str.extract_all(KV_STRING_PATTERN).explode().drop_nulls()
            counts = matches.filter(matches.str.contains(_PAIR_FILTER)).value_counts(name="n")
            for match, n in counts.iter_rows():
                m = KV_STRING_RE.fullmatch(match)
                try:
                    key, value = json.loads(f'"{m.group(1)}"'), json.loads(f'"{m.group(2)}"')  # type: ignore[union-attr]
                except ValueError:
                    continue
                self._add_pair(key, value, n)

    def add_traces(self, traces: pl.DataFrame) -> None:
        """Evidence from one traces frame or batch (it needs only `steps` and `final_state_json`)."""
        self._add_json(traces, TRACE_JSON_PATHS)
        self._seeds |= trace_names(traces)
        values = leaf_values(traces, ("steps", "state_diff_json"))[VALUE]
        for text in values.filter(values.str.contains(r'"path"')).unique().to_list():
            try:
                changes = json.loads(text)
            except ValueError:
                continue
            for change in changes if isinstance(changes, list) else []:
                if isinstance(change, dict) and isinstance(change.get("path"), str):
                    key = change["path"].rsplit(".", 1)[-1]
                    for v in (change.get("before"), change.get("after")):
                        if isinstance(v, str):
                            self._add_pair(key, v)

    def add_cases(self, cases: pl.DataFrame) -> None:
        """Evidence from the cases: fixtures, reference calls, milestones."""
        self._add_json(cases, CASE_JSON_PATHS)
        self._seeds |= case_names(cases)
        milestones = cases.select(pl.col("milestones").explode().struct.unnest()).drop_nulls("path")
        for path, value_json in milestones.select("path", "value_json").unique().iter_rows():
            try:
                value = json.loads(value_json) if value_json else None
            except ValueError:
                continue
            if isinstance(value, str):
                self._add_pair(path.rsplit(".", 1)[-1], value)

    def name_keys(self) -> set[str]:
        """The keys whose values are names of people in this run's data."""
        keys = {k for k in self._totals if NAME_KEY_RE.fullmatch(k)}
        for key, persons in self._persons.items():
            full = sum(n for name, n in persons.items() if full_name(name))
            if ROLE_KEY_RE.fullmatch(key) and full * 2 >= self._totals[key]:
                keys.add(key)
        # A value that is a name found under a name key makes its key a name key too, until nothing changes.
        while True:
            known = self._seeds | {n for k in keys for n in self._persons.get(k, ())}
            words = {w for n in known for w in n.split()}
            grown = {
                k
                for k, persons in self._persons.items()
                if k not in keys and any(name in known or set(name.split()) <= words for name in persons)
            }
            if not grown:
                return keys
            keys |= grown

    def names(self) -> set[str]:
        """Names of people under every name key (fixed, role or learned), with the names found the fixed way."""
        return self._seeds | {n for k in self.name_keys() for n in self._persons.get(k, ())}


def name_words(names: Iterable[str]) -> list[str]:
    """The words to replace for these names (see detectors.name_variants)."""
    return sorted({v for n in names for v in name_variants(n)})


def collect_names(traces: pl.DataFrame, cases: pl.DataFrame) -> list[str]:
    """Words of the names of people found under name-like keys (fixed or learned, see NameCollector) in fixtures,
    tool arguments and results, final states and milestones: each is replaced wherever it stands as a whole word
    (see detectors.name_variants)."""
    collector = NameCollector()
    collector.add_traces(traces)
    collector.add_cases(cases)
    return name_words(collector.names())


def _pick_sentinels(columns: Iterable[pl.Series], count: int) -> list[str]:
    """`count` sentinel characters that occur in none of the given string series."""
    series = list(columns)
    free: list[str] = []
    for sentinel in _SENTINELS:
        if not any(s.str.contains(sentinel, literal=True).any() for s in series):
            free.append(sentinel)
            if len(free) == count:
                return free
    raise ValueError("the input holds the Unicode noncharacters U+FDD0..U+FDEF; cannot mark matches")


def _replacement(candidate: str, findings: list[Finding], pseudonymizer: Pseudonymizer) -> str:
    """The candidate text with each detected value (in order, not overlapping) swapped for its token."""
    pieces, pos = [], 0
    for finding in findings:
        pieces += [candidate[pos : finding.start], pseudonymizer.token(finding.entity_type, finding.value)]
        pos = finding.end
    return "".join(pieces) + candidate[pos:]


def _deidentify_table(
    frame: pl.DataFrame,
    table: str,
    paths: tuple[LeafPath, ...],
    names: frozenset[str],
    pseudonymizer: Pseudonymizer,
    regions: frozenset[str] = frozenset(),
) -> tuple[pl.DataFrame, pl.DataFrame, bool]:
    """One table with its text leaves de-identified, its replacement counts (REPORT_SCHEMA), and whether some match
    ran on past its last value into letters or digits, where another value may begin that this pass did not see.

    Tokens depend only on the key and the value, so tables are processed one at a time (lower peak memory) and
    still share every pseudonym.
    """
    pattern = combined_pattern(person_words=bool(names), regions=regions)
    # Each match becomes SEP MARK match SEP: splitting at SEP isolates it, and MARK tells it from the text between.
    sep, mark = _pick_sentinels((leaf_values(frame, p)[VALUE] for p in paths), 2)
    wrap = sep + mark + "${0}" + sep
    wrapped = frame.with_columns(rewrite_leaves(frame.schema, paths, lambda e: e.str.replace_all(pattern, wrap)))

    occurrences = []
    for path in paths:
        marked = leaf_values(wrapped, path)[VALUE].str.extract_all(f"{mark}[^{sep}]*").explode().drop_nulls()
        counts = marked.value_counts(name="n").rename({marked.name: "marked"})
        occurrences.append(counts.with_columns(field=pl.lit(leaf_name(path))))
    occurrences_frame = pl.concat(occurrences)

    mapping_rows, type_rows, ran_on = [], [], False
    for marked in occurrences_frame["marked"].unique().to_list():
        candidate = marked[1:]
        findings = classify(candidate, names, regions)
        if findings:
            mapping_rows.append((marked, _replacement(candidate, findings, pseudonymizer)))
            type_rows += [(marked, f.entity_type) for f in findings]
            ran_on = ran_on or any(ch.isalnum() for ch in candidate[findings[-1].end :])
    mapping = pl.DataFrame(mapping_rows, schema={"marked": pl.String, "replacement": pl.String}, orient="row")
    types = pl.DataFrame(type_rows, schema={"marked": pl.String, "entity_type": pl.String}, orient="row")

    def unwrap(expr: pl.Expr) -> pl.Expr:
        # A hash lookup per piece scales with the number of distinct candidates, where an automaton over all of
        # them (str.replace_many) costs seconds to build per field once they number in the hundreds of thousands.
        pieces = expr.str.split(sep).list.eval(pl.element().replace(mapping["marked"], mapping["replacement"]))
        return pieces.list.join("").str.replace_all(mark, "", literal=True)

    out = wrapped.with_columns(rewrite_leaves(frame.schema, paths, unwrap)).select(frame.columns)
    report = (
        occurrences_frame.join(types, on="marked", how="inner")
        .group_by("field", "entity_type")
        .agg(pl.col("n").sum().cast(pl.Int64).alias("replacements"))
        .select(pl.lit(table).alias("table"), "field", "entity_type", "replacements")
    )
    return out, report, ran_on


# A token followed by `_`: the regex took that underscore as the edge of the value before it, so a value right
# after it (`jane@x.com_203.0.113.7`) was not matched in the same pass.
_GLUED_TOKEN = TOKEN_PATTERN + "_"
# Passes over one table: a value that the regex half-swallowed with the one before it (a card after a phone
# number's digit groups) or glued to it by `_` is found by the next pass, once the first value is a token.
MAX_PASSES = 3


def _deidentify_until_stable(
    frame: pl.DataFrame,
    table: str,
    paths: tuple[LeafPath, ...],
    names: frozenset[str],
    pseudonymizer: Pseudonymizer,
    regions: frozenset[str] = frozenset(),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_deidentify_table`, repeated while a pass may have left a value behind (at most MAX_PASSES passes)."""
    reports = []
    for _ in range(MAX_PASSES):
        frame, report, ran_on = _deidentify_table(frame, table, paths, names, pseudonymizer, regions)
        reports.append(report)
        glued = any(leaf_values(frame, p)[VALUE].str.contains(_GLUED_TOKEN).any() for p in paths)
        if report.height == 0 or not (ran_on or glued):
            break
    summed = pl.concat(reports).group_by("table", "field", "entity_type").agg(pl.col("replacements").sum())
    return frame, summed


class Deidentifier:
    """One key, one set of names and one locale for a whole run, so traces de-identified batch by batch share every
    pseudonym. The locale (`de-DE`) sets the region of national phone numbers and turns on bare digit ids."""

    def __init__(self, key: bytes, names: Iterable[str], hex_chars: int = 16, locale: str | None = None) -> None:
        self.pseudonymizer = Pseudonymizer(key, hex_chars)
        self.names = frozenset(names)
        self.regions = locale_regions(locale)

    def _run(self, frame: pl.DataFrame, table: str, paths: tuple[LeafPath, ...]) -> tuple[pl.DataFrame, pl.DataFrame]:
        return _deidentify_until_stable(frame, table, paths, self.names, self.pseudonymizer, self.regions)

    def traces(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """A traces frame (or one batch of it) de-identified, with its replacement counts."""
        return self._run(frame, "traces", TRACE_TEXT_PATHS)

    def cases(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The cases de-identified, with their replacement counts."""
        return self._run(frame, "cases", CASE_TEXT_PATHS)

    def corpus(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The corpus de-identified, with its replacement counts."""
        return self._run(frame, "corpus", CORPUS_TEXT_PATHS)


def merge_reports(reports: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Replacement counts of several tables or batches, summed by table, field and type (REPORT_SCHEMA)."""
    frames = [r for r in reports if r.height]
    if not frames:
        return pl.DataFrame(schema=REPORT_SCHEMA)
    summed = pl.concat(frames).group_by("table", "field", "entity_type").agg(pl.col("replacements").sum())
    return summed.cast(REPORT_SCHEMA).select(list(REPORT_SCHEMA)).sort("table", "field", "entity_type")  # type: ignore[arg-type]


def deidentify(
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    corpus: pl.DataFrame | None,
    key: bytes,
    hex_chars: int = 16,
    locale: str | None = None,
) -> DeidResult:
    """Replace personal data in every free-text and JSON-text field of traces, cases and corpus with keyed tokens."""
    deid = Deidentifier(key, collect_names(traces, cases), hex_chars, locale)
    out_traces, traces_report = deid.traces(traces)
    out_cases, cases_report = deid.cases(cases)
    reports = [traces_report, cases_report]
    out_corpus = None
    if corpus is not None:
        out_corpus, corpus_report = deid.corpus(corpus)
        reports.append(corpus_report)
    return DeidResult(out_traces, out_cases, out_corpus, merge_reports(reports))
