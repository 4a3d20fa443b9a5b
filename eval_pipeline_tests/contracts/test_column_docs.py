"""Every column of every table the sample materializes has a description, and the UI's column schema carries it."""

from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from eval_pipeline.contracts.column_docs import describe
from eval_pipeline.io.warehouse import RESTRICTED_AREA


def _tables(root: Path) -> dict[str, Path]:
    """table name → folder, for every Delta table under the warehouse root, the restricted area included."""
    folders = [*root.glob("*/_delta_log"), *root.glob(f"{RESTRICTED_AREA}/*/_delta_log")]
    return {
        log.parent.name if log.parent.parent == root else f"{RESTRICTED_AREA}/{log.parent.name}": log.parent
        for log in folders
    }


def test_every_column_of_every_table_has_a_description(scored):
    tables = _tables(Path(scored["warehouse"].root))
    assert {
        "retrieval_scores",
        "judge_verdicts",
        "stage_results",
        f"{RESTRICTED_AREA}/traces",
        f"{RESTRICTED_AREA}/raw_traces",
    } <= set(tables)
    missing = [
        f"{name}.{field.name}"
        for name, folder in sorted(tables.items())
        for field in DeltaTable(str(folder)).schema().fields
        if not (describe(folder.name, field.name) or "").strip()
    ]
    assert missing == []


def test_a_name_that_means_two_things_is_described_per_table():
    assert describe("retrieval_scores", "context_precision") != describe("context_scores", "context_precision")
    assert "Harness" in describe("traces", "status") and "Gate status" in describe("gate_results", "status")
    assert describe("retrieval_scores", "recall_at_10").startswith("Relevant docs in the top 10")
    assert describe("reliability", "pass_hat_4").startswith("pass^4")
    assert describe("retrieval_scores", "no_such_column") is None


def _column_schema(instance: dg.DagsterInstance, key: str, partition: str) -> dg.TableSchema:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey.from_user_string(key), asset_partitions=[partition]), limit=1
    ).records
    assert records, f"{key} was not materialized for {partition}"
    return records[0].asset_materialization.metadata["dagster/column_schema"].schema


def test_materializations_carry_the_column_descriptions(scored):
    schema = _column_schema(scored["instance"], "retrieval_scores", "cand-42")
    by_name = {column.name: column.description for column in schema.columns}
    assert by_name["recall_at_10"] == describe("retrieval_scores", "recall_at_10")
    assert by_name["context_precision"] == describe("retrieval_scores", "context_precision")
    assert all(by_name.values())
    # a lane asset (rag/rag_stage_results) is described as its table, stage_results
    stages = {
        c.name: c.description for c in _column_schema(scored["instance"], "rag/rag_stage_results", "cand-42").columns
    }
    assert stages["status"] == describe("stage_results", "status")


def test_docs_tables_md_is_generated_from_the_column_descriptions_of_the_sample_warehouse(scored):
    from eval_pipeline.contracts.table_docs import TABLE_MEANINGS, tables_markdown, warehouse_schemas

    schemas = warehouse_schemas(Path(scored["warehouse"].root))
    assert set(schemas) == set(TABLE_MEANINGS), "a table without a meaning in TABLE_MEANINGS, or a meaning of no table"
    page = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
    expected = tables_markdown(schemas)
    assert page.read_text(encoding="utf-8") == expected, (
        "docs/tables.md is stale: eval-pipeline run --data data --deid-demo && "
        "python -m eval_pipeline.contracts.table_docs data/warehouse > docs/tables.md"
    )
    assert "| `recall_at_10` | `Float64` | Relevant docs in the top 10" in expected
