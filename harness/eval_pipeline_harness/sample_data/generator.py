"""The committed sample data: build every docs/inputs.md file in memory, deterministically; write it under a root."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline_harness.sample_data.cases import (
    ALL_CASES,
    CASES_BY_ID,
    DATASET_VERSION,
    Part,
)
from eval_pipeline_harness.sample_data.corpus import CORPUS_VERSION, DOCS
from eval_pipeline_harness.sample_data.expectations import (
    AGENT_STAGES,
    FAILURE_CLASSES,
    FAULT_OUTCOMES,
    RAG_STAGES,
    claims_of,
    cohen_kappa,
    counterfactual_pairs,
    coverage,
    gates,
    qrels_expectations,
    reliability,
    trace_rows,
)
from eval_pipeline_harness.sample_data.labels import (
    ANSWER_LABELS,
    CLAIM_DISAGREEMENTS,
    LABELLED_FAILING,
    LABELLED_HEALTHY,
    VERDICT,
    gate_policy,
    qrels_lines,
)
from eval_pipeline_harness.sample_data.plans import BASELINE_RUN, CANDIDATE_RUN, run_plans
from eval_pipeline_harness.sample_data.readme import readme
from eval_pipeline_harness.sample_data.slices import expectations as slice_expectations
from eval_pipeline_harness.sample_data.tools import ENVIRONMENT_VERSION, registry
from eval_pipeline_harness.sample_data.traces import (
    DENSE_BASELINE,
    DENSE_CANDIDATE,
    SEED,
    Attempt,
    RagPlan,
    build_trace,
)

RESUBMITTED = "resubmitted.jsonl"
# Candidate traces of these cases arrive in the resubmitted batch, between the bad lines.
RESUBMITTED_CASES = ("rag-046", "rag-047", "rag-048")


# ---------------------------------------------------------------- serialization


def jsonl(records: list[dict[str, Any]]) -> bytes:
    """One JSON object per line, UTF-8, trailing newline."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def yaml_bytes(value: Any) -> bytes:
    """Block-style YAML with keys in the order given."""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120).encode(
        "utf-8"
    )


def json_bytes(value: Any) -> bytes:
    """Indented JSON with a trailing newline."""
    return (json.dumps(value, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


# ---------------------------------------------------------------- runs


def manifest(run_id: str) -> dict[str, Any]:
    """run.yaml of a sample run."""
    baseline = run_id == BASELINE_RUN
    return {
        "run_id": run_id,
        "candidate": {"system": "support-assistant", "version": "2.3.1" if baseline else "2.4.0-rc1"},
        "model": "gpt-4.1-mini-2025-04-14",
        "prompt_version": "support-p17" if baseline else "support-p18",
        "index_version": "idx-2026-02-24" if baseline else "idx-2026-03-01",
        "corpus_version": CORPUS_VERSION,
        "environment_version": ENVIRONMENT_VERSION,
        "dataset_version": DATASET_VERSION,
        "mode": "gate",
        "created_at": "2026-03-01T02:10:00Z" if baseline else "2026-03-02T02:10:00Z",
    }


@dataclass
class BuiltRun:
    """The traces of one run, with the answer parts each RAG trace was written from."""

    run_id: str
    plans: dict[str, list[Attempt]]
    traces: dict[str, dict[str, Any]]
    parts: dict[str, tuple[Part, ...]]


def build_run(run_id: str) -> BuiltRun:
    """Build every planned trace of a run."""
    plans = run_plans(run_id)
    dense = DENSE_BASELINE if run_id == BASELINE_RUN else DENSE_CANDIDATE
    traces, parts = {}, {}
    for case_id, attempts in plans.items():
        case = CASES_BY_ID[case_id]
        for attempt in attempts:
            trace = build_trace(run_id, case, attempt, dense)
            traces[trace["trace_id"]] = trace
            if "rag" in case.lanes:
                parts[trace["trace_id"]] = (attempt.rag or RagPlan()).answer or case.answer
    return BuiltRun(run_id, plans, traces, parts)


def _is_rag_only(trace: dict[str, Any]) -> bool:
    return CASES_BY_ID[trace["case_id"]].lanes == ["rag"]


# ---------------------------------------------------------------- bad lines


def bad_lines(good: dict[str, dict[str, Any]]) -> tuple[list[bytes], list[dict[str, Any]]]:
    """The candidate's resubmitted batch: valid traces between deliberately bad lines, and the rejects they must give.

    Line numbers are 1-based and count blank lines (the readings of docs/metrics.md "Trace files").
    """
    valid = [good[f"{CANDIDATE_RUN}:{case_id}#1"] for case_id in RESUBMITTED_CASES]
    donor = copy.deepcopy(valid[0])
    donor.update(trace_id=f"{CANDIDATE_RUN}:rag-015#2", case_id="rag-015", attempt=2, case_revision=1)
    donor_line = json.dumps(donor, ensure_ascii=False)

    wrong_type = {
        **copy.deepcopy(donor),
        "trace_id": f"{CANDIDATE_RUN}:rag-016#2",
        "case_id": "rag-016",
        "attempt": "2",
    }
    unknown = {**copy.deepcopy(donor), "trace_id": f"{CANDIDATE_RUN}:rag-999#1", "case_id": "rag-999", "attempt": 1}
    duplicate = copy.deepcopy(valid[0])
    duplicate["answer"] = {"text": "Deletion requests take about a month.", "citations": []}
    broken_utf8 = json.dumps(
        {
            **copy.deepcopy(donor),
            "trace_id": f"{CANDIDATE_RUN}:rag-017#2",
            "case_id": "rag-017",
            "input": "How long are deleted files kept? MARK",
        },
        ensure_ascii=False,
    ).encode("utf-8")
    broken_utf8 = broken_utf8.replace(b"MARK", b"caf\xe9 \xff\xfe")

    lines: list[tuple[bytes, dict[str, Any] | None]] = [
        (json.dumps(valid[0], ensure_ascii=False).encode(), None),
        (b"", None),  # a blank line: skipped and counted, never a reject
        (
            donor_line[:150].encode(),
            {
                "kind": "invalid_json",
                "reason_contains": "invalid JSON",
                "trace_id": None,
                "what": "the line was cut off mid-object",
            },
        ),
        (json.dumps(valid[1], ensure_ascii=False).encode(), None),
        (
            json.dumps([f"{CANDIDATE_RUN}:rag-003#2", "ok"]).encode(),
            {
                "kind": "not_object",
                "reason_contains": "not a JSON object",
                "trace_id": None,
                "what": "a JSON array, not an object",
            },
        ),
        (
            json.dumps(wrong_type, ensure_ascii=False).encode(),
            {
                "kind": "wrong_type",
                "reason_contains": "attempt",
                "trace_id": wrong_type["trace_id"],
                "what": 'attempt is the string "2", the contract says integer',
            },
        ),
        (
            json.dumps(unknown, ensure_ascii=False).encode(),
            {
                "kind": "unknown_case_id",
                "reason_contains": "rag-999",
                "trace_id": unknown["trace_id"],
                "what": "case rag-999 is in no case file",
            },
        ),
        (
            json.dumps(duplicate, ensure_ascii=False).encode(),
            {
                "kind": "duplicate_trace_id",
                "reason_contains": "duplicate",
                "trace_id": duplicate["trace_id"],
                "what": "same trace_id as line 1, which is kept",
            },
        ),
        (
            broken_utf8,
            {
                "kind": "invalid_utf8",
                "reason_contains": "UTF-8",
                "trace_id": None,
                "what": "bytes 0xE9 0xFF 0xFE inside the input string are not UTF-8",
            },
        ),
        (json.dumps(valid[2], ensure_ascii=False).encode(), None),
    ]
    rejects = [
        {"run_id": CANDIDATE_RUN, "file": f"traces/{CANDIDATE_RUN}/{RESUBMITTED}", "line": number, **reject}
        for number, (_, reject) in enumerate(lines, start=1)
        if reject is not None
    ]
    return [raw for raw, _ in lines], rejects


# ---------------------------------------------------------------- grounding labels


def grounding_label_lines(base: BuiltRun) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Human claim verdicts on baseline traces, answer-level labels, and their agreement with the planted truths."""
    lines, pairs, disagreements = [], [], []
    for i, case_id in enumerate(sorted(LABELLED_HEALTHY + LABELLED_FAILING)):
        trace_id = f"{BASELINE_RUN}:{case_id}#1"
        context_ids = {c["doc_id"] for c in base.traces[trace_id]["context"]}
        annotator = ("a1", "a2", "a3")[i % 3]
        for item in claims_of(base.parts[trace_id], context_ids):
            human = next(
                (
                    v
                    for (c, prefix), v in CLAIM_DISAGREEMENTS.items()
                    if c == case_id and item["claim"].startswith(prefix)
                ),
                item["verdict"],
            )
            lines.append({"trace_id": trace_id, "claim": item["claim"], "verdict": human, "annotator": annotator})
            pairs.append((human, item["verdict"]))
            if human != item["verdict"]:
                disagreements.append(
                    {"trace_id": trace_id, "claim": item["claim"], "human": human, "planted_truth": item["verdict"]}
                )
    answer_pairs = []
    for case_id, grounded in sorted(ANSWER_LABELS.items()):
        trace_id = f"{BASELINE_RUN}:{case_id}#1"
        context_ids = {c["doc_id"] for c in base.traces[trace_id]["context"]}
        truth = all(c["verdict"] == "SUPPORTED" for c in claims_of(base.parts[trace_id], context_ids))
        lines.append({"trace_id": trace_id, "answer_grounded": grounded, "annotator": "a2"})
        answer_pairs.append((str(grounded), str(truth)))
        if grounded != truth:
            disagreements.append({"trace_id": trace_id, "answer_grounded": grounded, "planted_truth": truth})
    verdicts = [h for h, _ in pairs]
    summary = {
        "file": "labels/grounding/baseline-claims.jsonl",
        "n_claim_labels": len(pairs),
        "n_answer_labels": len(answer_pairs),
        "claim_verdict_counts": {v: verdicts.count(v) for v in VERDICT.values()},
        "claim_agreement_with_truth": round(sum(a == b for a, b in pairs) / len(pairs), 6),
        "claim_kappa_with_truth": round(cohen_kappa(pairs), 6),
        "answer_agreement_with_truth": round(sum(a == b for a, b in answer_pairs) / len(answer_pairs), 6),
        "disagreements": disagreements,
        "note": "a judge that returns the planted truth for every claim gets these agreement and kappa figures",
    }
    return lines, summary


# ---------------------------------------------------------------- the whole sample


@dataclass
class Sample:
    """Every file of the sample (path relative to the data root → bytes) and the planted expectations."""

    files: dict[str, bytes]
    planted: dict[str, Any]


def build_sample() -> Sample:
    """The committed sample data, built in memory."""
    base, cand = build_run(BASELINE_RUN), build_run(CANDIDATE_RUN)
    files: dict[str, bytes] = {
        f"corpus/{CORPUS_VERSION}/docs.jsonl": jsonl([d.record() for d in DOCS]),
        f"tools/{ENVIRONMENT_VERSION}/tools.yaml": yaml_bytes(registry()),
        "policy/gates.yaml": yaml_bytes(gate_policy()),
        "labels/qrels/human-2026-03.jsonl": jsonl(qrels_lines()),
    }
    for case in ALL_CASES:
        files[f"cases/{DATASET_VERSION}/{case.case_id}.yaml"] = yaml_bytes(case.record())
    for run in (base, cand):
        files[f"traces/{run.run_id}/run.yaml"] = yaml_bytes(manifest(run.run_id))
        held = {f"{CANDIDATE_RUN}:{c}#1" for c in RESUBMITTED_CASES} if run is cand else set()
        ordered = [t for tid, t in run.traces.items() if tid not in held]
        files[f"traces/{run.run_id}/rag.jsonl"] = jsonl([t for t in ordered if _is_rag_only(t)])
        files[f"traces/{run.run_id}/agent.jsonl"] = jsonl([t for t in ordered if not _is_rag_only(t)])
    raw_lines, rejects = bad_lines(cand.traces)
    files[f"traces/{CANDIDATE_RUN}/{RESUBMITTED}"] = b"".join(line + b"\n" for line in raw_lines)
    label_lines, label_summary = grounding_label_lines(base)
    files["labels/grounding/baseline-claims.jsonl"] = jsonl(label_lines)

    base_rows = trace_rows(BASELINE_RUN, base.plans, base.traces, base.parts)
    cand_rows = trace_rows(CANDIDATE_RUN, cand.plans, cand.traces, cand.parts)
    base_rel, cand_rel = reliability(base_rows), reliability(cand_rows)
    planted = {
        "about": (
            "Expected pipeline outcomes for the committed sample data, "
            "derived by hand from the readings of docs/metrics.md "
            "(see harness/eval_pipeline_harness/sample_data/plans.py for the reasoning next to each planted trace)."
        ),
        "generator": "python -m eval_pipeline_harness.sample_data --out data",
        "seed": SEED,
        "versions": {
            "dataset_version": DATASET_VERSION,
            "corpus_version": CORPUS_VERSION,
            "environment_version": ENVIRONMENT_VERSION,
        },
        "runs": {"baseline": BASELINE_RUN, "candidate": CANDIDATE_RUN},
        "stage_order": {"rag": list(RAG_STAGES), "agent": list(AGENT_STAGES)},
        "counts": _counts(base_rows + cand_rows, rejects),
        "traces": base_rows + cand_rows,
        "rejects": rejects,
        "blank_lines": {CANDIDATE_RUN: {f"traces/{CANDIDATE_RUN}/{RESUBMITTED}": 1}},
        "reliability": {BASELINE_RUN: base_rel, CANDIDATE_RUN: cand_rel},
        "quarantine": {
            run: {
                c: {"passing_trace_ids": r["passing_trace_ids"], "failing_trace_ids": r["failing_trace_ids"]}
                for c, r in rel.items()
                if r["flaky"]
            }
            for run, rel in ((BASELINE_RUN, base_rel), (CANDIDATE_RUN, cand_rel))
        },
        "gates": gates(base_rows, cand_rows, base_rel, cand_rel),
        "slices": slice_expectations(base_rows, cand_rows, base_rel, cand_rel),
        "counterfactual_pairs": {
            BASELINE_RUN: counterfactual_pairs(BASELINE_RUN, base_rows, base.plans),
            CANDIDATE_RUN: counterfactual_pairs(CANDIDATE_RUN, cand_rows, cand.plans),
        },
        "qrels": qrels_expectations(list(base.traces.values()) + list(cand.traces.values())),
        "grounding_labels": label_summary,
        "coverage": {BASELINE_RUN: coverage(base_rows), CANDIDATE_RUN: coverage(cand_rows)},
        "assumptions": ASSUMPTIONS,
    }
    files["planted.json"] = json_bytes(planted)
    files["README.md"] = readme(planted).encode("utf-8")
    return Sample(files, planted)


ASSUMPTIONS = [
    "Claims are the answer's sentences with [doc:…] markers (and the space before them) "
    "removed and whitespace collapsed; "
    "pleasantries ('Thanks for reaching out.', 'Hope this helps!', ...) and refusal sentences are not claims.",
    "A refusal answer has no claims, so its grounding passes (rate 1.0) and, citing nothing, "
    "its citation stage is not_applicable.",
    "The judging queue is not pre-graded by a model: pooled docs without a human judgment or seed count as grade 0.",
    "Gate per-case values are means over complete attempts; cases flaky in either run are out of every gate, "
    "policy_violations included; pass_at_1 and args_valid_rate gates use agent-lane cases.",
    "For a case with both lanes, `success` (reliability, pass_at_1) follows the agent lane; "
    "both-lane cases here never differ between lanes.",
    "Grounding-gate figures assume a judge whose verdicts equal the planted claim verdicts.",
]


def _counts(rows: list[dict[str, Any]], rejects: list[dict[str, Any]]) -> dict[str, Any]:
    cases = list(CASES_BY_ID.values())
    return {
        "cases": len(cases),
        "rag_lane_cases": sum("rag" in c.lanes for c in cases),
        "agent_lane_cases": sum("agent" in c.lanes for c in cases),
        "both_lane_cases": sum(len(c.lanes) == 2 for c in cases),
        "corpus_docs": len(DOCS),
        "traces": {
            run: len({r["trace_id"] for r in rows if r["run_id"] == run}) for run in (BASELINE_RUN, CANDIDATE_RUN)
        },
        "trace_lane_rows": {run: sum(r["run_id"] == run for r in rows) for run in (BASELINE_RUN, CANDIDATE_RUN)},
        "rejected_lines": len(rejects),
        "failure_classes": list(FAILURE_CLASSES),
        "fault_outcomes": list(FAULT_OUTCOMES),
    }


def write_sample(root: str | Path) -> list[Path]:
    """Write the sample under `root`; returns the paths written."""
    sample = build_sample()
    written = []
    for rel, data in sorted(sample.files.items()):
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


def planted() -> dict[str, Any]:
    """planted.json as a Python structure."""
    return build_sample().planted
