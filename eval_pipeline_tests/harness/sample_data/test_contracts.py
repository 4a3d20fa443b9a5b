"""Every file of the sample validates against the SPEC §2 contracts; the bad lines fail for their documented reason."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from eval_pipeline.contracts.cases import MILESTONE_OPERATORS, Case, CorpusDoc, ToolRegistry
from eval_pipeline.contracts.labels import GroundingLabel, QrelsJudgment
from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.traces import RunManifest, Trace


def test_corpus_lines_validate_and_hold_versioned_families(sample):
    docs = [CorpusDoc.model_validate(d) for d in sample.corpus.values()]
    assert len(docs) == 39
    superseded = sorted(d.doc_id for d in docs if not d.current)
    assert superseded == [
        "kb/api-rate-limits-2024",
        "kb/plans-2024",
        "policy/data-retention-2024",
        "policy/refunds-2023",
        "policy/refunds-2024",
        "policy/returns-hardware-2024",
        "policy/shipping-2024",
    ]
    assert [d.doc_id for d in docs if not d.indexed] == ["policy/tax-exemption-2025"]
    # Each superseded version has a current sibling in its family.
    families = {d.family for d in docs if d.current}
    assert all(sample.corpus[d]["family"] in families for d in superseded)


def test_tool_registry_validates_and_its_schemas_are_json_schema(sample):
    path = sample.root / "tools" / "helpdesk-sandbox-7" / "tools.yaml"
    registry = ToolRegistry.model_validate(yaml.safe_load(path.read_text()))
    assert registry.environment_version == "helpdesk-sandbox-7"
    assert len(registry.tools) == 19
    for tool in registry.tools:
        jsonschema.Draft202012Validator.check_schema(tool.args)
    flags = {t.name: (t.read_only, t.destructive) for t in registry.tools}
    assert flags["get_order"] == (True, False)
    assert flags["issue_refund"] == (False, True)
    assert flags["close_account"] == (False, True)
    assert flags["add_note"] == (False, False)


def test_cases_validate_and_cover_every_contract_feature(sample):
    cases = {cid: Case.model_validate(c) for cid, c in sample.cases.items()}
    rag = [c for c in cases.values() if "rag" in c.lanes]
    agent = [c for c in cases.values() if "agent" in c.lanes]
    assert (len(cases), len(rag), len(agent)) == (76, 51, 28)
    assert sorted(c.case_id for c in cases.values() if len(c.lanes) == 2) == ["both-001", "both-002", "both-003"]
    assert sorted(c.case_id for c in rag if c.expect_refusal) == ["rag-040", "rag-041", "rag-042", "rag-043"]
    assert all(c.required_doc_ids == [] for c in rag if c.expect_refusal)
    assert sorted(c.case_id for c in rag if c.multi_hop) == ["rag-038", "rag-039"]
    assert sorted(c.case_id for c in rag if c.reference_answer and not c.expected_answer_contains) == [
        "rag-005",
        "rag-011",
        "rag-024",
        "rag-048",
    ]
    assert {c.criticality for c in cases.values()} == {"high", "normal"}
    assert {c.tool_match for c in agent} == {"strict_order", "unordered", "goal_only"}
    assert {c.fault.kind for c in agent if c.fault} == {"tool_error", "empty", "timeout", "injected_instruction"}
    assert all(c.unsafe_after_fault and c.escalation_tools for c in agent if c.fault)
    assert sorted(c.case_id for c in agent if c.alternatives) == [
        "agent-001",
        "agent-011",
        "agent-013",
        "agent-021",
        "agent-021-cf",
    ]
    assert {c.case_id: c.counterfactual_of for c in cases.values() if c.counterfactual_of} == {
        "agent-016-cf": "agent-016",
        "agent-019-cf": "agent-019",
        "agent-020-cf": "agent-020",
        "agent-021-cf": "agent-021",
    }
    assert all(c.changed_fact for c in cases.values() if c.counterfactual_of)
    assert sorted(c.case_id for c in agent if c.scope) == ["agent-001", "agent-005"]
    assert all(c.dependencies for c in agent if c.case_id in ("agent-001", "agent-002", "agent-014"))
    operators = {m.operator for c in agent for m in c.milestones.values()}
    assert operators == set(MILESTONE_OPERATORS)


def test_reference_and_alternative_calls_pass_their_tool_schemas(sample):
    checked = 0
    for case in sample.cases.values():
        for path in [case.get("reference_tool_calls", []), *case.get("alternatives", [])]:
            for call in path:
                jsonschema.validate(call["args"], sample.tools[call["name"]]["args"])
                checked += 1
    # agent-001..021: 12+4+3+3+3+4+3+2+2+3+5+2+5+4+3+2+3+1+2+3+4 = 73 (alternatives included); both-001..003: 4+3+2 = 9;
    # the counterfactuals agent-016-cf, 019-cf, 020-cf: 2 each, agent-021-cf: 2+2 = 4
    assert checked == 92


def test_run_manifests_validate_and_share_versions(sample):
    manifests = [
        RunManifest.model_validate(yaml.safe_load((sample.root / "traces" / run / "run.yaml").read_text()))
        for run in ("base-41", "cand-42")
    ]
    assert [m.run_id for m in manifests] == ["base-41", "cand-42"]
    keys = {(m.dataset_version, m.corpus_version, m.environment_version, m.mode) for m in manifests}
    assert keys == {("golden-2026.03", "kb-2026-03", "helpdesk-sandbox-7", "gate")}
    assert [m.candidate_label for m in manifests] == ["support-assistant@2.3.1", "support-assistant@2.4.0-rc1"]


def test_every_kept_trace_validates(sample):
    for traces in sample.traces.values():
        for trace in traces.values():
            assert Trace.model_validate(trace).case_id in sample.cases, trace["trace_id"]


def test_agent_cases_run_three_attempts_and_variant_cases_two_retrievers(sample):
    for run, traces in sample.traces.items():
        attempts: dict[str, list[int]] = {}
        for trace in traces.values():
            attempts.setdefault(trace["case_id"], []).append(trace["attempt"])
        assert all(sorted(attempts[c]) == [1, 2, 3] for c, case in sample.cases.items() if "agent" in case["lanes"]), (
            run
        )
        for case_id in ("rag-009", "rag-020", "rag-021"):
            variants = [traces[f"{run}:{case_id}#{n}"]["retrieval"][0]["variant"] for n in (1, 2)]
            assert variants[1] == "bm25-v2" and variants[0] in ("dense-v3", "dense-v4")


def test_bad_lines_fail_for_their_documented_reason(sample):
    raw = (sample.root / "traces" / "cand-42" / "resubmitted.jsonl").read_bytes().split(b"\n")[:-1]
    assert len(raw) == 10 and raw[1] == b""
    kinds = {}
    seen: set[str] = set()
    for number, line in enumerate(raw, start=1):
        if not line:
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            kinds[number] = "invalid_utf8"
            continue
        except json.JSONDecodeError:
            kinds[number] = "invalid_json"
            continue
        if not isinstance(value, dict):
            kinds[number] = "not_object"
            continue
        try:
            trace = Trace.model_validate(value)
        except ValidationError as exc:
            assert [e["loc"] for e in exc.errors()] == [("attempt",)]
            kinds[number] = "wrong_type"
            continue
        if trace.case_id not in sample.cases:
            kinds[number] = "unknown_case_id"
        elif trace.trace_id in seen:
            kinds[number] = "duplicate_trace_id"
        seen.add(trace.trace_id)
    planted = {r["line"]: r["kind"] for r in sample.planted["rejects"]}
    assert (
        kinds
        == planted
        == {
            3: "invalid_json",
            5: "not_object",
            6: "wrong_type",
            7: "unknown_case_id",
            8: "duplicate_trace_id",
            9: "invalid_utf8",
        }
    )


def test_labels_and_policy_validate(sample):
    judgments = [QrelsJudgment.model_validate(j) for j in sample.judgments]
    assert len(judgments) == 20 and {j.grade for j in judgments} == {0, 1, 2}
    labels = [GroundingLabel.model_validate(g) for g in sample.grounding_labels]
    claim_labels = [g for g in labels if g.claim is not None]
    # 63 claim labels + 12 answer labels = 75 lines
    assert (len(claim_labels), len(labels)) == (63, 75)
    policy = GatePolicy.model_validate(yaml.safe_load((sample.root / "policy" / "gates.yaml").read_text()))
    assert policy.baseline_run_id == "base-41"
    suite = [g for g in policy.gates if g.segment is None]
    assert [g.metric for g in suite] == [
        "recall_at_10",
        "args_valid_rate",
        "pass_at_1",
        "policy_violations",
        "no_new_failures",
        "grounding_rate",
        "evidence_ignored",
    ]
    assert [g.max_regression_points for g in suite if g.max_regression_points is not None] == [2, 3, 5, 2]
    # decision slices (docs/slices.md): three gates on one slice each, after the suite's
    assert [(g.metric, g.segment, g.min_cases) for g in policy.gates[len(suite) :]] == [
        ("pass_at_1", {"criticality": "high"}, 4),
        ("no_new_failures", {"tags.intent": "refund"}, None),
        ("recall_at_10", {"corpus_family": "policy/account-closure"}, None),
    ]
    assert policy.min_cases == 5


def test_claim_labels_are_claim_sentences_of_their_baseline_answer(sample):
    for label in sample.grounding_labels:
        trace = sample.traces["base-41"][label["trace_id"]]
        if "claim" not in label:
            continue
        sentences = [
            " ".join(re.sub(r"\s*\[doc:[^\]]*\]", "", s).split())
            for s in re.split(r"(?<=[.!?])\s+", trace["answer"]["text"])
        ]
        assert label["claim"] in sentences, label


def _luhn(digits: str) -> bool:
    total = 0
    for i, d in enumerate(reversed([int(c) for c in digits])):
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return total % 10 == 0


def _iban_ok(iban: str) -> bool:
    compact = iban.replace(" ", "")
    return int("".join(str(int(c, 36)) for c in compact[4:] + compact[:4])) % 97 == 1


def test_personal_data_is_planted_where_deidentification_must_find_it(sample):
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in (sample.root / "traces").rglob("*.jsonl"))
    text += "\n".join(p.read_text(encoding="utf-8") for p in (sample.root / "cases").rglob("*.yaml"))
    cards = {c for c in re.findall(r"\b(?:\d{4} ){3}\d{4}\b", text) if _luhn(c.replace(" ", ""))}
    assert cards == {"4539 1488 0343 6467", "4916 3385 0608 2832"}
    ibans = set(re.findall(r"\b[A-Z]{2}\d{2}(?: [A-Z0-9]{4}){3,6}(?: [A-Z0-9]{1,4})?\b", text))
    assert {i for i in ibans if _iban_ok(i)} == {
        "DE89 3704 0044 0532 0130 00",
        "GB82 WEST 1234 5698 7654 32",
        "NL91 ABNA 0417 1643 00",
    }
    assert "203.0.113.45" in text and "+44 20 7946 0958" in text
    # The same email in the case's reference call and in the trace's call (equality must survive pseudonyms).
    case = sample.cases["agent-001"]
    ref = next(c["args"]["to"] for c in case["reference_tool_calls"] if c["name"] == "send_email")
    steps = sample.traces["base-41"]["base-41:agent-001#1"]["steps"]
    assert ref == next(s["args"]["to"] for s in steps if s.get("tool") == "send_email") == "dana.whitfield@example.com"


@pytest.mark.parametrize("run", ["base-41", "cand-42"])
def test_context_chunks_are_corpus_text(sample, run):
    for trace in sample.traces[run].values():
        for chunk in trace.get("context") or []:
            assert chunk["text"] == sample.corpus[chunk["doc_id"]]["text"]
