"""Two steps beside the columnar passes (tables.py): Unicode disguises before them, the independent scan after.

Values in Unicode disguise are de-identified before the passes, and the union with the independent scan after them.
Disguised values (folding.may_be_disguised: ASCII never is, unless it holds a percent escape) are folded, the
combined regex runs over the folded texts in polars, and each value it finds is replaced over the original span it
came from, keyed on the folded spelling, so `ｊａｎｅ＠…`, `ja\u200bne@…` and `jane%40…` share the token of `jane@…`.
After the passes, what the independent scan (residual.py) still finds is replaced the same way, with the same keyed
pseudonyms: the blocking check then verifies the union of both detectors, and fails only on a value both missed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import polars as pl

from eval_pipeline.deid.candidates import Finding, classify
from eval_pipeline.deid.columns import COUNT, LeafPath, leaf_name
from eval_pipeline.deid.detectors import combined_pattern
from eval_pipeline.deid.folding import fold, holds_non_ascii_email, may_be_disguised
from eval_pipeline.deid.pseudonymize import Pseudonymizer
from eval_pipeline.deid.residual import CandidateMemo, residual_spans, values_with_findings

# Unicode noncharacters: valid in strings, never meant for interchange, so real text does not hold them.
SENTINELS = tuple(chr(c) for c in range(0xFDD0, 0xFDF0))
# Rounds over one value: a value the regex ran on into the next one is found once the first is a token.
_ROUNDS = 3
Changes = dict[str, tuple[str, tuple[str, ...]]]


def pick_sentinels(columns: Iterable[pl.Series], count: int) -> list[str]:
    """`count` sentinel characters that occur in none of the given string series."""
    series = list(columns)
    free: list[str] = []
    for sentinel in SENTINELS:
        if not any(s.str.contains(sentinel, literal=True).any() for s in series):
            free.append(sentinel)
            if len(free) == count:
                return free
    raise ValueError("the input holds the Unicode noncharacters U+FDD0..U+FDEF; cannot mark matches")


def _splice(value: str, spans: list[tuple[int, int, str]]) -> str:
    """`value` with each span (in order, not overlapping) replaced by its text."""
    pieces, pos = [], 0
    for start, end, text in spans:
        pieces += [value[pos:start], text]
        pos = end
    return "".join(pieces) + value[pos:]


def _undisguise_round(
    values: list[str],
    pattern: str,
    names: frozenset[str],
    regions: frozenset[str],
    pseudonymizer: Pseudonymizer,
    memo: dict[str, list[Finding]],
) -> Changes:
    """One round: each value whose folded text holds personal data, with the values replaced over their original
    spans."""
    if not values:
        return {}
    folds = [(value, fold(value)) for value in values]
    texts = pl.Series([folded.text for _, folded in folds], dtype=pl.String)
    sep, mark = pick_sentinels([texts], 2)
    wrapped = texts.str.replace_all(pattern, sep + mark + "${0}" + sep).to_list()
    changes: Changes = {}
    for (value, folded), marked in zip(folds, wrapped, strict=True):
        spans, types, pos = [], [], 0
        for piece in marked.split(sep):
            if piece.startswith(mark):
                candidate = piece[1:]
                if candidate not in memo:
                    memo[candidate] = classify(candidate, names, regions)
                for finding in memo[candidate]:
                    start, end = folded.source(pos + finding.start, pos + finding.end)
                    if not spans or start >= spans[-1][1]:
                        spans.append((start, end, pseudonymizer.token(finding.entity_type, finding.value)))
                        types.append(finding.entity_type)
                pos += len(candidate)
            else:
                pos += len(piece)
        if spans:
            changes[value] = (_splice(value, spans), tuple(types))
    return changes


def _rounds(values: pl.Series | list[str], one_round: Callable[[list[str]], Changes]) -> Changes:
    """Rounds of `one_round`, each over the values the last one changed: original value -> (last form, all types).

    Only changed values get an entry of origins (most values hold nothing): a form a round wrote that is itself one
    of the values is also its own origin, found for the few forms written in one vectorised membership test."""
    originals = values if isinstance(values, pl.Series) else pl.Series(values, dtype=pl.String)
    origins: dict[str, list[str]] = {}
    changes: Changes = {}
    pending = values
    for _ in range(_ROUNDS):
        done = one_round(pending)
        if not done:
            break
        written = pl.Series(list(dict.fromkeys(new for new, _ in done.values())), dtype=pl.String)
        also_original = set(written.filter(written.is_in(originals.implode())).to_list())
        for now, (new, types) in done.items():
            for original in origins.get(now, [now]):
                changes[original] = (new, changes.get(original, (original, ()))[1] + types)
            origins.setdefault(new, [new] if new in also_original else []).extend(origins.get(now, [now]))
        pending = written.to_list()
    return changes


def undisguise(
    values: pl.Series | list[str], names: frozenset[str], regions: frozenset[str], pseudonymizer: Pseudonymizer
) -> Changes:
    """Disguised values holding personal data: original value -> (the value with each one tokenized, their types)."""
    series = values if isinstance(values, pl.Series) else pl.Series(values, dtype=pl.String)
    # Besides disguised values, e-mails holding non-ASCII text: they may be written in any script, which only the
    # slower Unicode pattern reads whole (`josé.garcía@…`, where the ASCII one sees `a@…`).
    chosen = may_be_disguised(series) | holds_non_ascii_email(series)
    disguised = series.filter(chosen).unique(maintain_order=True).to_list()
    if not disguised:
        return {}
    pattern = combined_pattern(person_words=bool(names), regions=regions, unicode=True)
    memo: dict[str, list[Finding]] = {}
    return _rounds(disguised, lambda vs: _undisguise_round(vs, pattern, names, regions, pseudonymizer, memo))


def _union_round(
    values: pl.Series | list[str], regions: frozenset[str], pseudonymizer: Pseudonymizer, memo: CandidateMemo | None
) -> Changes:
    changes: Changes = {}
    series = values if isinstance(values, pl.Series) else pl.Series(values, dtype=pl.String)
    for value in values_with_findings(series, regions, memo).to_list():
        spans = residual_spans(value, regions)
        if spans:
            tokens = [(start, end, pseudonymizer.token(kind, found)) for kind, found, start, end in spans]
            changes[value] = (_splice(value, tokens), tuple(kind for kind, _, _, _ in spans))
    return changes


def union(
    values: pl.Series | list[str],
    regions: frozenset[str],
    pseudonymizer: Pseudonymizer,
    memo: CandidateMemo | None = None,
) -> Changes:
    """Values in which the independent scan still finds personal data: value -> (tokenized value, types); `memo`
    keeps the candidates of every value scanned (residual.CandidateMemo)."""
    return _rounds(values, lambda vs: _union_round(vs, regions, pseudonymizer, memo))


def apply_changes(
    leaves: list[pl.DataFrame], table: str, paths: tuple[LeafPath, ...], changes: Changes, current: str, active: str
) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """Each leaf's distinct values (`current`, COUNT, `active`) with the changes made, and the replacement counts
    (tables.REPORT_SCHEMA, each value weighted by its occurrences)."""
    schema = {"table": pl.String, "field": pl.String, "entity_type": pl.String, "replacements": pl.Int64}
    if not changes:
        return leaves, pl.DataFrame(schema=schema)
    old = pl.Series(list(changes), dtype=pl.String)
    new = pl.Series([new for new, _ in changes.values()], dtype=pl.String)
    types = pl.DataFrame(
        [(o, t) for o, (_, ts) in changes.items() for t in ts],
        schema={"old": pl.String, "entity_type": pl.String},
        orient="row",
    )
    out, counts = [], []
    for leaf, path in zip(leaves, paths, strict=True):
        hit = pl.col(current).is_in(old.implode())
        counts.append(
            leaf.filter(hit)
            .join(types, left_on=current, right_on="old", how="inner")
            .group_by("entity_type")
            .agg(pl.col(COUNT).sum().cast(pl.Int64).alias("replacements"))
            .select(pl.lit(table).alias("table"), pl.lit(leaf_name(path)).alias("field"), "entity_type", "replacements")
        )
        out.append(leaf.with_columns(pl.col(current).replace(old, new), (pl.col(active) | hit).alias(active)))
    return out, pl.concat(counts).cast(schema)  # type: ignore[arg-type]
