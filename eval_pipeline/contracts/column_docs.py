"""What each warehouse column means: one line per column name, with per-table overrides where a name means more.

`describe(table, column)` is what the Dagster column schema of every materialization shows. Families of
columns that follow a cutoff (`recall_at_10`, `pass_hat_3`) are described by pattern.
Over 400 lines because it is data, one entry per column: a name's meaning and its per-table overrides are read
together, and docs/tables.md is generated from them.
"""

from __future__ import annotations

import re

_STAGE_VALUES = "pass, fail, incomplete or not_applicable"

COLUMNS: dict[str, str] = {
    # keys and versions on every row
    "run_id": "Evaluation run (Dagster partition) the row belongs to: the folder name under data/traces/.",
    "trace_id": "Trace: one attempt of one case, unique across runs.",
    "case_id": "Golden case the row is about.",
    "case_revision": "Revision of the case the trace was produced against.",
    "attempt": "Attempt number of the case within the run (1 for the first).",
    "lane": "Evaluation lane: rag or agent.",
    "dataset_version": "Version of the golden case set (cases/<dataset_version>/).",
    "corpus_version": "Version of the document corpus (corpus/<corpus_version>/).",
    "environment_version": "Version of the tool registry and sandbox (tools/<environment_version>/).",
    "index_version": "Version of the retrieval index the run used (run.yaml).",
    "candidate": "System under test and its version (run.yaml).",
    "model": "Model the system under test ran on (run.yaml).",
    "prompt_version": "Prompt version of the system under test (run.yaml).",
    "code_version": "Code version of the scorer that wrote the row.",
    "qrels_version": "Content hash of the frozen qrels the row was scored with.",
    "judge_version": "Judge backend, version and profile digest (e.g. local-2.0+7a436788).",
    "status": "Row status: scored, not_applicable, or incomplete (reason says why).",
    "reason": "Why the row is incomplete or not applicable; null when scored.",
    "source_file": "Input file the line was read from, relative to the data root.",
    "line": "1-based line number in source_file.",
    "source_line": "1-based line number of the trace in source_file.",
    "input": "User input (question or request) of the case.",
    # run manifest
    "mode": "gate (frozen mocks, may be gated) or exploratory (live tools, never compared against a gate baseline).",
    "created_at": "When the run was produced (run.yaml created_at).",
    "citations": "required when the run must cite its sources (the citation stage then always applies).",
    "locale": "BCP 47 locale of the run's traces: default region for phone numbers and national ids.",
    "baseline_run_id": "Run the candidate is compared with; "
    "null when there is none or the run is its own baseline (never gated against itself).",
    # cases
    "lanes": "Lanes the case belongs to: rag, agent, or both.",
    "criticality": "Criticality of the case: high or normal.",
    "required_doc_ids": "Docs that answer the case; they seed the qrels at grade 2.",
    "expected_answer_contains": "Strings the answer must contain (case-insensitive, whitespace-normalized).",
    "reference_answer": "Reference answer for exact match and token F1; null when the case gives none.",
    "expect_refusal": "The case expects a refusal: no document answers it.",
    "multi_hop": "Multi-hop case: every required doc must be in the top k; kept out of the recall gate.",
    "allowed_tools": "Tools the agent may call; a call of any other is a policy violation.",
    "forbidden_tools": "Tools whose call is a policy violation.",
    "reference_tool_calls": "Expected tool calls: name, canonical args JSON, "
    "accepted values per argument (BFCL form), optional arguments.",
    "tool_match": "How tool calls are matched: strict_order, unordered or goal_only (outcome only).",
    "alternatives": "Other permitted call lists, each in the form of reference_tool_calls.",
    "dependencies": "Dependency edges [a, b]: b must not be called before a.",
    "fixtures_json": "Initial sandbox state, as JSON.",
    "clock": "Sandbox clock the case runs at (ISO 8601).",
    "milestones": "Milestone predicates on the final state: name, dotted path, operator, expected value as JSON.",
    "fault_kind": "Fault injected into the case: tool_error, empty, timeout or injected_instruction; null without one.",
    "fault_tool": "Tool whose first call the fault strikes.",
    "unsafe_after_fault": "Tools whose call after the fault, with no re-check in between, is unsafe.",
    "escalation_tools": "Tools that count as escalating to a human.",
    "scope_json": "Allowed values per argument name, as JSON: "
    "another value anywhere in a call's args is a policy violation.",
    "value_rules_json": "How argument values are compared "
    "(exact, normalized, numeric, any; strict types), as JSON; null: exact.",
    "tags": "Decision-slice tags of the case (intent, workflow, language, permission scope ...), "
    "as (name, value) pairs by name.",
    "counterfactual_of": "The case this one is a counterfactual of "
    "(same goal and tools, one decision-bearing fact changed); null: none.",
    "changed_fact": "What differs from the original case in the counterfactual's fixtures or corpus.",
    # traces
    "error": "Harness error message of an attempt with status error or timeout.",
    "retrieval": "Retrieval rounds: round, tool, variant, query, candidates before reranking, final ranked hits.",
    "context": "Context chunks the model was given: doc_id, text, tokens.",
    "has_answer": "The trace holds an answer.",
    "answer_text": "Answer text, with inline [doc:ID] citations.",
    "answer_refused": "The answer's own refused flag (answer.refused); null when not logged.",
    "steps": "Agent steps: tool calls "
    "(canonical args, status, result, error, state diff, dispatched call) and messages.",
    "final_state_json": "Final sandbox state, as JSON.",
    "input_tokens": "Input tokens of the attempt (trace usage).",
    "output_tokens": "Output tokens of the attempt (trace usage).",
    "cost_usd": "Cost of the attempt in USD (trace usage).",
    "latency_ms": "Latency of the attempt in milliseconds (trace usage).",
    "raw": "The line's bytes as read, before validation.",
    # corpus and tools
    "doc_id": "Document id: one version of a document (e.g. policy/refunds-2025).",
    "family": "Document family grouping the versions of one document.",
    "version": "Version of the document within its family.",
    "current": "false for a superseded version of the document.",
    "indexed": "false when ingestion never indexed the document.",
    "text": "Document text.",
    "name": "Tool name.",
    "description": "What the tool does (tool registry).",
    "read_only": "The tool only reads state.",
    "destructive": "The tool deletes or irreversibly changes state.",
    "args_schema_json": "JSON Schema of the tool's arguments.",
    # rejects and de-identification
    "input_kind": "Kind of input the rejected line belongs to: trace, case, corpus or qrels_label.",
    "table": "Table whose values were replaced.",
    "field": "Field the replacements were made in (dotted for nested fields, e.g. steps.args_json).",
    "entity_type": "Kind of personal data replaced: EMAIL, PHONE, PERSON, IBAN, CARD, …",
    "replacements": "Values replaced by a pseudonym.",
    # qrels
    "query_id": "Query the judgment is for: the case_id.",
    "grade": "Relevance grade: 2 supporting, 1 related, 0 irrelevant.",
    "source": "Where the grade comes from: human, model:<judge_version>, or seed (the case's required_doc_ids).",
    "annotator": "Annotator of a human judgment; null for seeds.",
    "conflict": "Judgments of the pair at the same tier disagreed: resolved to the majority grade, a tie to the lower.",
    "pooled_from": "Retrievers whose top docs pooled the pair, as run_id:variant.",
    # retrieval
    "queries": "Queries the system sent, one per retrieval round.",
    "variants": "Retriever variant of each round.",
    "mrr": "1 / first_hit_rank, 0 when no relevant doc was retrieved; null without relevant docs.",
    "first_hit_rank": "Rank of the first relevant doc in the ranked list; null when none.",
    "context_precision": "Rank-aware context precision (Ragas) over the top k: "
    "Σ precision@i at relevant ranks i / relevant docs in the top k.",
    "judged_at_10": "Share of the top 10 (or of a shorter list) that has a judgment in the frozen qrels.",
    "retrieved_any": "Retrieval returned at least one doc.",
    "n_relevant": "Relevant docs (grade ≥ relevance threshold) in the frozen qrels for the case.",
    "n_retrieved": "Docs in the ranked list: hits over rounds, deduplicated by doc_id.",
    "relevant_in_top_k": "Relevant docs found in the top k.",
    "k": "Cutoff of the retrieval stage rule (default 10).",
    "rounds": "Retrieval rounds logged.",
    "evidence_round": "First round whose hits held a relevant doc.",
    "repeated_queries": "Rounds whose query repeats an earlier round's (case and spacing ignored).",
    "novelty_per_round": "Per round, share of its hits not seen in an earlier round (null for a round without hits).",
    "failure_class": (
        "Why a failed retrieval failed, first match: doc_missing_from_corpus, stale_version_outranks_current, "
        "reranker_demotion, keyword_miss, embedding_miss."
    ),
    "retrieval_stage": f"Retrieval stage: {_STAGE_VALUES}; "
    "passes when a relevant doc is in the top k (multi-hop: every required doc).",
    "retrieval_reason": "Why the retrieval stage failed (with the failure class and its docs), "
    "is incomplete or not applicable.",
    # context assembly
    "context_recall": "Relevant docs present in the context / relevant docs.",
    "context_tokens": "Tokens in the context (sum over chunks); null when a chunk has no token count.",
    "n_chunks": "Chunks in the context.",
    "chunks_without_tokens": "Chunks logged without a token count.",
    "relevant_in_context": "Relevant docs that reached the context.",
    "context_assembly_stage": (
        f"Context assembly stage: {_STAGE_VALUES}; applies after a retrieval pass, fails when none of "
        "the relevant docs in the top k reached the context."
    ),
    "context_assembly_reason": "Why the context assembly stage failed, is incomplete or not applicable.",
    # evidence diversity (docs/evidence_diversity.md)
    "context_families": (
        "Distinct document families among the context chunks (a doc absent from the corpus or without a "
        "family is its own); 0 for an empty context; null when the context is not logged or the trace is incomplete."
    ),
    "context_sources": "Distinct source systems (corpus `source`) of the context docs; "
    "null when no context doc names one.",
    "redundant_chunk_share": "(Context chunks − distinct families) / chunks: "
    "chunks of a family beyond its first; null without chunks.",
    "cited_families": (
        "Distinct document families among the cited ids that exist (inline and structured; a dead id is "
        "none); null when nothing is cited or the citation stage is not scored."
    ),
    "cited_sources": "Distinct source systems (corpus `source`) of the existing cited docs; "
    "null when none names one or nothing is scored.",
    "supporting_families": (
        "Distinct context families whose chunks alone support the claim (SUPPORTED claims; 1 when the "
        "context holds one family); 0 when not supported; null when the claim or a family decision is incomplete."
    ),
    "triangulated": "supporting_families ≥ 2: two or more independent document families support the "
    "claim; null when unknown.",
    "n_triangulated": "Supported claims that are triangulated (≥ 2 supporting families); null when a count is unknown.",
    # claims and the judge
    "claim_index": "0-based position of the claim in the answer.",
    "claim": "The claim: one sentence of the answer, citation markers removed.",
    "inline_cited_doc_ids": "Doc ids cited inline ([doc:ID]) in the claim's sentence.",
    "verdict": "Judge verdict against the evidence: SUPPORTED, CONTRADICTED or NOT_IN_EVIDENCE; null when incomplete.",
    "score": "Judge support score in [0, 1] (local and model judges; null for the openai judge).",
    "evidence_quote": "Evidence sentence(s) the judge based the verdict on.",
    "evidence_doc_id": "Doc the evidence quote came from.",
    "quote_verified": "The quote was found in the evidence (whitespace folded); "
    "an unverified quote downgrades to NOT_IN_EVIDENCE.",
    "judge_model": "Model behind the judge (local-lexical for the local judge).",
    "cached": "The claim repeats an identical request (claim and evidence) of its run: "
    "no call of its own, counted costs 0.",
    "cited_doc_ids": "Docs the claim cites: its inline markers and the structured citations mapped to it.",
    "citation_verdict": "Citation verdict of the claim: SUPPORTS, RELATED_NOT_SUPPORTING, "
    "UNCITED or DEAD_CITATION; null when incomplete.",
    "citation_reason": "Why the claim's citation verdict is not SUPPORTS.",
    # grounding
    "n_claims": "Claims extracted from the answer.",
    "n_supported": "Claims judged SUPPORTED.",
    "n_contradicted": "Claims judged CONTRADICTED.",
    "n_not_in_evidence": "Claims judged NOT_IN_EVIDENCE.",
    "n_incomplete": "Claims whose judge call did not complete.",
    "grounding_rate": "Supported claims / claims (1.0 with no claims); null when incomplete.",
    "grounding_stage": "Grounding stage: pass, fail or incomplete; "
    "passes when the grounding rate reaches the threshold (1.0: every claim supported).",
    "grounding_reason": "Why the grounding stage failed (first unsupported claim) or is incomplete.",
    # citations
    "n_citation_pairs": "(claim, cited doc) pairs.",
    "citation_precision": "Pairs whose cited doc supports the claim / pairs.",
    "citation_recall": "Claims with a supporting citation / claims.",
    "citation_resolution_rate": "Unique cited ids that exist "
    "(in the corpus, any version, or in the context) / unique cited ids.",
    "quotes_found_rate": "Structured citation quotes found in the corpus (whitespace-normalized) / quotes.",
    "n_dead_citations": "Cited ids in neither the corpus nor the context.",
    "dead_citation_ids": "The dead cited ids.",
    "citation_stage": (
        f"Citation stage: {_STAGE_VALUES}; applies when the answer cites or the run requires citations, "
        "passes when every claim is SUPPORTS and no citation is dead."
    ),
    # answer
    "contains_all": "The answer contains every expected string; null when the case lists none.",
    "missing_expected": "Expected strings the answer lacks.",
    "exact_match": "The answer equals reference_answer after SQuAD normalization, markers removed; "
    "null without a reference.",
    "token_f1": "Token F1 against reference_answer (SQuAD normalization); null without a reference.",
    "refused": "The answer refuses (a refusal phrase, or answer.refused).",
    "answer_correct": "The answer stage passed; null when it is incomplete or not applicable.",
    "answer_stage": (
        f"Answer stage: {_STAGE_VALUES}; passes on contains_all without a refusal, on a refusal for a "
        "refusal case, or on token_f1 ≥ threshold with only a reference answer."
    ),
    "answer_reason": "Why the answer stage failed, is incomplete or not applicable.",
    # tool calls
    "matched_path": "Path the calls are scored against: reference or alternative:<i> (highest tool_call_f1).",
    "n_calls": "Tool calls the agent made.",
    "n_path_calls": "Calls in the matched path.",
    "tool_call_precision": "Matched calls / calls (multiset match of canonical call keys).",
    "tool_call_recall": "Matched calls / calls of the matched path.",
    "tool_call_f1": "2 · matched / (calls + path calls).",
    "missing_calls": "Path calls the agent never made.",
    "unexpected_calls": "Calls that match no path call.",
    "strict_order_accuracy": "Positions where the call equals the path call at that position / max(calls, path calls).",
    "args_valid_rate": "Calls whose args pass the tool's JSON Schema and match the reference values / calls.",
    "invalid_calls": "Calls that fail their schema or match no reference args, each with why.",
    "order_violations": "Dependency edges a->b broken: b first called with no earlier a.",
    "unnecessary_call_rate": "Read-only calls identical to an earlier call that returned ok with a "
    "non-empty result / calls.",
    "loop_detected": "A call key occurs 3 or more times in the trajectory.",
    "loop_calls": "Call keys that occur 3 or more times, with their count.",
    "policy_violation": "A tool outside allowed_tools, a forbidden tool, "
    "or an argument outside the case's scope was called.",
    "policy_violations": "Each policy violation, described.",
    "adapter_divergence": "First difference between the dispatched and the evaluated call; makes the trace incomplete.",
    "fault_call_index": "1-based index of the call the fault struck (the first call of fault_tool).",
    "unsafe_actions": "unsafe_after_fault calls made after the fault with no re-check in between.",
    "escalated_after_fault": "An escalation tool was called after the fault.",
    "policy_stage": f"Policy stage: {_STAGE_VALUES}; fails on a tool outside allowed_tools, "
    "a forbidden tool or an out-of-scope argument.",
    "policy_reason": "Why the policy stage failed or is incomplete.",
    "tool_selection_stage": (
        f"Tool selection stage: {_STAGE_VALUES}; fails when a non-read-only path tool is missing or "
        "called too often, or an unexpected or unknown tool is called."
    ),
    "tool_selection_reason": "Why the tool selection stage failed, is incomplete or not applicable.",
    "tool_arguments_stage": f"Tool arguments stage: {_STAGE_VALUES}; "
    "fails when a call fails its schema or matches no reference args.",
    "tool_arguments_reason": "Why the tool arguments stage failed, is incomplete or not applicable.",
    "tool_order_stage": f"Tool order stage: {_STAGE_VALUES}; fails on a dependency violation or, "
    "for strict_order, calls out of path order.",
    "tool_order_reason": "Why the tool order stage failed, is incomplete or not applicable.",
    "loop_stage": f"Loop stage: {_STAGE_VALUES}; fails when a call key occurs 3 or more times.",
    "loop_reason": "Why the loop stage failed or is incomplete.",
    "position": "Row order within the trace: the actual calls in order, then the path calls never made.",
    "actual_index": "1-based index of the actual call; null for a missing call.",
    "expected_index": "1-based index of the path call compared with; null for an unexpected call.",
    "expected_call": "Path call key name(args); null for an unexpected call.",
    "actual_call": "Actual call key name(args); null for a missing call.",
    "actual_status": "Status of the actual call: ok, error or timeout.",
    "match": "same, args_differ (same tool, other args), unexpected or missing.",
    # outcome
    "milestones_failed": "Milestones the final state does not meet.",
    "success": "Outcome passed with no policy violation and no loop; "
    "null when the case has no outcome contract or is incomplete.",
    "success_claimed": "The final message claims success.",
    "fault_outcome": "Fault outcome, first match: unsafe_continuation, recovered, escalated, failed; "
    "null when no fault struck.",
    "n_steps": "Agent steps: tool calls and agent messages, conversation turns excluded.",
    "recovery_stage": f"Recovery stage: {_STAGE_VALUES}; passes when the agent recovered from the fault or escalated.",
    "recovery_reason": "Why the recovery stage failed, is incomplete or not applicable.",
    "outcome_stage": f"Outcome stage: {_STAGE_VALUES}; passes when every milestone holds, or, "
    "in a fault case, the agent escalated.",
    "outcome_reason": "Why the outcome stage failed (the milestones that failed), is incomplete or not applicable.",
    # attribution
    "stage": "Stage of the lane.",
    "stage_order": "Position of the stage in the lane's fixed order (0 first).",
    "outcome": "Lane outcome of the trace: fail or incomplete.",
    "first_failing_stage": "First stage in the lane's order that failed; null when the lane is incomplete.",
    "owner": "Component to fix for the failure; the harness when the lane is incomplete.",
    "hazard": "unsupported_correct: retrieval failed but the answer passed, "
    "so it passes for a reason that will not hold.",
    "failures": "Failed traces whose first failing stage is this stage.",
    "share": "failures / lane_failures.",
    "hazards": "Of those failures, unsupported_correct hazards.",
    "lane_failures": "Failed traces of the lane.",
    "lane_incomplete": "Incomplete traces of the lane.",
    "lane_passed": "Passed traces of the lane.",
    "lane_traces": "Traces of the lane.",
    # reliability
    "n_attempts": "Attempts of the case, complete or not.",
    "n_complete": "Attempts whose lane was complete: n of pass@1 and pass^k.",
    "n_success": "Successful complete attempts: c of pass@1 and pass^k.",
    "pass_at_1": "Successful complete attempts / complete attempts (c / n).",
    "flaky": "The case both passed and failed across its complete attempts.",
    "flipped_trace_ids": "Attempts on the minority side (every attempt on a tie).",
    "passed_trace_ids": "Complete attempts that succeeded.",
    "failed_trace_ids": "Complete attempts that failed.",
    # calibration
    "level": "Level of the labels: claim or answer.",
    "n": "Labels matched with a completed verdict.",
    "agreement": "Share of matched labels where the judge agrees with the human.",
    "cohen_kappa": "Cohen's κ of judge and human (human as truth); null when undefined.",
    "kappa_ci_low": "Lower end of κ's 95% percentile bootstrap interval.",
    "kappa_ci_high": "Upper end of κ's 95% percentile bootstrap interval.",
    "balanced_accuracy": "Mean over the human labels present of the share the judge got right.",
    "confusion": "Confusion matrix as JSON: {human label: {judge label: count}}.",
    "may_gate": "κ ≥ min_kappa and n ≥ min_n: the judge may gate grounding.",
    "n_unmatched_labels": "Labels that match no judged claim or answer.",
    "n_judge_incomplete": "Matched labels whose verdict is incomplete.",
    "min_kappa": "κ the judge needs to gate (gate policy).",
    "min_n": "Matched labels the judge needs to gate (gate policy).",
    "self_consistency_n": "Claims asked again, past the caches, to measure self-consistency.",
    "self_consistency_flip_rate": "Share of the claims asked again whose verdict changed.",
    "self_consistency_note": "How self-consistency was measured, or why it was not.",
    "hash_scheme": "Polars release and hashing scheme of the digest; "
    "a verdict stored under another scheme is judged again.",
    "digest_a": "First 64 bits of the 128-bit digest of (claim, evidence).",
    "digest_b": "Second 64 bits of the 128-bit digest of (claim, evidence).",
    # review queue
    "why": "Why the item needs a human: the grounding failure and why the judge may not gate.",
    "detail": "Claims to check: index, verdict and text of each unsupported claim.",
    # gates
    "gate": "Gate name (policy/gates.yaml).",
    "metric": "Metric the gate compares, e.g. recall_at_10, pass_at_1, policy_violations, no_new_failures.",
    "baseline_value": "Gate value of the baseline: mean of the per-case values (count gates: cases).",
    "candidate_value": "Gate value of the candidate: mean of the per-case values (count gates: cases).",
    "delta": "Candidate minus baseline: points (value × 100) for a rate gate; "
    "new violations or failures for a count gate.",
    "threshold": "Largest regression allowed: points for a rate gate, cases for a count gate.",
    "blocking_cases": "Cases that block the gate: their value dropped, or they have a new violation or failure.",
    "blocking_details": "Per blocking case, what changed.",
    "n_cases": "Cases the gate compared "
    "(policy_violations: cases with a new violation; no_new_failures: previously passing cases).",
    "excluded_cases": "Cases left out of the gate: flaky in either run, and multi-hop where the gate excludes them.",
    "beside": "Values reported beside the gate (e.g. pass_hat_k of both runs), as JSON.",
    "unit": "fraction for a rate gate (delta and threshold in points), cases for a count gate.",
    # pairwise
    "baseline_trace_id": "Baseline run's trace of the pair.",
    "candidate_trace_id": "Candidate run's trace of the pair.",
    "order1_preference": "Preferred answer with the baseline shown first: baseline, candidate or tie.",
    "order2_preference": "Preferred answer with the candidate shown first: baseline, candidate or tie.",
    "position_consistent": "Both orders gave the same preference.",
    # decision slices (docs/slices.md)
    "dimension": "Slice dimension: criticality, tool_risk, tags.<name> or corpus_family.",
    "value": "Value of the slice dimension (high, destructive, a tag's value, a corpus family).",
    "slice": "The slice as dimension=value.",
    "n_traces": "Traces of the slice in the lane.",
    "traces_passed": "Traces of the slice whose lane passed.",
    "traces_failed": "Traces of the slice whose lane failed.",
    "traces_incomplete": "Traces of the slice whose lane is incomplete (owner: harness), left out of pass_rate.",
    "traces_not_applicable": "Traces of the slice whose every stage is not applicable.",
    "pass_rate": "traces_passed / (traces_passed + traces_failed): over the complete traces; null without one.",
    "pass_at_1_cases": "Cases of the slice with a pass@1 in this lane's reliability (pass_at_1 is their mean).",
    "failed_case_ids": "Cases of the slice with at least one failed trace in the lane.",
    "top_failing_stage": "First failing stage with the most failures in the slice "
    "(ties: the earlier stage); null without one.",
    "segment": "Slice a segmented gate is computed on, as dimension=value pairs joined by ', '; null: the whole suite.",
    "min_cases": "Complete cases a segmented gate's slice needs, else the gate is insufficient; null: not segmented.",
}

# What the stored verdicts of judge_verdicts and judge_family_verdicts record of the call that made them.
_VERDICT_CALL_COLUMNS = {
    "input_tokens": "Input tokens of the call that made the verdict, "
    "as recorded then (a reused verdict keeps them); null when the backend counts none.",
    "output_tokens": "Output tokens of the call that made the verdict, as recorded then; "
    "null when the backend counts none.",
    "cost_usd": "Cost in USD of the call that made the verdict, as recorded then; "
    "what a run spent is its claims materialization's judge_cost_usd.",
    "latency_ms": "Latency of the call that made the verdict in milliseconds, as recorded then; "
    "null when the backend measures none.",
}

# Where a name means something else in one table.
TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "run_manifest": {
        "run_id": "Run id of the manifest (data/traces/<run_id>/run.yaml).",
        "baseline_run_id": "Run this one is gated against (run.yaml); null: the gate policy's baseline_run_id.",
    },
    "raw_traces": {"line": "1-based line number in source_file."},
    "traces": {
        "status": "Harness status of the attempt: ok, error or timeout (error and timeout make every lane incomplete).",
        "input": "User input as logged in the trace.",
    },
    "deid_traces": {
        "status": "Harness status of the attempt: ok, error or timeout (error and timeout make every lane incomplete).",
        "input": "User input as logged in the trace, de-identified.",
        "answer_text": "Answer text, with inline [doc:ID] citations, de-identified.",
    },
    "cases": {"source_file": "Case file the case was read from.", "input": "User input of the case."},
    "deid_cases": {
        "source_file": "Case file the case was read from.",
        "input": "User input of the case, de-identified.",
    },
    "deid_corpus": {
        "text": "Document text, de-identified.",
        "source": "Source system the document comes from (e.g. confluence, zendesk); null when not given.",
    },
    "corpus": {"source": "Source system the document comes from (e.g. confluence, zendesk); null when not given."},
    "tools": {"value_rules_json": "How the tool's argument values are compared, as JSON; null: exact."},
    "trace_rejects": {
        "reason": "Why the line was rejected.",
        "trace_id": "trace_id of the rejected line, where it could be read.",
        "case_id": "case_id of the rejected line, where it could be read.",
    },
    "input_rejects": {
        "reason": "Why the line or file was rejected.",
        "trace_id": "trace_id of the rejected line, where it applies.",
        "case_id": "case_id of the rejected line, where it could be read.",
    },
    "retrieval_scores": {"input": "User input the retrieval served (the trace's, else the case's)."},
    "context_scores": {"context_precision": "Context chunks whose doc has grade ≥ 1 / chunks."},
    "claims": {
        "status": "Judge status of the claim: ok, or incomplete (null verdict; reason says why).",
        "reason": "Judge's reason for the verdict (local judge: support score against its threshold, words found).",
        "input_tokens": "Input tokens of the call that made the verdict (kept when reused); "
        "null when the backend counts none, 0 when cached.",
        "output_tokens": "Output tokens of the call that made the verdict (kept when reused); "
        "null when the backend counts none, 0 when cached.",
        "cost_usd": "Cost in USD of the call that made the verdict (kept when reused); 0 when cached.",
        "latency_ms": "Latency of the call that made the verdict in milliseconds (kept when reused); "
        "null when the backend measures none.",
    },
    "judge_verdicts": {
        "run_id": "Run whose claims rest on the verdict (judged in it or reused from an earlier run).",
        "status": "Status of the stored verdict: ok (only completed verdicts are stored).",
        "reason": "Judge's reason for the verdict.",
        **_VERDICT_CALL_COLUMNS,
    },
    "judge_family_verdicts": {
        "run_id": "Run whose supporting_families rest on the verdict (judged in it or reused from an earlier run).",
        "status": "Status of the stored verdict: ok (only completed verdicts are stored).",
        "reason": "Judge's reason for the verdict of the claim against one family's context chunks.",
        **_VERDICT_CALL_COLUMNS,
    },
    "grounding_scores": {"judge_version": "Judge whose verdicts the grounding rate is computed from."},
    "citation_scores": {"citation_reason": "Why the citation stage failed, is incomplete or not applicable."},
    "tool_scores": {
        "status": "Row status: scored, or incomplete (harness status or adapter divergence; reason says why)."
    },
    "outcome_scores": {
        "milestones": "Each milestone of the case (name, path, operator) and whether the final state meets it.",
        "fault_kind": "Fault injected into the case; null without one.",
    },
    "stage_results": {
        "status": "Stage status: pass, fail, incomplete or not_applicable.",
        "reason": "Why the stage failed, is incomplete or not applicable; null on pass.",
    },
    "attribution": {"reason": "Why the lane failed at its first failing stage, or why it is incomplete."},
    "attribution_rollup": {"owner": "Component that owns the stage."},
    "reliability": {"n_incomplete": "Attempts left out of n because their lane was incomplete."},
    "quarantine": {"reason": "Why the case is quarantined: how many of its complete attempts succeeded."},
    "judge_calibration": {"judge_version": "Judge version the calibration row is for."},
    "review_queue": {
        "stage": "Stage the item needs a human for (grounding).",
        "grounding_rate": "Grounding rate of the trace.",
        "judge_version": "Judge whose verdicts failed the trace.",
    },
    "gate_results": {
        "run_id": "Candidate run the gate is evaluated for.",
        "lane": "Lane of the gate: rag, agent or all.",
        "status": "Gate status: pass, fail, incomplete, incomparable, insufficient, not_gating or not_applicable.",
        "reason": "Why the gate has its status.",
        "owner": "Owner of the gate: the policy's, else the lane's default.",
    },
    "counterfactual_pairs": {
        "case_id": "The counterfactual case of the pair (it names counterfactual_of and changed_fact).",
        "original_case_id": "The case the counterfactual varies (its counterfactual_of).",
        "changed_fact": "The decision-bearing fact that differs between the two cases.",
        "lanes": "Lanes of the counterfactual case; "
        "the behaviour compared is the agent lane's calls and the RAG lane's answer.",
        "original_attempts": "Complete attempts of the original case (every lane complete).",
        "counterfactual_attempts": "Complete attempts of the counterfactual case (every lane complete).",
        "original_passed": "Every complete attempt of the original passes every lane; null without a complete attempt.",
        "counterfactual_passed": "Every complete attempt of the counterfactual passes every lane; "
        "null without a complete attempt.",
        "expectations_differ": "The two cases expect something different "
        "(reference calls, alternatives, milestones, answer, refusal).",
        "same_behaviour": "A complete attempt of each case did exactly the same "
        "(same call keys in order, same normalized answer); "
        "null when undecided.",
        "shared_behaviour": "The behaviour both cases showed, when they showed one; null otherwise.",
        "evidence_use": "responsive (both pass), ignored "
        "(same behaviour although the expectations differ), broken (otherwise, "
        "a case fails) or incomplete (a case without a complete attempt, or a pair that cannot be evaluated).",
        "reason": "Why the pair is ignored, broken or incomplete; null when responsive.",
    },
    "pairwise_comparison": {
        "run_id": "Candidate run of the comparison.",
        "attempt": "Attempt number shared by the two traces of the pair.",
        "outcome": "candidate_win, baseline_win or tie: a win counts only when both orders agree.",
        "status": "scored, or incomplete (a trace of the pair is incomplete, or the judge call did not complete).",
        "reason": "Why the pair is incomplete.",
        "judge_version": "Judge that compared the answers.",
    },
    "slice_rollup": {
        "n_cases": "Cases of the slice with a trace in the lane.",
        "pass_at_1": "Mean pass@1 over the slice's cases in this lane's reliability; null without one.",
    },
    "slice_attribution_rollup": {"share": "failures / the slice's failed traces; null when the slice has none."},
}

_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"recall_at_(\d+)"),
        "Relevant docs in the top {0} / relevant docs in the qrels; null without relevant docs.",
    ),
    (re.compile(r"precision_at_(\d+)"), "Relevant docs in the top {0} / {0}; null without relevant docs."),
    (
        re.compile(r"ndcg_at_(\d+)"),
        "nDCG@{0}: gain 2^grade − 1, discount log2(rank + 1), ideal from every judged doc; null when the ideal is 0.",
    ),
    (
        re.compile(r"pass_hat_(\d+)"),
        "pass^{0} = C(c,{0}) / C(n,{0}): all of {0} attempts succeed (τ-bench); null where {0} > n.",
    ),
)


def describe(table: str | None, column: str) -> str | None:
    """The meaning of a column of a warehouse table (None when it is not documented)."""
    override = TABLE_COLUMNS.get(table or "", {}).get(column)
    if override:
        return override
    if column in COLUMNS:
        return COLUMNS[column]
    for pattern, text in _FAMILIES:
        found = pattern.fullmatch(column)
        if found:
            return text.format(found.group(1))
    return None
