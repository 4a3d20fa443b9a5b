"""Large synthetic batches for benchmarks: a whole data root (corpus, tools, cases, one run, labels, gates).

RAG traces are assembled from pre-serialized JSON fragments and agent traces from templates executed once in the
sandbox, so a million traces take about a minute. A mix of healthy and failing attempts exercises every stage.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from eval_pipeline_harness.sample_data.cases import CaseDef
from eval_pipeline_harness.sample_data.generator import yaml_bytes
from eval_pipeline_harness.sample_data.labels import gate_policy
from eval_pipeline_harness.sample_data.tools import registry
from eval_pipeline_harness.sample_data.traces import C, Call, agent_fields, tokens_of

SHARD_LINES = 100_000
AGENT_SHARE = 0.4  # of the traces
PLANS = ("Starter", "Team", "Business", "Enterprise")
ADJECTIVES = (
    "shared",
    "archived",
    "priority",
    "regional",
    "legacy",
    "team",
    "secure",
    "bulk",
    "scheduled",
    "mobile",
    "audit",
    "guest",
)
NOUNS = (
    "sync",
    "export",
    "invoice",
    "seat",
    "backup",
    "webhook",
    "sandbox",
    "report",
    "calendar",
    "storage",
    "inbox",
    "badge",
)
FIRST = (
    "Ana",
    "Bilal",
    "Chen",
    "Dmitri",
    "Eva",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jia",
    "Kofi",
    "Lena",
    "Mateo",
    "Nia",
    "Omar",
    "Pia",
)
LAST = (
    "Alvarez",
    "Brandt",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Gallo",
    "Haddad",
    "Ito",
    "Jansen",
    "Kowalski",
    "Lindqvist",
)
REFUSAL = "I couldn't find that in the knowledge base."


@dataclass(frozen=True)
class SynthDoc:
    """A synthetic document version."""

    doc_id: str
    family: str
    version: str
    current: bool
    indexed: bool
    sentences: tuple[str, ...]
    numbers: tuple[int, ...]
    feature: str
    code: int


def _feature(i: int) -> str:
    return f"{ADJECTIVES[i % len(ADJECTIVES)]} {NOUNS[(i // len(ADJECTIVES)) % len(NOUNS)]} {i}"


def _sentences(feature: str, plan: str, n: tuple[int, ...], code: int) -> tuple[str, ...]:
    return (
        f"The {feature} feature is available on {plan} plans.",
        f"Requests about the {feature} feature are answered within {n[0]} business days.",
        f"The {feature} limit is {n[1]} items per workspace.",
        f"Error code ERR-{code} means the {feature} job could not start.",
        f"Changes to the {feature} settings take effect after {n[2]} minutes.",
        f"Data of the {feature} feature is kept for {n[3]} days.",
    )


# (question template, sentence index, expected phrase template)
QUESTIONS = (
    ("How fast are requests about the {f} feature answered?", 1, "{n0} business days"),
    ("What is the limit of the {f} feature?", 2, "{n1} items"),
    ("What does ERR-{code} mean?", 3, "could not start"),
    ("When do changes to the {f} settings take effect?", 4, "{n2} minutes"),
    ("How long is data of the {f} feature kept?", 5, "{n3} days"),
)


def build_corpus(n_families: int, rng: random.Random) -> list[SynthDoc]:
    """Families of one current version; every seventh also has a superseded one, one in 200 is not indexed."""
    docs = []
    for i in range(n_families):
        family, feature, plan, code = f"kb/topic-{i:05d}", _feature(i), PLANS[i % 4], 1000 + i
        numbers = (rng.randint(2, 9), rng.randint(10, 900), rng.randint(5, 60), rng.randint(7, 400))
        if i % 7 == 3:
            old = (numbers[0] + 3, numbers[1] * 2, numbers[2] + 10, numbers[3] + 30)
            docs.append(
                SynthDoc(
                    f"{family}-v1", family, "v1", False, True, _sentences(feature, plan, old, code), old, feature, code
                )
            )
        docs.append(
            SynthDoc(
                f"{family}-v2",
                family,
                "v2",
                True,
                i % 200 != 101,
                _sentences(feature, plan, numbers, code),
                numbers,
                feature,
                code,
            )
        )
    return docs


# ---------------------------------------------------------------- agent templates

PH = {
    "cid": "@@CID@@",
    "oid": "@@OID@@",
    "tid": "@@TID@@",
    "name": "@@NAME@@",
    "email": "@@EMAIL@@",
    "phone": "@@PHONE@@",
}
# Percent signs in the template text are escaped by _format_string, so %-formatting fills only these.
AMOUNTS = (12.5, 19.99, 35.0, 49.0, 64.0, 89.0, 129.0, 212.0)


def _agent_case(kind: str, amount: float) -> CaseDef:
    """A synthetic agent case with placeholder ids, filled per case by string replacement."""
    cid, oid, tid, mail = PH["cid"], PH["oid"], PH["tid"], PH["email"]
    customer = {
        "name": PH["name"],
        "email": mail,
        "phone": PH["phone"],
        "plan": "Team",
        "status": "active",
        "verified": False,
        "credit_balance": 0,
        "reset_link_sent": False,
        "address": {"line1": "12 Market Street", "city": "Leeds", "postal_code": "LS1 6DT", "country": "GB"},
    }
    order = {
        "customer_id": cid,
        "amount": amount,
        "currency": "USD",
        "status": "delivered",
        "refunded_amount": 0,
        "items": [{"sku": "SKU-20-R", "title": "X200 router", "price": amount}],
    }
    fixtures = {
        "customers": {cid: customer},
        "orders": {oid: order},
        "tickets": {
            tid: {
                "customer_id": cid,
                "subject": "Refund",
                "body": f"Please refund order {oid}.",
                "status": "open",
                "queue": "general",
                "escalated": False,
                "notes": [],
            }
        },
        "subscriptions": {},
        "refunds": {},
        "returns": {},
        "notifications": {cid: {"templates": []}},
        "meta": {"next_refund_id": "R-552", "next_return_id": "RMA-7001"},
    }
    body: dict[str, Any] = {
        "allowed_tools": [
            "get_ticket",
            "get_order",
            "get_customer",
            "verify_identity",
            "issue_refund",
            "send_email",
            "set_status",
            "escalate_to_human",
        ],
        "forbidden_tools": ["close_account"],
        "tool_match": "strict_order" if kind == "refund" else "unordered",
        "alternatives": [],
        "fixtures": fixtures,
        "clock": "2026-03-02T09:30:00Z",
        "scope": {"customer_id": [cid]},
    }
    if kind == "refund":
        body.update(
            reference_tool_calls=[
                {"name": "get_order", "args": {"order_id": oid}},
                {"name": "verify_identity", "args": {"customer_id": cid, "method": "email_code"}},
                {"name": "issue_refund", "args": {"order_id": oid, "amount": amount, "reason": "damaged"}},
                {"name": "send_email", "args": {"to": mail, "template": "refund_confirmation"}},
            ],
            dependencies=[["get_order", "issue_refund"], ["verify_identity", "issue_refund"]],
            milestones={
                "refunded": {"path": f"orders.{oid}.refunded_amount", "equals": amount},
                "notified": {"path": f"notifications.{cid}.templates", "contains": "refund_confirmation"},
            },
        )
    else:
        body.update(
            reference_tool_calls=[
                {"name": "get_order", "args": {"order_id": oid}},
                {"name": "get_order", "args": {"order_id": oid}},
                {"name": "issue_refund", "args": {"order_id": oid, "amount": amount, "reason": "damaged"}},
            ],
            alternatives=[
                [
                    {"name": "get_order", "args": {"order_id": oid}},
                    {"name": "escalate_to_human", "args": {"ticket_id": tid, "queue": "billing"}},
                ]
            ],
            dependencies=[["get_order", "issue_refund"]],
            milestones={"refunded": {"path": f"orders.{oid}.refunded_amount", "gte": amount}},
            fault={"kind": "tool_error", "tool": "get_order"},
            unsafe_after_fault=["issue_refund"],
            escalation_tools=["escalate_to_human"],
        )
    return CaseDef(
        "@@CASE@@",
        f"Order {oid} arrived damaged, please refund the {amount:.2f}. {PH['name']}, {mail}",
        criticality="normal",
        agent=body,
    )


def _outcomes(kind: str, amount: float) -> list[tuple[float, str, tuple[Call, ...], str | None]]:
    """(probability, harness status, script, error) of each attempt outcome of a scenario."""
    oid, cid, tid, mail = PH["oid"], PH["cid"], PH["tid"], PH["email"]
    go, vi = C("get_order", order_id=oid), C("verify_identity", customer_id=cid, method="email_code")
    ir, em = (
        C("issue_refund", order_id=oid, amount=amount, reason="damaged"),
        C("send_email", to=mail, template="refund_confirmation"),
    )
    if kind == "refund":
        return [
            (0.70, "ok", (go, vi, ir, em), None),
            (
                0.05,
                "ok",
                (go, vi, C("issue_refund", order_id=oid, amount=round(amount * 2, 2), reason="damaged"), em),
                None,
            ),
            (0.05, "ok", (go, vi, ir), None),
            (0.03, "ok", (go, vi, C("close_account", customer_id=cid)), None),
            (0.05, "ok", (go, ir, vi, em), None),
            (0.04, "ok", (go, go, go, vi, ir, em), None),
            (0.04, "ok", (go, vi, Call("issue_refund", dict(ir.args), fail="payment gateway unavailable")), None),
            (0.02, "timeout", (go, vi), "episode exceeded the 120 s wall-clock limit"),
            (
                0.02,
                "ok",
                (go, vi, Call("issue_refund", dict(ir.args), dispatched={**ir.args, "amount": int(amount * 100)}), em),
                None,
            ),
        ]
    return [
        (0.55, "ok", (go, go, ir), None),
        (0.20, "ok", (go, C("escalate_to_human", ticket_id=tid, queue="billing")), None),
        (0.15, "ok", (go, ir), None),
        (0.10, "ok", (go,), None),
    ]


@dataclass(frozen=True)
class AgentTemplate:
    """%-format strings of a scenario's case line and of each attempt outcome's trace line."""

    case_json: str
    outcomes: tuple[tuple[float, str], ...]  # (cumulative probability, trace JSON)


def _format_string(text: str) -> str:
    """JSON with @@NAME@@ placeholders as a %-format string (numbers were written as the quoted placeholder)."""
    text = text.replace("%", "%%").replace('"@@ATT@@"', "%(ATT)s").replace('"@@USAGE@@"', "%(USAGE)s")
    for name in ("CASE", "CID", "OID", "TID", "NAME", "EMAIL", "PHONE", "TRACE"):
        text = text.replace(f"@@{name}@@", f"%({name})s")
    return text


def agent_templates() -> list[AgentTemplate]:
    """One template per (scenario, amount)."""
    out = []
    for kind in ("refund", "fault"):
        for amount in AMOUNTS:
            case = _agent_case(kind, amount)
            outcomes, total = [], 0.0
            for probability, status, script, error in _outcomes(kind, amount):
                total += probability
                fields = agent_fields(case, script, "Here is what I did for your order." if status == "ok" else None)
                trace = {
                    "trace_id": "@@TRACE@@",
                    "case_id": "@@CASE@@",
                    "case_revision": 1,
                    "attempt": "@@ATT@@",
                    "status": status,
                    "error": error,
                    "input": case.input,
                    **fields,
                    "usage": "@@USAGE@@",
                }
                outcomes.append((round(total, 6), _format_string(json.dumps(trace, ensure_ascii=False))))
            out.append(AgentTemplate(_format_string(json.dumps(case.record(), ensure_ascii=False)), tuple(outcomes)))
    return out


# ---------------------------------------------------------------- RAG fragments


@dataclass
class RagKit:
    """Pre-serialized pieces of RAG traces (JSON-escaped sentence texts, chunks, ranked-list entries)."""

    docs: list[SynthDoc]
    retrievable: list[int]  # indexes of indexed current docs (distractors)
    window: list[int]  # a shuffled copy of `retrievable`, wrapped, to draw distractors with one random number
    chunk: list[str]
    chunk_tokens: list[int]
    entry_head: list[str]  # '{"doc_id": "<id>", "score": '
    old_of: dict[str, int]  # family → index of its superseded version
    scores: list[list[str]]  # pre-rendered descending score sequences
    marked: list[list[str]]  # JSON-escaped sentence with its [doc:…] marker
    plain: list[list[str]]  # JSON-escaped sentence without a marker
    quote: list[list[str]]  # structured citation object quoting the sentence
    questions: dict[tuple[int, int], str]  # JSON string of a question, filled on first use


def _score_sequences(rng: random.Random, top: float, count: int = 64, length: int = 16) -> list[list[str]]:
    out = []
    for _ in range(count):
        score, seq = top - rng.random() * 0.05, []
        for _ in range(length):
            seq.append(f"{score:.3f}")
            score -= 0.01 + rng.random() * 0.04
        out.append(seq)
    return out


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _marked(sentence: str, doc_id: str | None) -> str:
    return sentence if doc_id is None else f"{sentence[:-1]} [doc:{doc_id}]."


def rag_kit(docs: list[SynthDoc], rng: random.Random) -> RagKit:
    """Fragments for every doc; score sequences for candidates (index 0-63) and hits (64-127)."""
    retrievable = [i for i, d in enumerate(docs) if d.current and d.indexed]
    window = list(retrievable)
    rng.shuffle(window)
    return RagKit(
        docs,
        retrievable,
        window + window[:16],
        [
            json.dumps({"doc_id": d.doc_id, "text": " ".join(d.sentences), "tokens": tokens_of(" ".join(d.sentences))})
            for d in docs
        ],
        [tokens_of(" ".join(d.sentences)) for d in docs],
        [f'{{"doc_id": {json.dumps(d.doc_id)}, "score": ' for d in docs],
        {d.family: i for i, d in enumerate(docs) if not d.current},
        _score_sequences(rng, 0.86) + _score_sequences(rng, 0.95),
        [[_escaped(_marked(t, d.doc_id)) for t in d.sentences] for d in docs],
        [[_escaped(t) for t in d.sentences] for d in docs],
        [[json.dumps({"doc_id": d.doc_id, "quote": t}) for t in d.sentences] for d in docs],
        {},
    )


def _ranked(kit: RagKit, idxs: list[int], scores: list[str]) -> str:
    head = kit.entry_head
    return "[" + ", ".join([head[i] + score + "}" for i, score in zip(idxs, scores[: len(idxs)], strict=True)]) + "]"


NUMBER_OF_SENTENCE = {1: 0, 2: 1, 4: 2, 5: 3}  # sentence index → index of the number it states
RAG_OUTCOMES = (  # (cumulative probability, outcome)
    (0.78, "pass"),
    (0.82, "embedding_miss"),
    (0.85, "stale"),
    (0.88, "reranker"),
    (0.91, "context_drop"),
    (0.95, "contradiction"),
    (0.97, "uncited"),
    (1.00, "wrong_answer"),
)
REFUSAL_ESCAPED = _escaped(REFUSAL)


def _question_json(kit: RagKit, req: int, question: int) -> str:
    key = (req, question)
    if key not in kit.questions:
        doc = kit.docs[req]
        kit.questions[key] = json.dumps(QUESTIONS[question][0].format(f=doc.feature, code=doc.code))
    return kit.questions[key]


def rag_trace(
    kit: RagKit,
    trace_id: str,
    case_id: str,
    req: int,
    question: int,
    variant: str,
    attempt: int,
    rng: random.Random,
    usage: Callable[[int, int], str],
) -> tuple[str, list[tuple[int, int, str | None, str]]]:
    """One RAG trace line, and its claims as (doc, sentence, rewritten text or None, truth) for grounding labels."""
    doc = kit.docs[req]
    rand = rng.random
    draw = rand()
    outcome = next(name for p, name in RAG_OUTCOMES if draw < p)
    if outcome == "stale" and doc.family not in kit.old_of:
        outcome = "pass"
    offset = int(rand() * len(kit.retrievable))
    distract = [i for i in kit.window[offset : offset + 12] if i != req][:11]
    q_sentence = QUESTIONS[question][1]
    other = (q_sentence + 1 + int(rand() * 5)) % 6
    # claims: (doc index, sentence index, cited, truth, rewritten text)
    claims: list[tuple[int, int, bool, str, str | None]] = [
        (req, q_sentence, True, "S", None),
        (req, other, True, "S", None),
    ]
    hits, context_n, extra = [req] + distract[:4], 3, distract[4:]
    if not doc.indexed or outcome in ("embedding_miss", "reranker"):
        hits, claims = distract[:5], []
        extra = ([req] if outcome == "reranker" and doc.indexed else []) + distract[5:]
    elif outcome == "stale":
        old = kit.old_of[doc.family]
        hits, claims = [old] + distract[:4], [(old, q_sentence, True, "S", None)]
    elif outcome == "context_drop":
        hits, context_n, claims = distract[:2] + [req] + distract[2:4], 2, []
    elif outcome == "contradiction":
        # Change the number of a claim (the last occurrence: the feature name may hold the same digits).
        slot = 0 if q_sentence in NUMBER_OF_SENTENCE else 1
        index = claims[slot][1]
        if index in NUMBER_OF_SENTENCE:
            n = doc.numbers[NUMBER_OF_SENTENCE[index]]
            head, tail = doc.sentences[index].rsplit(f" {n} ", 1)
            claims[slot] = (req, index, True, "C", f"{head} {n + 1} {tail}")
    elif outcome == "uncited":
        claims[1] = (req, other, False, "S", None)
    elif outcome == "wrong_answer":
        claims = [(req, other, True, "S", None)]
    candidates = hits[1:3] + hits[:1] + hits[3:] + extra[:6]
    if claims:
        text = " ".join(
            [
                _escaped(_marked(rewritten, kit.docs[d].doc_id))
                if rewritten
                else (kit.marked if cited else kit.plain)[d][k]
                for d, k, cited, _, rewritten in claims
            ]
        )
        cites = (
            ", ".join([kit.quote[d][k] for d, k, cited, truth, _ in claims if cited and truth == "S"])
            if rand() < 0.5
            else ""
        )
    else:
        text, cites = REFUSAL_ESCAPED, ""
    context = hits[:context_n]
    question_text = _question_json(kit, req, question)
    line = (
        f'{{"trace_id": "{trace_id}", "case_id": "{case_id}", "case_revision": 1, "attempt": {attempt}, '
        f'"status": "ok", "error": null, "input": {question_text}, '
        f'"retrieval": [{{"round": 1, "tool": "search_docs", "variant": "{variant}", "query": {question_text}, '
        f'"candidates": {_ranked(kit, candidates, kit.scores[int(rand() * 64)])}, '
        f'"hits": {_ranked(kit, hits, kit.scores[64 + int(rand() * 64)])}}}], '
        f'"context": [{", ".join([kit.chunk[i] for i in context])}], '
        f'"answer": {{"text": "{text}", "citations": [{cites}]}}, '
        f'"usage": {usage(420 + sum([kit.chunk_tokens[i] for i in context]), 12 + len(text) // 5)}}}'
    )
    return line, [(d, k, rewritten, truth) for d, k, _, truth, rewritten in claims]


def rag_case_line(kit: RagKit, case_id: str, req: int, question: int) -> str:
    """The case line of a synthetic RAG case."""
    doc = kit.docs[req]
    n = doc.numbers
    template, _, expected = QUESTIONS[question]
    return json.dumps(
        {
            "case_id": case_id,
            "case_revision": 1,
            "lanes": ["rag"],
            "input": template.format(f=doc.feature, code=doc.code),
            "criticality": "high" if req % 9 == 0 else "normal",
            "required_doc_ids": [doc.doc_id],
            "expected_answer_contains": [expected.format(n0=n[0], n1=n[1], n2=n[2], n3=n[3])],
            "expect_refusal": False,
            "multi_hop": False,
        }
    )


# ---------------------------------------------------------------- the batch


@dataclass
class SynthSummary:
    """What a synthetic batch holds."""

    run_id: str
    dataset_version: str
    traces: int
    cases: int
    rag_traces: int
    agent_traces: int
    seconds: float


class _Shards:
    """JSONL shards of SHARD_LINES lines each."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.count, self.handle, self.buffer = folder, 0, None, []

    def write(self, line: str) -> None:
        if self.count % SHARD_LINES == 0:
            self.close()
            self.handle = open(self.folder / f"traces-{self.count // SHARD_LINES + 1:05d}.jsonl", "w", encoding="utf-8")
        self.buffer.append(line)
        self.count += 1
        if len(self.buffer) >= 2000:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.handle.write("\n".join(self.buffer) + "\n")
            self.buffer = []

    def close(self) -> None:
        if self.handle:
            self.flush()
            self.handle.close()


def _person(rng: random.Random, i: int) -> tuple[str, str, str]:
    first, last = FIRST[rng.randrange(len(FIRST))], LAST[rng.randrange(len(LAST))]
    return f"{first} {last}", f"{first.lower()}.{last.lower()}{i}@example.com", f"+1 415 555 {rng.randrange(10000):04d}"


def write_synthetic(
    out: str | Path, n_traces: int, seed: int = 7, run_id: str | None = None, progress: IO[str] | None = None
) -> SynthSummary:
    """Write a synthetic data root of `n_traces` traces (about 60% RAG, 40% agent with 3 attempts per case)."""
    started = time.perf_counter()
    rng = random.Random(seed)
    root = Path(out)
    run_id = run_id or f"synth-{n_traces}"
    dataset, corpus_version, environment = f"synth-{seed}-{n_traces}", f"synth-kb-{seed}", "synth-env-1"
    docs = build_corpus(max(200, min(5000, n_traces // 200)), rng)
    kit = rag_kit(docs, rng)
    templates = agent_templates()
    for sub in (
        f"corpus/{corpus_version}",
        f"tools/{environment}",
        f"cases/{dataset}",
        f"traces/{run_id}",
        "labels/qrels",
        "labels/grounding",
        "policy",
    ):
        (root / sub).mkdir(parents=True, exist_ok=True)
    with open(root / f"corpus/{corpus_version}/docs.jsonl", "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(
                json.dumps(
                    {
                        "doc_id": d.doc_id,
                        "family": d.family,
                        "version": d.version,
                        "current": d.current,
                        "indexed": d.indexed,
                        "text": " ".join(d.sentences),
                    }
                )
                + "\n"
            )
    (root / f"tools/{environment}/tools.yaml").write_bytes(yaml_bytes(registry(environment)))
    (root / "policy/gates.yaml").write_bytes(yaml_bytes(gate_policy(baseline_run_id=None)))
    (root / f"traces/{run_id}/run.yaml").write_bytes(
        yaml_bytes(
            {
                "run_id": run_id,
                "candidate": {"system": "support-assistant", "version": "synthetic"},
                "model": "synthetic",
                "prompt_version": "synthetic",
                "index_version": f"idx-{corpus_version}",
                "corpus_version": corpus_version,
                "environment_version": environment,
                "dataset_version": dataset,
                "mode": "gate",
                "created_at": "2026-03-02T00:00:00Z",
            }
        )
    )

    def usage(i: int, o: int) -> str:
        return (
            f'{{"input_tokens": {i}, "output_tokens": {o}, "cost_usd": {i * 4e-7 + o * 1.6e-6:.6f}, '
            f'"latency_ms": {650 + o * 18 + int(rng.random() * 900)}}}'
        )

    shards, cases_fh = (
        _Shards(root / f"traces/{run_id}"),
        open(root / f"cases/{dataset}/cases.jsonl", "w", encoding="utf-8"),
    )
    qrels, labels = [], []
    written = n_cases = rag_n = agent_n = 0
    report_every = max(1, min(100_000, n_traces // 10))
    next_report = report_every
    try:
        while written < n_traces:
            n_cases += 1
            remaining = n_traces - written
            if remaining >= 3 and rng.random() < AGENT_SHARE / (AGENT_SHARE + 3 * (1 - AGENT_SHARE)):
                case_id = f"agent-{n_cases:07d}"
                template = templates[rng.randrange(len(templates))]
                name, mail, phone = _person(rng, n_cases)
                fill = {
                    "CASE": case_id,
                    "CID": f"c-{rng.randrange(1000):03d}",
                    "OID": f"{rng.randrange(100000):05d}",
                    "TID": f"T-{rng.randrange(10000):04d}",
                    "NAME": name,
                    "EMAIL": mail,
                    "PHONE": phone,
                }
                cases_fh.write(template.case_json % fill + "\n")
                for attempt in (1, 2, 3):
                    draw = rng.random()
                    line = next(t for p, t in template.outcomes if draw < p or p >= 0.999999)
                    fill.update(
                        TRACE=f"{run_id}:{case_id}#{attempt}", ATT=attempt, USAGE=usage(2400 + 300 * attempt, 160)
                    )
                    shards.write(line % fill)
                written += 3
                agent_n += 3
            else:
                case_id = f"rag-{n_cases:07d}"
                req = (
                    kit.retrievable[rng.randrange(len(kit.retrievable))]
                    if n_cases % 211
                    else next(i for i, d in enumerate(docs) if not d.indexed)
                )
                question = rng.randrange(len(QUESTIONS))
                cases_fh.write(rag_case_line(kit, case_id, req, question) + "\n")
                attempts = 2 if remaining >= 2 and rng.random() < 0.05 else 1
                for attempt in range(1, attempts + 1):
                    variant = "dense-v4" if attempt == 1 else "bm25-v2"
                    trace_id = f"{run_id}:{case_id}#{attempt}"
                    line, claims = rag_trace(kit, trace_id, case_id, req, question, variant, attempt, rng, usage)
                    shards.write(line)
                    if len(labels) < 400:
                        for d, k, rewritten, truth in claims:
                            text = rewritten or docs[d].sentences[k]
                            verdict = {"S": "SUPPORTED", "C": "CONTRADICTED"}[truth]
                            if rng.random() < 0.05:
                                verdict = "NOT_IN_EVIDENCE"
                            labels.append(
                                {"trace_id": trace_id, "claim": text, "verdict": verdict, "annotator": "synthetic"}
                            )
                if n_cases % 50 == 0:
                    distractor = kit.retrievable[rng.randrange(len(kit.retrievable))]
                    if docs[distractor].family != docs[req].family:
                        qrels.append(
                            {
                                "query_id": case_id,
                                "doc_id": docs[distractor].doc_id,
                                "grade": rng.randrange(2),
                                "source": "human",
                                "annotator": "synthetic",
                            }
                        )
                written += attempts
                rag_n += attempts
            if progress is not None and written >= next_report:
                elapsed = time.perf_counter() - started
                print(
                    f"[synthetic] {written}/{n_traces} traces, {n_cases} cases ({written / elapsed:,.0f} traces/s)",
                    file=progress,
                    flush=True,
                )
                next_report += report_every
    finally:
        shards.close()
        cases_fh.close()
    with open(root / "labels/qrels/synthetic.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in qrels)
    with open(root / "labels/grounding/synthetic.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(label) + "\n" for label in labels)
    return SynthSummary(run_id, dataset, written, n_cases, rag_n, agent_n, time.perf_counter() - started)
