"""The steps of a run: every domain's asset definitions, grouped into a few fatter Dagster steps (defs.fused).

Tables, groups, checks and lineage are the domains' own; only where one step ends and the next begins is decided
here. A step holds assets that always run together for one run, in graph order; the re-score sensors still select
single tables, and a step computes only the selected ones. `Chains` in a step's members are computed at the
same time (defs.fused.Concurrent): the claims, the retrieval scorers, the judging queue and the agent's chain, which
read nothing of each other's, then the RAG lane, which reads the first two.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

import dagster as dg

from eval_pipeline.defs.fused import Concurrent, fused_step, restricted_keys

__all__ = ["CONCURRENT_MAX_TRACES", "STEPS", "Chains", "step_assets"]


def _lane(lane: str) -> tuple[str, ...]:
    return (
        f"{lane}__{lane}_stage_results",
        f"{lane}_attribution",
        f"{lane}_reliability",
        f"{lane}_slices",
        f"{lane}__{lane}_report",
    )


# The chains of `score` run at the same time for runs of at most this many traces, one after the other for larger
# runs, where each chain then holds its working set alone. Measured: at 100k traces the peak stayed 2.8 GiB; at a
# million, two chains at once took it to 9.85 GiB, against 7.07 GiB one after the other (docs/benchmarks/pipeline.md).
CONCURRENT_MAX_TRACES = 250_000


@dataclass(frozen=True)
class Chains:
    """Chains of members (op names, each chain in graph order) computed at the same time (defs.fused.Concurrent)."""

    chains: tuple[tuple[str, ...], ...]
    rows_at_most: tuple[str, int] | None = None


# (step, what it computes, its members by op name in graph order)
STEPS = (
    (
        "ingest",
        "The run manifest, raw lines, cases, corpus, tools, validated traces, rejects and their de-identified copies.",
        ("run_manifest", "raw_traces", "run_inputs", "parsed_traces", "deidentified"),
    ),
    (
        "score",
        "Four chains at once: claims and their judge verdicts, citations, grounding, answers, the judge's "
        "calibration and the review queue; frozen qrels, retrieval and context; the judging queue; the agent's tool "
        "calls, verified outcomes and lane. Then the RAG lane: stage results, first-failure attribution, reliability, "
        "slices, report.",
        (
            Chains(
                (
                    ("judged_claims", "grounding_scores", "answer_scores", "judge_calibration", "review_queue"),
                    ("qrels", "retrieval_scores", "context_scores"),
                    ("judging_queue",),
                    ("scored_tool_calls", "outcome_scores", *_lane("agent")),
                ),
                rows_at_most=("deid_traces", CONCURRENT_MAX_TRACES),
            ),
            *_lane("rag"),
        ),
    ),
    (
        "gates",
        "Counterfactual pairs, gate results, the pairwise comparison, the gate report and the case pages.",
        ("counterfactual_pairs", "gate_results", "pairwise_comparison", "gate_report", "case_pages"),
    ),
)


def _names(members: Iterable[str | Chains]) -> Iterable[str]:
    for item in members:
        if isinstance(item, str):
            yield item
        else:
            for chain in item.chains:
                yield from chain


def step_assets(domains: Iterable[ModuleType]) -> list[dg.AssetsDefinition]:
    """The domains' assets as the fused steps of STEPS (each asset definition in exactly one step)."""
    by_name = {a.op.name: a for domain in domains for a in (domain.defs.assets or [])}
    grouped = [name for _, _, members in STEPS for name in _names(members)]
    if sorted(grouped) != sorted(by_name):
        raise dg.DagsterInvariantViolationError(
            f"steps and assets differ: {sorted(set(grouped) ^ set(by_name))} (each asset in exactly one step)"
        )
    restricted = restricted_keys(by_name.values())
    return [
        fused_step(
            step,
            [
                by_name[item]
                if isinstance(item, str)
                else Concurrent(*([by_name[n] for n in chain] for chain in item.chains), rows_at_most=item.rows_at_most)
                for item in members
            ],
            description=description,
            restricted=restricted,
        )
        for step, description, members in STEPS
    ]
