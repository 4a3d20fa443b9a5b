"""Learning the names of people from the data: name-like JSON keys, the names under them, the words to replace.

A key holds names when it is a fixed name key, a role key whose values are mostly full names, or a key one of whose
values is a name already found (NameCollector). The words of those names are what the de-identification passes
(tables.py) replace wherever they stand as whole words.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

import polars as pl

from eval_pipeline.deid.columns import COUNT, VALUE, LeafPath, distinct_values
from eval_pipeline.deid.detectors import TOKEN_PATTERN, TOKEN_RE
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

_NAME_PATH_PATTERN = r'"path":"[^"]*\.(?i:' + NAME_KEY_RE.pattern + r')"'


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
NOT_IN_NAMES = r"[\x00-\x08\x0e-\x1b!-&(-,/-@\[-`{-\x7f]"
MAY_START_NAME = r"[A-Z]|[^\x00-\x7f]"
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
        """Count `key`, `value`, `n` rows: a value holding a token counts for nothing, a person-like value for its
        key."""
        pairs = pairs.filter(~pl.col("value").str.contains(TOKEN_PATTERN))
        if pairs.height == 0:
            return
        for key, n in pairs.group_by("key").agg(pl.col("n").sum()).iter_rows():
            self._totals[key] += n
        values = pairs["value"].unique()
        values = values.filter(~values.str.contains(NOT_IN_NAMES) & values.str.contains(MAY_START_NAME))
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
    """The words to replace for these names (see names.name_variants)."""
    return sorted({v for n in names for v in name_variants(n)})


def collect_names(traces: pl.DataFrame, cases: pl.DataFrame) -> list[str]:
    """Words of the names of people found under name-like keys (fixed or learned, see NameCollector) in fixtures,
    tool arguments and results, final states and milestones: each is replaced wherever it stands as a whole word
    (see names.name_variants)."""
    collector = NameCollector()
    collector.add_traces(traces)
    collector.add_cases(cases)
    return name_words(collector.names())
