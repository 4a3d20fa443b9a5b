"""De-identification of the traces, cases and corpus tables (docs/privacy.md): keyed pseudonyms, columnar hot path.

Each text leaf is reduced to its distinct values (corpus chunks in context, tool results and fixtures repeat across
rows). One combined regex runs over them in polars and wraps every candidate match in sentinel characters; Python
classifies only the unique candidates (checksums, value spans) and computes their tokens; polars then splits each
string at the sentinels, swaps the marked candidate pieces through a hash lookup, and joins the pieces again, so a
replacement lands exactly where the regex matched and nowhere else. The changed values are swapped into the rows
through one more hash lookup, and the counts are weighted by how often each value occurs.
"""

from __future__ import annotations

import json
from collections import Counter
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
from eval_pipeline.deid.detectors import TOKEN_PATTERN, TOKEN_RE, combined_pattern
from eval_pipeline.deid.disguise import apply_changes, pick_sentinels, undisguise, union
from eval_pipeline.deid.identifiers import locale_regions
from eval_pipeline.deid.names import (
    KV_STRING_PATTERN,
    NAME_FIELD_PATTERN,
    NAME_KEY_RE,
    ROLE_KEY_RE,
    ROLE_KEYS,
    full_name,
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
    ("changed_fact",),
    ("tags", "value"),
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

_NAME_PATH_PATTERN = r'"path":"[^"]*\.(?i:' + NAME_KEY_RE.pattern + r')"'


@dataclass(frozen=True)
class DeidResult:
    """De-identified frames (same schemas as the inputs) and the replacement counts by table, field and type."""

    traces: pl.DataFrame
    cases: pl.DataFrame
    corpus: pl.DataFrame | None
    report: pl.DataFrame


def _distinct_texts(frame: pl.DataFrame, paths: Iterable[LeafPath]) -> list[pl.DataFrame]:
    """Each leaf's distinct values with their occurrences (columns.distinct_values), leaf by leaf."""
    return [distinct_values(frame, path) for path in paths]


def _unique_matches(leaves: Iterable[pl.DataFrame], pattern: str) -> list[str]:
    """Distinct whole matches of `pattern` over the distinct values of some leaves."""
    found: set[str] = set()
    for leaf in leaves:
        found.update(leaf[VALUE].str.extract_all(pattern).explode().drop_nulls().unique().to_list())
    return sorted(found)


def _changes(text: str) -> list[dict]:
    """The change records of one state_diff JSON text (none when it is not a JSON list)."""
    try:
        changes = json.loads(text)
    except ValueError:
        return []
    return [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []


def _state_diff_seeds(changes: Iterable[dict]) -> set[str]:
    """Names under before/after of the changes whose path ends in a name-like key."""
    names: set[str] = set()
    for change in changes:
        if NAME_KEY_RE.fullmatch(str(change.get("path", "")).rsplit(".", 1)[-1]):
            names.update(
                n for v in (change.get("before"), change.get("after")) if isinstance(v, str) if (n := person_name(v))
            )
    return names


def _state_diff_names(traces: pl.DataFrame) -> set[str]:
    """Names in `state_diff` entries whose path ends in a name-like key (their values sit under before/after)."""
    values = distinct_values(traces, ("steps", "state_diff_json"))[VALUE]
    names: set[str] = set()
    for text in values.filter(values.str.contains(_NAME_PATH_PATTERN)).to_list():
        names |= _state_diff_seeds(_changes(text))
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


def _field_names(leaves: Iterable[pl.DataFrame]) -> set[str]:
    """Names under the fixed name keys and role keys in the distinct values of some JSON leaves."""
    names = set()
    for match in _unique_matches(leaves, NAME_FIELD_PATTERN):
        name = names_from_field_match(match)
        if name:
            names.add(name)
    return names


def trace_names(traces: pl.DataFrame) -> set[str]:
    """Names of people under name-like keys in a traces frame's tool arguments, results, state diffs and final state."""
    return _field_names(_distinct_texts(traces, TRACE_JSON_PATHS)) | _state_diff_names(traces)


def case_names(cases: pl.DataFrame) -> set[str]:
    """Names of people under name-like keys in the cases' fixtures, reference calls and milestones."""
    return _field_names(_distinct_texts(cases, CASE_JSON_PATHS)) | _milestone_names(cases)


# A `"key":"value"` pair worth a look when learning name keys: its key is a name or role key, or its value starts
# with a capital letter (it may be a known name under a key no list foresaw).
_PAIR_FILTER = r'^"(?i:' + NAME_KEY_RE.pattern + "|" + ROLE_KEYS + r')"|:\s*"\p{Lu}'
# A JSON string body without escapes or control characters: json.loads gives it back unchanged.
_PLAIN_JSON_STRING = r"^[^\\\x00-\x1f]*$"
# ASCII that no word of a person's name holds (person_name: letters, `'`, `-`, `.` between whitespace); a value
# with one of these is no name, and a value without an ASCII capital or any non-ASCII letter cannot start a word.
_NOT_IN_NAMES = r"[\x00-\x08\x0e-\x1b!-&(-,/-@\[-`{-\x7f]"
_MAY_START_NAME = r"[A-Z]|[^\x00-\x7f]"
_PAIRS_SCHEMA = {"key": pl.String, "value": pl.String, "n": pl.Int64}


def _json_string(body: str) -> str | None:
    """The text of a JSON string body (still escaped), None when it is not valid JSON."""
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return None


class NameCollector:
    """Learns which JSON keys hold names of people from the data itself, over every batch and the cases.

    A key holds names when it is a fixed name key (`full_name`), when one of its values is a name already found
    under such a key (`"signed_by": "Dana Whitfield"` after the customer record's `full_name`), or when it names a
    role (`approved_by`, `agent_name`) and at least half of its values are full names; the names under every such
    key are the run's names.

    Pairs are counted in polars over distinct values; Python sees each distinct value once (person_name).
    """

    def __init__(self) -> None:
        # key -> person-like value -> occurrences; key -> occurrences of any value (for the role-key share).
        self._persons: dict[str, Counter[str]] = {}
        self._totals: Counter[str] = Counter()
        self._seeds: set[str] = set()

    def _add_pairs(self, pairs: pl.DataFrame) -> None:
        """Count `key`, `value`, `n` rows: a value holding a token counts for nothing, a person-like value for its key."""
        pairs = pairs.filter(~pl.col("value").str.contains(TOKEN_PATTERN))
        if pairs.height == 0:
            return
        for key, n in pairs.group_by("key").agg(pl.col("n").sum()).iter_rows():
            self._totals[key] += n
        values = pairs["value"].unique()
        values = values.filter(~values.str.contains(_NOT_IN_NAMES) & values.str.contains(_MAY_START_NAME))
        named = [(v, name) for v in values.to_list() if (name := person_name(v)) is not None]
        if not named:
            return
        names = pl.DataFrame(named, schema={"value": pl.String, "name": pl.String}, orient="row")
        persons = pairs.join(names, on="value", how="inner").group_by("key", "name").agg(pl.col("n").sum())
        for key, name, n in persons.iter_rows():
            self._persons.setdefault(key, Counter())[name] += n

    def _add_pair(self, key: str, value: str, n: int = 1) -> None:
        """One pair counted in Python, as `_add_pairs` counts a frame of them."""
        if TOKEN_RE.search(value):
            return
        self._totals[key] += n
        if (name := person_name(value)) is not None:
            self._persons.setdefault(key, Counter())[name] += n

    def _pairs_frame(self, rows: list[tuple[str, str, int]]) -> pl.DataFrame:
        """Pairs decoded in Python as a frame for `_add_pairs`; one holding a lone surrogate (a `\\ud800` escape),
        which no Arrow string can hold, is counted here instead."""
        try:
            return pl.DataFrame(rows, schema=_PAIRS_SCHEMA, orient="row")
        except UnicodeEncodeError:
            kept = []
            for row in rows:
                try:
                    row[0].encode(), row[1].encode()
                except UnicodeEncodeError:
                    self._add_pair(*row)
                else:
                    kept.append(row)
            return pl.DataFrame(kept, schema=_PAIRS_SCHEMA, orient="row")

    def _json_pairs(self, leaves: Iterable[pl.DataFrame]) -> pl.DataFrame:
        """The string `"key":"value"` pairs worth a look in the distinct values of some JSON leaves, decoded, with
        their occurrences (`key`, `value`, `n`)."""
        found = [
            leaf.select(pl.col(VALUE).str.extract_all(KV_STRING_PATTERN).alias("match"), COUNT).explode("match")
            for leaf in leaves
        ]
        counts = (
            pl.concat(found)
            .drop_nulls("match")
            .group_by("match")
            .agg(pl.col(COUNT).sum().alias("n"))
            .filter(pl.col("match").str.contains(_PAIR_FILTER))
        )
        raw = counts.select(pl.col("match").str.extract_groups(KV_STRING_PATTERN).struct.unnest(), "n").rename(
            {"1": "key", "2": "value"}
        )
        plain = pl.col("key").str.contains(_PLAIN_JSON_STRING) & pl.col("value").str.contains(_PLAIN_JSON_STRING)
        escaped = [
            (key, value, n)
            for k, v, n in raw.filter(~plain).iter_rows()
            if (key := _json_string(k)) is not None and (value := _json_string(v)) is not None
        ]
        return pl.concat([raw.filter(plain).cast({"n": pl.Int64}), self._pairs_frame(escaped)])

    def add_traces(self, traces: pl.DataFrame) -> None:
        """Evidence from one traces frame or batch (it needs only `steps` and `final_state_json`)."""
        leaves = _distinct_texts(traces, TRACE_JSON_PATHS)
        pairs = [self._json_pairs(leaves)]
        self._seeds |= _field_names(leaves)
        values = leaves[TRACE_JSON_PATHS.index(("steps", "state_diff_json"))]
        texts = values.filter(pl.col(VALUE).str.contains(r'"path"')).select(
            VALUE, pl.col(VALUE).str.contains(_NAME_PATH_PATTERN).alias("named")
        )
        # Each distinct state_diff text counts once (as it always has), whatever its occurrences.
        diff_pairs = []
        for text, named in texts.iter_rows():
            changes = _changes(text)
            if named:
                self._seeds |= _state_diff_seeds(changes)
            for change in changes:
                if isinstance(change.get("path"), str):
                    key = change["path"].rsplit(".", 1)[-1]
                    diff_pairs += [
                        (key, v, 1) for v in (change.get("before"), change.get("after")) if isinstance(v, str)
                    ]
        pairs.append(self._pairs_frame(diff_pairs))
        self._add_pairs(pl.concat(pairs))

    def add_cases(self, cases: pl.DataFrame) -> None:
        """Evidence from the cases: fixtures, reference calls, milestones."""
        leaves = _distinct_texts(cases, CASE_JSON_PATHS)
        pairs = [self._json_pairs(leaves)]
        self._seeds |= _field_names(leaves) | _milestone_names(cases)
        milestones = cases.select(pl.col("milestones").explode().struct.unnest()).drop_nulls("path")
        milestone_pairs = []
        for path, value_json in milestones.select("path", "value_json").unique().iter_rows():
            try:
                value = json.loads(value_json) if value_json else None
            except ValueError:
                continue
            if isinstance(value, str):
                milestone_pairs.append((path.rsplit(".", 1)[-1], value, 1))
        pairs.append(self._pairs_frame(milestone_pairs))
        self._add_pairs(pl.concat(pairs))

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
        if candidate not in verdicts:
            verdicts[candidate] = _verdict(candidate, names, pseudonymizer, regions)
        verdict = verdicts[candidate]
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

    def distinct_current() -> list[str]:
        return pl.concat([leaf[_CURRENT] for leaf in leaves]).unique().to_list() if leaves else []

    leaves, report = apply_changes(
        leaves, table, paths, undisguise(distinct_current(), names, regions, pseudonymizer), _CURRENT, _ACTIVE
    )
    reports = [report]
    for _ in range(MAX_PASSES):
        leaves, report, ran_on = _deidentify_pass(leaves, table, paths, names, pseudonymizer, regions, verdicts)
        reports.append(report)
        glued = any(leaf[_CURRENT].str.contains(_GLUED_TOKEN).any() for leaf in leaves)
        if report.height == 0 or not (ran_on or glued):
            break
    leaves, report = apply_changes(
        leaves, table, paths, union(distinct_current(), regions, pseudonymizer), _CURRENT, _ACTIVE
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
    pseudonym. The locale (`de-DE`) sets the region of national phone numbers and turns on bare digit ids."""

    def __init__(self, key: bytes, names: Iterable[str], hex_chars: int = 16, locale: str | None = None) -> None:
        self.pseudonymizer = Pseudonymizer(key, hex_chars)
        self.names = frozenset(names)
        self.regions = locale_regions(locale)
        self._verdicts: dict[str, Verdict] = {}

    def _run(self, frame: pl.DataFrame, table: str, paths: tuple[LeafPath, ...]) -> tuple[pl.DataFrame, pl.DataFrame]:
        return _deidentify_until_stable(
            frame, table, paths, self.names, self.pseudonymizer, self.regions, self._verdicts
        )

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
