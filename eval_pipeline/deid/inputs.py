"""De-identification of ids and of the inputs beside the traces (docs/privacy.md), with the traces' pseudonyms.

The inputs are corpus ids and families, tools, qrels judgments, grounding labels, run manifests and reject rows.

Ids are pseudonymised, not refused: the same keyed token replaces a value wherever it stands (a doc id in the corpus,
in a trace's hits, in a case's required docs and in the qrels), so every join of the scorers still holds. Ids go
through a Deidentifier without person names (`id_deidentifier`): its tokens depend only on the key and the value,
so every asset (the de-identification step, ingestion, qrels) computes the same ones without the run's names.
Fields that name folders or partitions (run ids, corpus, dataset and environment versions) cannot change without
breaking the lookups, so a run whose manifest holds personal data there is refused (`manifest_refusals`), naming
the field and the kind of data, never the value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import polars as pl

from eval_pipeline.deid.columns import COUNT, VALUE, LeafPath, distinct_values, leaf_name, rewrite_each_leaf
from eval_pipeline.deid.detectors import TOKEN_PATTERN
from eval_pipeline.deid.residual import CandidateMemo
from eval_pipeline.deid.scan import scan_frame
from eval_pipeline.deid.tables import REPORT_SCHEMA, Deidentifier

# Identifier leaves of each frame (pseudonymised with id_deidentifier) beside the text leaves tables.py covers.
TRACE_ID_PATHS: tuple[LeafPath, ...] = (
    ("trace_id",), ("case_id",), ("source_file",),
    ("retrieval", "tool"), ("retrieval", "variant"), ("retrieval", "candidates", "doc_id"),
    ("retrieval", "hits", "doc_id"), ("context", "doc_id"), ("citations", "doc_id"),
    ("steps", "tool"), ("steps", "dispatched_tool"),
)  # fmt: skip
CASE_ID_PATHS: tuple[LeafPath, ...] = (
    ("case_id",), ("source_file",), ("counterfactual_of",), ("required_doc_ids",), ("allowed_tools",),
    ("forbidden_tools",), ("reference_tool_calls", "name"), ("alternatives", "name"), ("dependencies",),
    ("fault_tool",), ("unsafe_after_fault",), ("escalation_tools",), ("milestones", "name"), ("tags", "name"),
    ("clock",),
)  # fmt: skip
CORPUS_ID_PATHS: tuple[LeafPath, ...] = (("doc_id",), ("family",), ("version",), ("source",))
TOOL_PATHS: tuple[LeafPath, ...] = (("name",), ("description",), ("args_schema_json",), ("value_rules_json",))
JUDGMENT_PATHS: tuple[LeafPath, ...] = (("query_id",), ("doc_id",), ("annotator",), ("source_file",))
LABEL_PATHS: tuple[LeafPath, ...] = (("trace_id",), ("claim",), ("source_file",))
REJECT_PATHS: tuple[LeafPath, ...] = (("source_file",), ("reason",), ("trace_id",), ("case_id",))
# Manifest fields free to change (shown in reports and stamped on rows) and those that name folders or partitions.
MANIFEST_TEXT_FIELDS = ("candidate", "model", "prompt_version", "index_version", "created_at")
MANIFEST_KEY_FIELDS = ("run_id", "corpus_version", "environment_version", "dataset_version", "baseline_run_id")

# How a reason names the kind of personal data a field holds (a type not listed reads as its name).
KIND_WORDS = {
    "EMAIL": "an e-mail address", "PHONE": "a phone number", "CARD": "a payment card number", "IBAN": "an IBAN",
    "NATIONAL_ID": "a national id", "IP": "an IP address", "API_KEY": "an API key", "SECRET": "a secret or token",
    "URL": "a URL with credentials", "PERSON": "a person's name",
}  # fmt: skip


def kind_words(entity_type: str) -> str:
    """The words a reason uses for a detected type: `EMAIL` → `an e-mail address`."""
    return KIND_WORDS.get(entity_type, "a " + entity_type.lower().replace("_", " "))


def id_deidentifier(key: bytes, locale: str | None = None) -> Deidentifier:
    """The Deidentifier of ids and side inputs: the run's key and locale, no names (see the module docstring)."""
    return Deidentifier(key, (), locale=locale)


def _replacements(deid: Deidentifier, values: pl.Series, memo: CandidateMemo | None = None) -> pl.DataFrame:
    """(`old`, `new`) for each distinct value that de-identification changes."""
    frame = pl.DataFrame({"text": values.unique().drop_nulls()}, schema={"text": pl.String})
    # The corpus pass de-identifies one text column; any frame of distinct strings is such a column.
    out, _ = deid.corpus(frame, memo)
    return pl.DataFrame({"old": frame["text"], "new": out["text"]}).filter(pl.col("old") != pl.col("new"))


def _needs_key(values: pl.Series, table: str) -> bool:
    """Whether any of these values holds personal data (both scans): only then is a token, and so the key, needed."""
    return scan_frame(pl.DataFrame({"text": values.unique()}, schema={"text": pl.String}), table).height > 0


def deidentify_leaves(
    frame: pl.DataFrame,
    paths: Iterable[LeafPath],
    table: str,
    deid: Deidentifier | Callable[[], Deidentifier],
    memo: CandidateMemo | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The frame with the given string leaves de-identified (the same token for a value in any of them) and the
    replacement counts by field, each value weighted by its occurrences (REPORT_SCHEMA). `deid` may be a callable
    giving the Deidentifier: it is called only when some value holds personal data, so a clean input needs no key.
    `memo` keeps what the independent scan read (Deidentifier.traces)."""
    leaves = {path: distinct_values(frame, path) for path in paths if path[0] in frame.columns}
    values = pl.concat([leaf[VALUE] for leaf in leaves.values()]) if leaves else pl.Series(dtype=pl.String)
    unchanged = frame, pl.DataFrame(schema=REPORT_SCHEMA)
    if values.len() == 0 or (not isinstance(deid, Deidentifier) and not _needs_key(values, table)):
        return unchanged
    changed = _replacements(deid if isinstance(deid, Deidentifier) else deid(), values, memo)
    if changed.height == 0:
        return unchanged
    fns, counts = {}, []
    for path, leaf in leaves.items():
        hit = leaf.join(changed, left_on=VALUE, right_on="old", how="inner")
        if hit.height == 0:
            continue
        fns[path] = lambda e, old=changed["old"], new=changed["new"]: e.replace(old, new)
        # the types a changed value's tokens name, each counted once per occurrence of the value
        types = hit.select(pl.col("new").str.extract_all(TOKEN_PATTERN).alias("token"), COUNT).explode("token")
        counts.append(
            types.drop_nulls("token")
            .group_by(pl.col("token").str.extract(r"^<([A-Z_]+)_", 1).alias("entity_type"))
            .agg(pl.col(COUNT).sum().cast(pl.Int64).alias("replacements"))
            .select(pl.lit(table).alias("table"), pl.lit(leaf_name(path)).alias("field"), "entity_type", "replacements")
        )
    out = frame.with_columns(rewrite_each_leaf(frame.schema, fns)) if fns else frame
    report = pl.concat(counts).cast(REPORT_SCHEMA) if counts else pl.DataFrame(schema=REPORT_SCHEMA)  # type: ignore[arg-type]
    return out.select(frame.columns), report


def manifest_refusals(row: Mapping[str, Any], locale: str | None = None) -> list[str]:
    """Why a manifest cannot be used as it is: one `run.yaml <field>: contains <kind>` per key field holding
    personal data (these fields name folders and partitions, so no token may stand in for them)."""
    fields = [f for f in MANIFEST_KEY_FIELDS if isinstance(row.get(f), str)]
    if not fields:
        return []
    findings = scan_frame(
        pl.DataFrame({f: [row[f]] for f in fields}, schema={f: pl.String for f in fields}),
        "run_manifest",
        locale=locale,
    )
    kinds = findings.select("column", "entity_type").unique(maintain_order=True).iter_rows()
    return [f"run.yaml {column}: contains {kind_words(kind)}" for column, kind in kinds]


def deidentify_manifest(row: Mapping[str, Any], deid: Callable[[], Deidentifier]) -> dict[str, Any]:
    """The manifest row with its free-text fields (candidate, model, versions shown in reports) de-identified."""
    fields = [f for f in MANIFEST_TEXT_FIELDS if f in row]
    frame = pl.DataFrame(
        {f: [None if row[f] is None else str(row[f])] for f in fields}, schema={f: pl.String for f in fields}
    )
    out, _ = deidentify_leaves(frame, [(f,) for f in fields], "run_manifest", deid)
    changed = out.row(0, named=True)
    return {**row, **{f: changed[f] for f in fields if changed[f] != frame[f][0]}}
