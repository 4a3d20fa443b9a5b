"""Recall and precision against Microsoft Presidio's pattern recognizers on a generated corpus with planted entities.

Presidio runs with its predefined recognizers over a blank spaCy pipeline (no model download), so only its pattern
recognizers take part; the comparison covers the entity types both tools detect.
"""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.deid.detectors import ENTITY_TYPES
from eval_pipeline_harness.deid_compare import (
    SHARED_TYPES,
    blank_presidio_analyzer,
    corpus_names,
    our_spans,
    planted_corpus,
    presidio_spans,
    score,
)

pytest.importorskip("presidio_analyzer", reason="test extra: presidio-analyzer (with spaCy) compares recall")

N_DOCS = 200


@pytest.fixture(scope="module")
def measured():
    corpus = planted_corpus(N_DOCS, seed=11)
    ours = score(corpus.planted, our_spans(corpus.texts, corpus_names(corpus)), "ours", ENTITY_TYPES)
    theirs = score(corpus.planted, presidio_spans(blank_presidio_analyzer(), corpus.texts), "presidio", SHARED_TYPES)
    return corpus, ours, theirs


def test_recall_is_at_least_presidios_on_every_shared_type(measured):
    _, ours, theirs = measured
    both = ours.join(theirs, on="entity_type", suffix="_presidio").select(
        "entity_type", "planted", "recall", "recall_presidio", "precision", "precision_presidio"
    )
    with pl.Config(tbl_rows=20, float_precision=3):
        print(f"\n{N_DOCS} generated documents; ours on every type, Presidio on the shared ones")
        print(ours)
        print(both)
    assert both["entity_type"].to_list() == list(SHARED_TYPES)
    # Every shared type is planted often enough to measure (each document draws 3-6 of 11 sentence kinds).
    assert both["planted"].min() >= 30
    shortfalls = both.filter(pl.col("recall") < pl.col("recall_presidio"))
    assert shortfalls.height == 0, shortfalls


def test_every_planted_type_is_found_and_decoys_stay_quiet(measured):
    _, ours, _ = measured
    # The planted types cover all ten entity types; decoys (ids, dates, amounts, bad checksums) must not register.
    assert ours.filter(pl.col("planted") == 0).height == 0
    assert ours["recall"].min() >= 0.95
    assert ours["precision"].min() >= 0.95
