"""Residual personal-data scan over every string column of a table, or over report text (the blocking check)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from eval_pipeline.deid.columns import ROW, VALUE, leaf_name, leaf_values, string_paths
from eval_pipeline.deid.detectors import (
    NAME_FIELD_PATTERN,
    PERSON,
    classify,
    combined_pattern,
    mask,
    names_from_field_match,
)

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String,
    "column": pl.String,
    "row": pl.Int64,
    "entity_type": pl.String,
    "masked_excerpt": pl.String,
}


_VERDICT_SCHEMA = {"match": pl.String, "entity_type": pl.String, "masked_excerpt": pl.String}


def _classified(matches: list[str], names: frozenset[str]) -> pl.DataFrame:
    """Entity type and masked excerpt of each distinct regex match that holds personal data."""
    rows = []
    for match in matches:
        rows += [(match, finding.entity_type, mask(finding.value)) for finding in classify(match, names)]
    return pl.DataFrame(rows, schema=_VERDICT_SCHEMA, orient="row")


def _named(matches: list[str]) -> pl.DataFrame:
    """`"name_key":"value"` matches whose value is a person's name that is not a token."""
    rows = [(m, PERSON, mask(name)) for m in matches if (name := names_from_field_match(m))]
    return pl.DataFrame(rows, schema=_VERDICT_SCHEMA, orient="row")


def scan_frame(frame: pl.DataFrame, table: str, names: Iterable[str] = ()) -> pl.DataFrame:
    """One row per residual finding in any string column (inside lists and structs too): table, column (dotted
    leaf path), row (0-based), entity_type, masked_excerpt. `names` (from collect_names) adds known name words."""
    name_set = frozenset(names)
    pattern = combined_pattern(person_words=bool(name_set))
    found: dict[bool, list[pl.DataFrame]] = {False: [], True: []}
    for path in string_paths(frame.schema):
        values = leaf_values(frame, path)
        for by_field, regex in ((False, pattern), (True, NAME_FIELD_PATTERN)):
            hits = (
                values.select(ROW, pl.col(VALUE).str.extract_all(regex).alias("match"))
                .explode("match")
                .drop_nulls("match")
            )
            if hits.height == 0:
                continue
            unique = hits["match"].unique().to_list()
            verdicts = _named(unique) if by_field else _classified(unique, name_set)
            found[by_field].append(
                hits.join(verdicts, on="match", how="inner").select(
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
        by_key = pl.concat(found[True]).cast(FINDINGS_SCHEMA)  # type: ignore[arg-type]
        detected = pl.concat([detected, by_key.join(detected, on=list(FINDINGS_SCHEMA), how="anti")])
    return detected.sort("column", "row", "entity_type", maintain_order=True)


def scan_text(text: str, table: str, names: Iterable[str] = ()) -> pl.DataFrame:
    """Residual findings in a text document such as a Markdown report; `row` is the 0-based line, column `text`."""
    return scan_frame(pl.DataFrame({"text": text.splitlines()}, schema={"text": pl.String}), table, names)
