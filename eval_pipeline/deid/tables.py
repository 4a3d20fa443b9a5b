"""De-identification of the traces, cases and corpus tables (docs/privacy.md): keyed pseudonyms, columnar hot path.

Each text leaf is reduced to its distinct values (corpus chunks in context, tool results and fixtures repeat across
rows). One combined regex runs over them in polars and wraps every candidate match in sentinel characters; Python
classifies only the unique candidates (checksums, value spans) and computes their tokens; polars then splits each
string at the sentinels, swaps the marked candidate pieces through a hash lookup, and joins the pieces again, so a
replacement lands exactly where the regex matched and nowhere else. The changed values are swapped into the rows
through one more hash lookup, and the counts are weighted by how often each value occurs. The names of people it
replaces are learned from the data first (name_learning.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from eval_pipeline.deid.candidates import Finding, classify
from eval_pipeline.deid.columns import (
    COUNT,
    VALUE,
    LeafPath,
    distinct_values,
    leaf_name,
    rewrite_each_leaf,
)
from eval_pipeline.deid.detectors import TOKEN_PATTERN, combined_pattern
from eval_pipeline.deid.disguise import apply_changes, pick_sentinels, undisguise, union
from eval_pipeline.deid.identifiers import locale_regions
from eval_pipeline.deid.name_learning import collect_names
from eval_pipeline.deid.pseudonymize import Pseudonymizer
from eval_pipeline.deid.residual import CandidateMemo

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
    ("changed_fact",),
    ("tags", "value"),
)
CORPUS_TEXT_PATHS: tuple[LeafPath, ...] = (("text",),)

REPORT_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String,
    "field": pl.String,
    "entity_type": pl.String,
    "replacements": pl.Int64,
}


@dataclass(frozen=True)
class DeidResult:
    """De-identified frames (same schemas as the inputs) and the replacement counts by table, field and type."""

    traces: pl.DataFrame
    cases: pl.DataFrame
    corpus: pl.DataFrame | None
    report: pl.DataFrame


def _replacement(candidate: str, findings: list[Finding], pseudonymizer: Pseudonymizer) -> str:
    """The candidate text with each detected value (in order, not overlapping) swapped for its token."""
    pieces, pos = [], 0
    for finding in findings:
        pieces += [candidate[pos : finding.start], pseudonymizer.token(finding.entity_type, finding.value)]
        pos = finding.end
    return "".join(pieces) + candidate[pos:]


# Candidates whose verdicts a Deidentifier keeps between tables and batches (the same e-mails, names and phones
# recur); past this many (some 50 MB) the memo starts afresh, so memory stays bounded on any run.
_VERDICTS_KEPT = 1 << 17
Verdict = tuple[str, tuple[str, ...], bool] | None


def _verdict(candidate: str, names: frozenset[str], pseudonymizer: Pseudonymizer, regions: frozenset[str]) -> Verdict:
    """What one regex candidate becomes: its text with each value tokenized, the values' types, and whether the
    match ran on past its last value into letters or digits; None when it holds no personal data."""
    findings = classify(candidate, names, regions)
    if not findings:
        return None
    runs_on = any(ch.isalnum() for ch in candidate[findings[-1].end :])
    return _replacement(candidate, findings, pseudonymizer), tuple(f.entity_type for f in findings), runs_on


# Columns of one leaf's distinct values while they are de-identified: the value as read, as it stands after the
# passes so far, its occurrences, and whether the last pass changed it (only those can change in the next pass).
_ORIGINAL, _CURRENT, _ACTIVE = "__deid_original", "__deid_current", "__deid_active"
# The same while a pass runs: the value with its candidates wrapped in sentinels, and the wrapped candidates.
_WRAPPED, _MARKED, _HIT = "__deid_wrapped", "__deid_marked", "__deid_hit"


_UNSEEN = object()


def _deidentify_pass(
    leaves: list[pl.DataFrame],
    table: str,
    paths: tuple[LeafPath, ...],
    names: frozenset[str],
    pseudonymizer: Pseudonymizer,
    regions: frozenset[str] = frozenset(),
    verdicts: dict[str, Verdict] | None = None,
) -> tuple[list[pl.DataFrame], pl.DataFrame, bool]:
    """One pass over each leaf's distinct values (see `_deidentify_until_stable`): the leaves with their values
    de-identified, the replacement counts (REPORT_SCHEMA, each value weighted by its occurrences), and whether some
    match ran on past its last value into letters or digits, where another value may begin that this pass did not see.

    Each value's result depends only on the value, so working on distinct values and weighting the counts gives
    what a pass over every row gives. `verdicts` memoizes `_verdict` by candidate.
    """
    pattern = combined_pattern(person_words=bool(names), regions=regions)
    # Each match becomes SEP MARK match SEP: splitting at SEP isolates it, and MARK tells it from the text between.
    sep, mark = pick_sentinels((leaf[_CURRENT] for leaf in leaves), 2)
    wrap = sep + mark + "${0}" + sep

    touched, resting, occurrences = [], [], []
    for leaf, path in zip(leaves, paths, strict=True):
        # A value the last pass left alone holds only candidates that are no personal data: it stays as it is.
        active = leaf.filter(pl.col(_ACTIVE))
        wrapped = active.with_columns(pl.col(_CURRENT).str.replace_all(pattern, wrap).alias(_WRAPPED))
        wrapped = wrapped.with_columns(pl.col(_WRAPPED).str.contains(mark, literal=True).alias(_HIT))
        wrapped, missed = wrapped.filter(pl.col(_HIT)).drop(_HIT), wrapped.filter(~pl.col(_HIT)).drop(_WRAPPED, _HIT)
        resting.append(pl.concat([leaf.filter(~pl.col(_ACTIVE)), missed.with_columns(pl.lit(False).alias(_ACTIVE))]))
        wrapped = wrapped.with_columns(pl.col(_WRAPPED).str.extract_all(f"{mark}[^{sep}]*").alias(_MARKED))
        marked = wrapped.select(pl.col(_MARKED).alias("marked"), COUNT).explode("marked").drop_nulls("marked")
        counts = marked.group_by("marked").agg(pl.col(COUNT).sum().alias("n"))
        occurrences.append(counts.with_columns(field=pl.lit(leaf_name(path))))
        touched.append(wrapped)
    occurrences_frame = pl.concat(occurrences)

    mapping_rows, type_rows, ran_on = [], [], False
    verdicts = {} if verdicts is None else verdicts
    if len(verdicts) > _VERDICTS_KEPT:
        verdicts.clear()
    for marked in occurrences_frame["marked"].unique().to_list():
        candidate = marked[1:]
        # one lookup, then one store: another table's pass may clear the shared memo between two lookups
        verdict = verdicts.get(candidate, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = verdicts[candidate] = _verdict(candidate, names, pseudonymizer, regions)
        if verdict is not None:
            replacement, entity_types, runs_on = verdict
            mapping_rows.append((marked, replacement))
            type_rows += [(marked, entity_type) for entity_type in entity_types]
            ran_on = ran_on or runs_on
    mapping = pl.DataFrame(mapping_rows, schema={"marked": pl.String, "replacement": pl.String}, orient="row")
    types = pl.DataFrame(type_rows, schema={"marked": pl.String, "entity_type": pl.String}, orient="row")

    def unwrap(expr: pl.Expr) -> pl.Expr:
        # A hash lookup per piece scales with the number of distinct candidates, where an automaton over all of
        # them (str.replace_many) costs seconds to build per field once they number in the hundreds of thousands.
        pieces = expr.str.split(sep).list.eval(pl.element().replace(mapping["marked"], mapping["replacement"]))
        return pieces.list.join("").str.replace_all(mark, "", literal=True)

    out = []
    for wrapped, rest in zip(touched, resting, strict=True):
        # A value none of whose candidates holds personal data comes back unchanged: it is not unwrapped.
        changes = pl.col(_MARKED).list.eval(pl.element().is_in(mapping["marked"].implode())).list.any()
        wrapped = wrapped.with_columns(changes.alias(_HIT))
        wrapped, kept = wrapped.filter(pl.col(_HIT)), wrapped.filter(~pl.col(_HIT)).select(rest.columns)
        done = wrapped.with_columns(unwrap(pl.col(_WRAPPED)).alias(_WRAPPED))
        done = done.with_columns((pl.col(_WRAPPED) != pl.col(_CURRENT)).alias(_ACTIVE)).drop(_CURRENT)
        kept = kept.with_columns(pl.lit(False).alias(_ACTIVE))
        out.append(pl.concat([rest, kept, done.rename({_WRAPPED: _CURRENT}).select(rest.columns)]))
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
    verdicts: dict[str, Verdict] | None = None,
    memo: CandidateMemo | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One table with its text leaves de-identified and its replacement counts: values in Unicode disguise first
    (disguise.undisguise), passes over the distinct values of each leaf, repeated while a pass may have left a value
    behind (at most MAX_PASSES), then what the independent scan still finds (disguise.union); each changed value is
    swapped in wherever it occurs.

    Tokens depend only on the key and the value, so tables are processed one at a time (lower peak memory) and
    still share every pseudonym.
    """
    leaves = [
        distinct_values(frame, path).select(
            pl.col(VALUE).alias(_ORIGINAL), pl.col(VALUE).alias(_CURRENT), COUNT, pl.lit(True).alias(_ACTIVE)
        )
        for path in paths
    ]

    def every_current() -> pl.Series:
        # a Series, not a list: the scans are vectorised, and a list of every distinct value costs seconds at 1M. Not
        # made unique here: a value may stand in several leaves, and both undisguise and union take distinct values
        # themselves (once, of what they keep).
        return pl.concat([leaf[_CURRENT] for leaf in leaves]) if leaves else pl.Series([], dtype=pl.String)

    leaves, report = apply_changes(
        leaves, table, paths, undisguise(every_current(), names, regions, pseudonymizer), _CURRENT, _ACTIVE
    )
    reports = [report]
    for _ in range(MAX_PASSES):
        leaves, report, ran_on = _deidentify_pass(leaves, table, paths, names, pseudonymizer, regions, verdicts)
        reports.append(report)
        glued = any(leaf[_CURRENT].str.contains(_GLUED_TOKEN).any() for leaf in leaves)
        if report.height == 0 or not (ran_on or glued):
            break
    leaves, report = apply_changes(
        leaves, table, paths, union(every_current(), regions, pseudonymizer, memo), _CURRENT, _ACTIVE
    )
    reports.append(report)
    replacements = {}
    for path, leaf in zip(paths, leaves, strict=True):
        changed = leaf.filter(pl.col(_ORIGINAL) != pl.col(_CURRENT))
        if changed.height:
            old, new = changed[_ORIGINAL], changed[_CURRENT]
            replacements[path] = lambda e, old=old, new=new: e.replace(old, new)
    out = frame.with_columns(rewrite_each_leaf(frame.schema, replacements)) if replacements else frame
    summed = pl.concat(reports).group_by("table", "field", "entity_type").agg(pl.col("replacements").sum())
    return out.select(frame.columns), summed


class Deidentifier:
    """One key, one set of names and one locale for a whole run, so traces de-identified batch by batch share every
    pseudonym. The locale (`de-DE`) sets the region of national phone numbers and turns on bare digit ids. Two tables
    may be de-identified on two threads at once: what they share (verdicts, tokens) is memoized per value."""

    def __init__(self, key: bytes, names: Iterable[str], hex_chars: int = 16, locale: str | None = None) -> None:
        self.pseudonymizer = Pseudonymizer(key, hex_chars)
        self.names = frozenset(names)
        self.regions = locale_regions(locale)
        self._verdicts: dict[str, Verdict] = {}

    def _run(
        self, frame: pl.DataFrame, table: str, paths: tuple[LeafPath, ...], memo: CandidateMemo | None
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        return _deidentify_until_stable(
            frame, table, paths, self.names, self.pseudonymizer, self.regions, self._verdicts, memo
        )

    # `memo` (residual.CandidateMemo) keeps what the independent scan of the union pass read, for the residual check
    # of the same output (scan.scan_frame) to look up instead of scanning those values again.

    def traces(self, frame: pl.DataFrame, memo: CandidateMemo | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """A traces frame (or one batch of it) de-identified, with its replacement counts."""
        return self._run(frame, "traces", TRACE_TEXT_PATHS, memo)

    def cases(self, frame: pl.DataFrame, memo: CandidateMemo | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The cases de-identified, with their replacement counts."""
        return self._run(frame, "cases", CASE_TEXT_PATHS, memo)

    def corpus(self, frame: pl.DataFrame, memo: CandidateMemo | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The corpus de-identified, with its replacement counts."""
        return self._run(frame, "corpus", CORPUS_TEXT_PATHS, memo)


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
