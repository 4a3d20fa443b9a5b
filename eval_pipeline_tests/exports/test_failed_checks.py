"""`export` refuses a table partition whose blocking checks failed on its last materialization into the warehouse,
naming the checks (exit 2), as the Dagster instance recorded them; a partition whose checks passed is exported."""

import argparse

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.cli.exports import register
from eval_pipeline.defs import checks
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.recording import materialized
from eval_pipeline.defs.resources import DeltaWarehouseIOManager
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.judge.reuse import STORED_SCHEMA, VERDICT_STORE
from eval_pipeline.quality import tables

pytestmark = pytest.mark.slow

LEAK = "jane.doe@example.com"


def verdicts(run_id: str, reason: str) -> pl.DataFrame:
    """Two stored verdicts of a run, one with `reason`."""
    return pl.DataFrame(
        {
            "judge_version": ["local-2.0"] * 2,
            "hash_scheme": ["polars/1"] * 2,
            "digest_a": [1, 2],
            "digest_b": [3, 4],
            "verdict": ["SUPPORTED", "NOT_IN_EVIDENCE"],
            "score": [0.9, 0.1],
            "evidence_quote": ["a", None],
            "evidence_doc_id": ["d1", None],
            "status": ["ok", "ok"],
            "reason": [reason, "no overlap"],
            "input_tokens": [None, None],
            "output_tokens": [None, None],
            "cost_usd": [0.0, 0.0],
            "latency_ms": [None, None],
        },
        schema=STORED_SCHEMA,
    ).with_columns(run_id=pl.lit(run_id))


@dg.asset(
    name=VERDICT_STORE, partitions_def=runs_partitions, check_specs=checks.specs(VERDICT_STORE, tables.JUDGE_VERDICTS)
)
def judge_verdicts(context: dg.AssetExecutionContext):
    """The table's rows for the partition, checked as the claims step checks them: a planted e-mail in `leaky`."""
    frame = verdicts(
        context.partition_key, f"asked {LEAK}" if context.partition_key.startswith("leaky") else "overlap 0.9"
    )
    return materialized(frame, check_results=checks.results(VERDICT_STORE, tables.JUDGE_VERDICTS, frame))


@pytest.fixture()
def recorded(tmp_path, monkeypatch):
    """Runs `clean` and `leaky` materialized into a warehouse on the instance at DAGSTER_HOME; (warehouse, instance)."""
    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    warehouse = Warehouse.at(tmp_path / "wh")
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(runs_partitions.name, ["clean", "leaky"])
        for run_id in ("clean", "leaky"):
            dg.materialize(
                [judge_verdicts],
                instance=instance,
                partition_key=run_id,
                raise_on_error=False,
                resources={"io_manager": DeltaWarehouseIOManager(warehouse_root=str(warehouse.root))},
            )
    return warehouse


def export(warehouse: Warehouse, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["export", VERDICT_STORE, *argv, "--warehouse", str(warehouse.root)])
    return args.handler(args)


def test_a_partition_whose_privacy_check_failed_is_refused_naming_the_check(recorded, tmp_path, capsys):
    # the leaky rows are in the warehouse: the check ran after they were written, and blocked what comes after
    assert recorded.read(VERDICT_STORE, "leaky")["reason"].to_list() == [f"asked {LEAK}", "no overlap"]
    out = tmp_path / "leaky.csv"
    assert export(recorded, "--run", "leaky", "--format", "csv", "--output", str(out)) == 2
    err = capsys.readouterr().err
    assert (
        f"blocking checks failed, not exported: {VERDICT_STORE} of run leaky ({VERDICT_STORE}.no_personal_data)" in err
    )
    assert not out.exists() and LEAK not in err


def test_every_run_is_refused_while_one_failed_and_a_clean_run_is_exported(recorded, tmp_path, capsys):
    assert export(recorded, "--format", "jsonl", "--output", str(tmp_path / "all.jsonl")) == 2
    assert "of run leaky" in capsys.readouterr().err and not (tmp_path / "all.jsonl").exists()
    assert export(recorded, "--run", "clean", "--format", "jsonl", "--output", str(tmp_path / "clean.jsonl")) == 0
    assert len((tmp_path / "clean.jsonl").read_text().splitlines()) == 2


def test_the_leak_fixed_and_materialized_again_is_exported(recorded, tmp_path, monkeypatch):
    @dg.asset(
        name=VERDICT_STORE,
        partitions_def=runs_partitions,
        check_specs=checks.specs(VERDICT_STORE, tables.JUDGE_VERDICTS),
    )
    def fixed(context: dg.AssetExecutionContext):
        frame = verdicts(context.partition_key, "overlap 0.9")
        return materialized(frame, check_results=checks.results(VERDICT_STORE, tables.JUDGE_VERDICTS, frame))

    with dg.DagsterInstance.get() as instance:
        assert dg.materialize(
            [fixed],
            instance=instance,
            partition_key="leaky",
            resources={"io_manager": DeltaWarehouseIOManager(warehouse_root=str(recorded.root))},
        ).success
    assert export(recorded, "--run", "leaky", "--format", "csv", "--output", str(tmp_path / "leaky.csv")) == 0


def test_records_of_another_warehouse_do_not_count(recorded, tmp_path):
    # the same table and run name written elsewhere: this instance's failed check is about that other warehouse
    other = Warehouse.at(tmp_path / "other")
    other.write_partition(VERDICT_STORE, verdicts("leaky", "overlap 0.9"), "leaky")
    assert export(other, "--run", "leaky", "--format", "csv", "--output", str(tmp_path / "other.csv")) == 0
