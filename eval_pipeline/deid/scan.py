"""Residual personal-data scan over every string column of a table, or over report text (the blocking check).

Two scans run and their findings are united: the replacement pass's own detectors, and an independent one
(residual.py: libphonenumber, python-stdnum, whitespace-tolerant grouping) that shares none of their code, so a
value that one misses is still found by the other.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

import polars as pl

from eval_pipeline.deid.candidates import classify
from eval_pipeline.deid.columns import ROW, VALUE, StringLeaves, keep_matches, leaf_name
from eval_pipeline.deid.detectors import PERSON, combined_pattern, mask
from eval_pipeline.deid.folding import folded_values, holds_non_ascii_email
from eval_pipeline.deid.identifiers import locale_regions
from eval_pipeline.deid.names import (
    NAME_FIELD_PATTERN,
    ROLE_FIELD_PATTERN,
    learned_field_pattern,
    names_from_field_match,
)
from eval_pipeline.deid.residual import CandidateMemo, scan_leaves

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String,
    "column": pl.String,
    "row": pl.Int64,
    "entity_type": pl.String,
    "masked_excerpt": pl.String,
}


_VERDICT_SCHEMA = {"match": pl.String, "entity_type": pl.String, "masked_excerpt": pl.String}


def _classified(matches: list[str], names: frozenset[str], regions: frozenset[str]) -> pl.DataFrame:
    """Entity type and masked excerpt of each distinct regex match that holds personal data."""
    rows = []
    for match in matches:
        rows += [(match, finding.entity_type, mask(finding.value)) for finding in classify(match, names, regions)]
    return pl.DataFrame(rows, schema=_VERDICT_SCHEMA, orient="row")


def _named(matches: list[str], learned: re.Pattern[str] | None) -> pl.DataFrame:
    """`"name_key":"value"` matches whose value is a person's name that is not a token."""
    rows = [(m, PERSON, mask(name)) for m in matches if (name := names_from_field_match(m, learned))]
    return pl.DataFrame(rows, schema=_VERDICT_SCHEMA, orient="row")


def scan_frame(
    frame: pl.DataFrame,
    table: str,
    names: Iterable[str] = (),
    name_keys: Iterable[str] = (),
    locale: str | None = None,
    independent: bool = True,
    memo: CandidateMemo | None = None,
) -> pl.DataFrame:
    """One row per residual finding in any string column (inside lists and structs too): table, column (dotted
    leaf path), row (0-based), entity_type, masked_excerpt. `names` (from collect_names) adds known name words,
    `name_keys` (NameCollector.name_keys) keys learned to hold names, `locale` the run's regions; `independent`
    adds the independent scan (residual.py) to the replacement's detectors, which looks up in `memo` the candidates
    of values it has scanned before (the union passes that made this frame)."""
    name_set = frozenset(names)
    regions = locale_regions(locale)
    pattern = combined_pattern(person_words=bool(name_set), regions=regions)
    learned_pattern = learned_field_pattern(name_keys)
    learned = re.compile(learned_pattern) if learned_pattern else None
    by_key = "|".join(p for p in (NAME_FIELD_PATTERN, ROLE_FIELD_PATTERN, learned_pattern) if p)
    found: dict[bool, list[pl.DataFrame]] = {False: [], True: []}
    # The regexes run once per distinct value of the whole table (ids, doc ids and JSON texts repeat across rows and
    # leaves) and the validators once per distinct match; only matches holding a finding are spread back over the
    # rows that hold their value.
    leaves = StringLeaves(frame)
    # Unicode disguises are undone first (folding.py): the detectors read what a reader sees. Non-ASCII text with an
    # `@` is read with the Unicode pattern, whose e-mails may be written in any script (disguise.undisguise).
    distinct = leaves.distinct.with_columns(folded_values(leaves.distinct[VALUE]).alias("folded"))
    wide = holds_non_ascii_email(distinct["folded"])
    unicode_pattern = combined_pattern(person_words=bool(name_set), regions=regions, unicode=True)
    for by_field, regex in ((False, pattern), (True, by_key)):
        extract = [(pl.lit(True), regex)] if by_field else [(~wide, regex), (wide, unicode_pattern)]
        matched = pl.concat(
            [
                distinct.filter(rows).select(VALUE, pl.col("folded").str.extract_all(rx).alias("match"))
                for rows, rx in extract
            ]
        )
        unique = matched["match"].explode().drop_nulls().unique().to_list()
        verdicts = _named(unique, learned) if by_field else _classified(unique, name_set, regions)
        if verdicts.height == 0:
            continue
        matched = keep_matches(matched, verdicts["match"].unique())
        for path, hits in leaves.spread(matched):
            found[by_field].append(
                # In the order of the text (row, then match, then value within it): a join left to choose its side
                # would order two values of one type in one cell by whichever table is larger.
                hits.join(verdicts, on="match", how="inner", maintain_order="left").select(
                    pl.lit(table).alias("table"),
                    pl.lit(leaf_name(path)).alias("column"),
                    pl.col(ROW).alias("row"),
                    "entity_type",
                    "masked_excerpt",
                )
            )
    detected = pl.concat(found[False]).cast(FINDINGS_SCHEMA) if found[False] else pl.DataFrame(schema=FINDINGS_SCHEMA)  # type: ignore[arg-type]
    if found[True]:
        # A name under a name key is also a known name word when names were given: report that occurrence once.
        keyed = pl.concat(found[True]).cast(FINDINGS_SCHEMA)  # type: ignore[arg-type]
        detected = pl.concat([detected, keyed.join(detected, on=list(FINDINGS_SCHEMA), how="anti")])
    if not independent:
        return detected.sort("column", "row", "entity_type", maintain_order=True)
    # The independent scan adds what the replacement's detectors did not see in that cell as that type.
    second = scan_leaves(leaves, table, regions, folded=distinct["folded"], memo=memo)
    cell = ["table", "column", "row", "entity_type"]
    detected = pl.concat([detected, second.join(detected, on=cell, how="anti").unique(maintain_order=True)])
    return detected.sort("column", "row", "entity_type", maintain_order=True)


def scan_text(text: str, table: str, names: Iterable[str] = (), locale: str | None = None) -> pl.DataFrame:
    """Residual findings in a text document such as a Markdown report; `row` is the 0-based line, column `text`.

    Each line is scanned, and each pair of adjacent lines, so a value split across a line break is found too
    (reported at its first line)."""
    return scan_documents([("text", text)], table, names, locale)


def scan_documents(
    documents: Sequence[tuple[str, str]], table: str, names: Iterable[str] = (), locale: str | None = None
) -> pl.DataFrame:
    """scan_text over many (name, text) documents in one pass of each detector: `column` is the document's name,
    `row` its 0-based line. One pass, not one per document: a run writes hundreds of case pages."""
    names = tuple(names)
    single, pairs = [], []
    for name, text in documents:
        lines = text.splitlines()
        single += [(name, i, line) for i, line in enumerate(lines)]
        pairs += [(name, i, f"{a}\n{b}") for i, (a, b) in enumerate(zip(lines, lines[1:], strict=False))]
    schema = {"document": pl.String, "line": pl.Int64, "text": pl.String}

    def found(rows: list[tuple[str, int, str]]) -> pl.DataFrame:
        frame = pl.DataFrame(rows, schema=schema, orient="row")
        hits = scan_frame(frame.select("text"), table, names, locale=locale)
        where = frame.select("document", "line").with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
        return hits.with_columns(pl.col("row").cast(pl.Int64)).join(where, on="row", how="left", maintain_order="left")

    own, joined = found(single), found(pairs)
    # A finding of a pair that one of its two lines already holds is that line's finding, not a split value.
    key = ["document", "line", "entity_type", "masked_excerpt"]
    mine = own.select(key)
    split = joined.join(mine, on=key, how="anti").join(mine.with_columns(pl.col("line") - 1), on=key, how="anti")
    order = {name: i for i, (name, _) in enumerate(documents)}
    return (
        pl.concat([own, split])
        .with_columns(pl.col("document").replace_strict(order, return_dtype=pl.Int64).alias("__document"))
        .sort("__document", "line", "entity_type", maintain_order=True)
        .select(
            "table", pl.col("document").alias("column"), pl.col("line").alias("row"), "entity_type", "masked_excerpt"
        )
        .cast(FINDINGS_SCHEMA)  # type: ignore[arg-type]
    )


def _scanner_digest() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for distribution in ("polars", "phonenumbers", "python-stdnum"):
        digest.update(f"\n{distribution}=={metadata.version(distribution)}".encode())
    for source in sorted(Path(__file__).parent.rglob("*")):
        if source.is_file() and source.suffix != ".pyc":
            digest.update(f"\n{source.relative_to(Path(__file__).parent)}\n".encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()


# Taken when the scanner's code is loaded (this module imports every detector), not when first asked: a process
# whose files were replaced after it started still names the scanner it runs.
_SCANNER_IDENTITY = _scanner_digest()


def scanner_identity() -> str:
    """A digest of everything the scan's verdict on a text depends on: this package's files as this process loaded
    them and the versions of Python and of the libraries its detectors call. A text that passed the scan passes it
    again while this holds."""
    return _SCANNER_IDENTITY


def leak_summary(findings: pl.DataFrame) -> dict[str, int]:
    """Residual findings counted by `table.column: TYPE`; names where personal data is, never the value."""
    counts = findings.group_by("table", "column", "entity_type").len().sort("table", "column", "entity_type")
    return {f"{t}.{c}: {e}": n for t, c, e, n in counts.iter_rows()}
