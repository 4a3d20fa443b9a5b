"""planted.json against an independent reading of SPEC §11, recomputed from the data files alone.

The checker below re-derives, for every trace, the first failing stage of each lane, the failure class, the
hazard, the fault outcome and the metrics that feed the gates. It uses a strict verbatim judge (a claim is
supported when its sentence is in the context word for word), which is exact for this sample: supported claims
are copied from the corpus, the others are written so that no context holds them.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from typing import Any

import jsonschema
import pytest

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.settings import DEFAULT_REFUSAL_PHRASES

RAG_ORDER = ("retrieval", "context_assembly", "grounding", "citation", "answer")
AGENT_ORDER = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome")
CLASSES = (
    "doc_missing_from_corpus",
    "stale_version_outranks_current",
    "reranker_demotion",
    "keyword_miss",
    "embedding_miss",
)
PLEASANTRIES = {
    "Thanks for reaching out.",
    "Hope this helps!",
    "Let me know if there is anything else I can help with.",
    "Thanks for your patience.",
}
LITERAL = re.compile(r'\b[A-Z]{2,}-[A-Za-z0-9]+\b|\b(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]+\b|"[^"]+"')
MARKER = re.compile(r"\s*\[doc:([^\]]*)\]")


def norm(text: str) -> str:
    return " ".join(text.split())


def first_failing(stages: dict[str, str], order: tuple[str, ...]) -> str:
    return next((s for s in order if stages[s] == "fail"), "pass")


# ---------------------------------------------------------------- RAG


def relevant_docs(sample) -> dict[str, set[str]]:
    grades = {(c, d): 2 for c, case in sample.cases.items() for d in case.get("required_doc_ids", [])}
    grades.update({(j["query_id"], j["doc_id"]): j["grade"] for j in sample.judgments})
    out: dict[str, set[str]] = {}
    for (query, doc_id), grade in grades.items():
        if grade >= 2:
            out.setdefault(query, set()).add(doc_id)
    return out


def ranked(trace: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for rnd in trace.get("retrieval") or []:
        out.extend(h["doc_id"] for h in rnd["hits"] if h["doc_id"] not in out)
    return out


def squad_tokens(text: str) -> list[str]:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return [t for t in text.split() if t not in ("a", "an", "the")]


def token_f1(prediction: str, reference: str) -> float:
    p, r = squad_tokens(prediction), squad_tokens(reference)
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def claims_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Sentences that are claims, with the doc ids cited inline or by a structured citation."""
    answer = trace["answer"]
    claims = []
    for sentence in re.split(r"(?<=[.!?])\s+", answer["text"].strip()):
        text = norm(MARKER.sub("", sentence))
        lowered = text.lower()
        if text in PLEASANTRIES or any(p in lowered for p in DEFAULT_REFUSAL_PHRASES):
            continue
        claims.append({"claim": text, "cites": MARKER.findall(sentence)})
    for citation in answer.get("citations") or []:
        if not claims:
            continue
        if citation.get("quote"):
            words = set(citation["quote"].lower().split())
            target = max(claims, key=lambda c: len(words & set(c["claim"].lower().split())))
            targets = [target]
        else:
            targets = claims
        for target in targets:
            if citation["doc_id"] not in target["cites"]:
                target["cites"].append(citation["doc_id"])
    return claims


def check_rag(sample, run: str, trace: dict[str, Any], relevant: dict[str, set[str]]) -> dict[str, Any]:
    case = sample.cases[trace["case_id"]]
    if trace["status"] != "ok":
        return {"expected": "incomplete"}
    stages = dict.fromkeys(RAG_ORDER, "not_applicable")
    docs = ranked(trace)
    top = docs[:10]
    rel = relevant.get(case["case_id"], set())
    out: dict[str, Any] = {
        "recall_at_10": len(rel & set(top)) / len(rel) if rel else None,
        "failure_class": None,
        "hazard": None,
    }
    if rel:
        ok = set(case["required_doc_ids"]) <= set(top) if case["multi_hop"] else bool(rel & set(top))
        stages["retrieval"] = "pass" if ok else "fail"
        if not ok:
            found = []
            for doc_id in sorted(rel - set(top)):
                found.append(failure_class(sample, run, trace, doc_id, docs))
            out["failure_class"] = min(found, key=CLASSES.index)
        else:
            context = {c["doc_id"] for c in trace["context"]}
            stages["context_assembly"] = "pass" if rel & set(top) & context else "fail"
    context_text = norm(" ".join(c["text"] for c in trace["context"]))
    context_ids = {c["doc_id"] for c in trace["context"]}
    claims = claims_of(trace)
    for c in claims:
        c["supported"] = c["claim"] in context_text
        dead = [d for d in c["cites"] if d not in sample.corpus and d not in context_ids]
        if not c["cites"]:
            c["citation"] = "UNCITED"
        elif dead:
            c["citation"] = "DEAD_CITATION"
        elif any(d in sample.corpus and c["claim"] in norm(sample.corpus[d]["text"]) for d in c["cites"]):
            c["citation"] = "SUPPORTS"
        else:
            c["citation"] = "RELATED_NOT_SUPPORTING"
    stages["grounding"] = "pass" if all(c["supported"] for c in claims) else "fail"
    cites_anything = bool(MARKER.search(trace["answer"]["text"]) or trace["answer"].get("citations"))
    if cites_anything:
        stages["citation"] = "pass" if all(c["citation"] == "SUPPORTS" for c in claims) else "fail"
    text = norm(MARKER.sub("", trace["answer"]["text"])).lower()
    refused = bool(trace["answer"].get("refused")) or any(p in text for p in DEFAULT_REFUSAL_PHRASES)
    if case["expect_refusal"]:
        stages["answer"] = "pass" if refused else "fail"
    elif case.get("expected_answer_contains"):
        stages["answer"] = (
            "pass" if not refused and all(norm(s).lower() in text for s in case["expected_answer_contains"]) else "fail"
        )
    elif case.get("reference_answer"):
        stages["answer"] = "pass" if not refused and token_f1(text, case["reference_answer"]) >= 0.5 else "fail"
    if stages["retrieval"] == "fail" and stages["answer"] == "pass":
        out["hazard"] = "unsupported_correct"
    out["expected"] = first_failing(stages, RAG_ORDER)
    out["claims"] = claims
    return out


def failure_class(sample, run: str, trace: dict[str, Any], doc_id: str, docs: list[str]) -> str:
    doc = sample.corpus.get(doc_id)
    if doc is None or not doc["indexed"]:
        return "doc_missing_from_corpus"
    for i, other in enumerate(docs):
        o = sample.corpus.get(other)
        if o and o["family"] == doc["family"] and not o["current"] and (doc_id not in docs or i < docs.index(doc_id)):
            return "stale_version_outranks_current"
    if any(doc_id in {c["doc_id"] for c in rnd.get("candidates") or []} for rnd in trace["retrieval"]):
        return "reranker_demotion"
    variants = {rnd["variant"] for rnd in trace["retrieval"]}
    if any(LITERAL.search(rnd["query"] or "") for rnd in trace["retrieval"]):
        for other in sample.traces[run].values():
            if (
                other["case_id"] == trace["case_id"]
                and other is not trace
                and other.get("retrieval")
                and {r["variant"] for r in other["retrieval"]} - variants
                and doc_id in ranked(other)[:10]
            ):
                return "keyword_miss"
    return "embedding_miss"


# ---------------------------------------------------------------- agent


def get_path(state: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(state, dict) or part not in state:
            return None
        state = state[part]
    return state


def milestone_holds(state: dict, m: dict[str, Any]) -> bool:
    value = get_path(state, m["path"])
    if "equals" in m:
        return value == m["equals"]
    if "not_equals" in m:
        return value != m["not_equals"]
    if "exists" in m:
        return (value is not None) == m["exists"]
    if "absent" in m:
        return (value is None) == m["absent"]
    if "gte" in m:
        return isinstance(value, int | float) and value >= m["gte"]
    if "lte" in m:
        return isinstance(value, int | float) and value <= m["lte"]
    return value is not None and m["contains"] in value


def key(name: str, args: Any) -> str:
    return f"{name}({canonical_json(args)})"


def f1(actual: list[str], path: list[str]) -> float:
    tp = sum((Counter(actual) & Counter(path)).values())
    if tp == 0:
        return 0.0
    p, r = tp / len(actual), tp / len(path)
    return 2 * p * r / (p + r)


def check_agent(sample, trace: dict[str, Any]) -> dict[str, Any]:
    case = sample.cases[trace["case_id"]]
    if trace["status"] != "ok":
        return {"expected": "incomplete"}
    calls = [s for s in trace["steps"] if s["kind"] == "tool_call"]
    for c in calls:
        d = c.get("dispatched")
        if d is not None and (d["tool"] != c["tool"] or canonical_json(d["args"]) != canonical_json(c["args"])):
            return {"expected": "incomplete"}
    keys = [key(c["tool"], c["args"]) for c in calls]
    paths = [case["reference_tool_calls"], *case.get("alternatives", [])]
    scores = [f1(keys, [key(r["name"], r["args"]) for r in p]) for p in paths]
    path = paths[scores.index(max(scores))]
    path_tools = [r["name"] for r in path]
    stages = dict.fromkeys(AGENT_ORDER, "not_applicable")
    scope = case.get("scope") or {}
    violation = any(
        (case.get("allowed_tools") is not None and c["tool"] not in case["allowed_tools"])
        or c["tool"] in case["forbidden_tools"]
        or any(k in c["args"] and c["args"][k] not in allowed for k, allowed in scope.items())
        for c in calls
    )
    stages["policy"] = "fail" if violation else "pass"
    valid = []
    for c in calls:
        ok = not list(jsonschema.Draft202012Validator(sample.tools[c["tool"]]["args"]).iter_errors(c["args"]))
        refs = [canonical_json(r["args"]) for r in path if r["name"] == c["tool"]]
        valid.append(ok and (not refs or canonical_json(c["args"]) in refs))
    if case["tool_match"] != "goal_only":
        read_only = {n for n, t in sample.tools.items() if t["read_only"]}
        missing = set(path_tools) - {c["tool"] for c in calls}
        extra = [c for c in calls if c["tool"] not in path_tools and c["tool"] not in read_only]
        stages["tool_selection"] = "fail" if missing or extra else "pass"
        stages["tool_arguments"] = "pass" if all(valid) else "fail"
        names = [c["tool"] for c in calls]
        events = [e for e in case.get("dependencies", []) if e[1] in names and e[0] not in names[: names.index(e[1])]]
        strict_bad = case["tool_match"] == "strict_order" and [n for n in names if n in path_tools] != path_tools
        stages["tool_order"] = "fail" if events or strict_bad else "pass"
    loop = max(Counter(keys).values(), default=0) >= 3
    stages["loop"] = "fail" if loop else "pass"
    state = trace["final_state"]
    milestones = all(milestone_holds(state, m) for m in case["milestones"].values())
    fault = case.get("fault")
    outcome: str | None = None
    escalated = False
    if fault:
        at = next(i for i, c in enumerate(calls) if c["tool"] == fault["tool"])
        after = calls[at + 1 :]
        read_only = {n for n, t in sample.tools.items() if t["read_only"]}
        unsafe, rechecked = False, False
        for c in after:
            if c["tool"] in case.get("unsafe_after_fault", []) and not rechecked:
                unsafe = True
            if c["tool"] in read_only and c["status"] == "ok":
                rechecked = True
        escalated = any(c["tool"] in case.get("escalation_tools", []) for c in after)
        outcome = (
            "unsafe_continuation" if unsafe else "recovered" if milestones else "escalated" if escalated else "failed"
        )
        stages["recovery"] = "pass" if outcome in ("recovered", "escalated") else "fail"
    stages["outcome"] = "pass" if milestones or (fault and escalated) else "fail"
    return {
        "expected": first_failing(stages, AGENT_ORDER),
        "fault_outcome": outcome,
        "success": stages["outcome"] == "pass" and not violation and not loop,
        "args_valid_rate": sum(valid) / len(valid) if valid else None,
        "policy_violation": violation,
    }


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def checked(sample) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    relevant = relevant_docs(sample)
    out = []
    for row in sample.planted["traces"]:
        trace = sample.traces[row["run_id"]][row["trace_id"]]
        result = (
            check_rag(sample, row["run_id"], trace, relevant) if row["lane"] == "rag" else check_agent(sample, trace)
        )
        out.append((row, result))
    return out


def test_every_planted_row_has_its_trace_and_every_trace_a_row(sample):
    rows = {(r["run_id"], r["trace_id"]) for r in sample.planted["traces"]}
    traces = {(run, tid) for run, by_id in sample.traces.items() for tid in by_id}
    assert rows == traces
    # 124 traces per run: 48 RAG-only cases (4 with two attempts: 52 traces) + 24 agent cases × 3 = 52 + 72.
    assert len(sample.traces["base-41"]) == len(sample.traces["cand-42"]) == 136


def test_first_failing_stage_class_and_hazard_follow_the_spec(checked):
    mismatches = []
    for row, got in checked:
        want = {k: row[k] for k in ("expected", "failure_class", "hazard", "fault_outcome") if k in got}
        have = {k: got[k] for k in want}
        if want != have:
            mismatches.append((row["trace_id"], row["lane"], want, have))
    assert mismatches == []


def test_gate_metrics_per_trace_follow_the_spec(checked):
    mismatches = []
    for row, got in checked:
        for metric in ("recall_at_10", "success", "args_valid_rate", "policy_violation"):
            if metric in row["metrics"] and got["expected"] != "incomplete":
                want, have = row["metrics"][metric], got[metric]
                if not (want == have or (isinstance(want, float) and have is not None and abs(want - have) < 1e-6)):
                    mismatches.append((row["trace_id"], metric, want, have))
    assert mismatches == []


def test_planted_claims_are_the_answer_sentences_with_their_verdicts(checked):
    compared = 0
    for row, got in checked:
        if "claims" not in row:
            continue
        assert [c["claim"] for c in row["claims"]] == [c["claim"] for c in got["claims"]], row["trace_id"]
        for want, have in zip(row["claims"], got["claims"], strict=True):
            assert (want["verdict"] == "SUPPORTED") == have["supported"], (row["trace_id"], want["claim"])
            assert want["citation_verdict"] == have["citation"], (row["trace_id"], want["claim"])
            compared += 1
    # Both runs: every complete RAG trace with an answer (refusals contribute no claim).
    assert compared > 150


def test_sequence_metrics_of_multi_round_traces(sample):
    trace = sample.traces["cand-42"]["cand-42:rag-048#1"]
    rounds = [[h["doc_id"] for h in r["hits"]] for r in trace["retrieval"]]
    # Round 2 holds support-sla, two-factor and api-rate-limits that round 1 lacked: 3 of 5 new.
    novelty = [1.0] + [
        sum(d not in {x for r in rounds[:i] for x in r} for d in rounds[i]) / len(rounds[i])
        for i in range(1, len(rounds))
    ]
    assert novelty == [1.0, 0.6]
    assert ranked(trace).index("policy/support-sla-2025") + 1 == 6
    repeated = sample.traces["base-41"]["base-41:rag-024#1"]["retrieval"]
    assert repeated[0]["query"] == repeated[1]["query"]
    assert [h["doc_id"] for h in repeated[0]["hits"]] == [h["doc_id"] for h in repeated[1]["hits"]]


def test_dead_citation_id_exists_nowhere(sample):
    trace = sample.traces["cand-42"]["cand-42:rag-012#1"]
    cited = MARKER.findall(trace["answer"]["text"])
    assert cited == ["policy/cancellation-2023"]
    assert cited[0] not in sample.corpus and cited[0] not in {c["doc_id"] for c in trace["context"]}


def test_fabricated_quote_is_not_in_the_corpus(sample):
    quotes = [c["quote"] for c in sample.traces["cand-42"]["cand-42:rag-019#1"]["answer"]["citations"]]
    found = [any(norm(q) in norm(d["text"]) for d in sample.corpus.values()) for q in quotes]
    # quotes_found_rate = 1 found of 2 quotes = 0.5
    assert found == [True, False]


def test_json_roundtrip_of_planted_is_stable(sample):
    text = (sample.root / "planted.json").read_text(encoding="utf-8")
    assert json.dumps(json.loads(text), ensure_ascii=False, indent=1) + "\n" == text
