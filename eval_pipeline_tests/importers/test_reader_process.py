"""The second process a large source is read in: what it reads arrives in order, its errors end the import with
their message, and a reader left early is stopped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eval_pipeline.importers.common import ImporterError
from eval_pipeline.importers.otlp import converted
from eval_pipeline.importers.reader_process import BATCH, read_in_child
from eval_pipeline_tests.importers.fixtures.otlp_json import recording, write_otlp_jsonl


def test_what_the_child_reads_arrives_in_order_across_batches(tmp_path: Path) -> None:
    with recording() as (provider, exporter):
        tracer = provider.get_tracer("test")
        for n in range(BATCH + 3):
            with tracer.start_as_current_span(f"root-{n}"):
                pass
        spans = list(exporter.get_finished_spans())
    path = write_otlp_jsonl(tmp_path / "spans.jsonl", [spans])
    here = [(u.record, u.reason) for u in converted([path], "case_id")]
    there = [(u.record, u.reason) for u in read_in_child(converted, [path], "case_id")]
    assert (
        there == here and len(there) == BATCH + 3
    )  # plain spans speak no dialect: each trace is a reject with its reason
    assert there[0][1].endswith("none in OpenInference (openinference.span.kind) or GenAI (gen_ai.*) form")


def test_an_error_in_the_child_ends_the_import_with_its_message_and_leaving_early_stops_it(tmp_path: Path) -> None:
    with pytest.raises(ImporterError, match=r"reading the source failed: FileNotFoundError: .*no-such\.jsonl"):
        list(read_in_child(converted, [tmp_path / "no-such.jsonl"], "case_id"))
    with recording() as (provider, exporter):
        for n in range(3 * BATCH):
            with provider.get_tracer("test").start_as_current_span(f"root-{n}"):
                pass
        path = write_otlp_jsonl(tmp_path / "many.jsonl", [list(exporter.get_finished_spans())])
    items = read_in_child(converted, [path], "case_id")
    assert next(items).record == 1
    assert _readers() != []
    items.close()  # the import stopped: the child is killed and reaped, nothing is left running
    assert _readers() == []


def _readers() -> list[int]:
    """This process's children that serve a reader (Linux /proc)."""
    me = os.getpid()
    children = Path(f"/proc/{me}/task/{me}/children").read_text().split()
    return [
        int(pid)
        for pid in children
        if Path(f"/proc/{pid}/cmdline").exists()
        and b"reader_process import serve" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
