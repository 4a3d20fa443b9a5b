"""Measuring the detectors: a generated corpus with planted entities and decoys, span-level recall and precision,
and the same measurement for Microsoft Presidio's pattern recognizers run on a blank spaCy pipeline.

Presidio is a test- and benchmark-only dependency, imported only by `blank_presidio_analyzer`.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipeline.contracts.frames import TRACES_SCHEMA, empty
from eval_pipeline.deid.candidates import classify
from eval_pipeline.deid.detectors import (
    API_KEY,
    CARD,
    EMAIL,
    IBAN,
    IP,
    NATIONAL_ID,
    PERSON,
    PHONE,
    SECRET,
    URL,
    combined_pattern,
)
from eval_pipeline.deid.identifiers import IBAN_LENGTHS, luhn_valid
from eval_pipeline.deid.name_learning import collect_names
from eval_pipeline_harness.records import cases_frame_from_records

# Entity types both tools cover, and Presidio's names for them.
SHARED_TYPES = (EMAIL, PHONE, CARD, IBAN, NATIONAL_ID, IP)
PRESIDIO_TYPES = {
    "EMAIL_ADDRESS": EMAIL,
    "PHONE_NUMBER": PHONE,
    "CREDIT_CARD": CARD,
    "IBAN_CODE": IBAN,
    "US_SSN": NATIONAL_ID,
    "IP_ADDRESS": IP,
}

FIRST_NAMES = ("Mia", "Liam", "Olivia", "Noah", "Amara", "Mateo", "Sofia", "Yusuf", "Chloé", "Hiro", "Ines", "Kwame")
LAST_NAMES = ("Li", "Okafor", "García", "Smith", "Nakamura", "Kowalski", "Dubois", "Haddad", "O'Brien", "Novak")
DOMAINS = ("example.com", "mail.example.org", "corp.example.co.uk", "EXAMPLE.NET", "shop-example.io")


@dataclass(frozen=True)
class Planted:
    """One planted entity: its span in the document, its type and its text."""

    start: int
    end: int
    entity_type: str
    value: str


@dataclass(frozen=True)
class PlantedCorpus:
    """Documents with planted entities and decoys, plus the customer records the names come from."""

    texts: list[str]
    planted: list[list[Planted]]
    fixtures: dict[str, Any]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def luhn_complete(prefix: str) -> str:
    """`prefix` followed by the check digit that makes it pass Luhn."""
    return next(prefix + d for d in string.digits if luhn_valid(prefix + d))


def make_card(rng: random.Random, valid: bool = True) -> str:
    """A payment card number in a common layout (Visa/Mastercard 4x4, Amex 4-6-5); invalid ones fail Luhn."""
    kind = rng.choice(("visa", "mastercard", "amex"))
    if kind == "amex":
        number, layout = luhn_complete(rng.choice(("34", "37")) + _digits(rng, 12)), (4, 6, 5)
    else:
        prefix = "4" if kind == "visa" else rng.choice(("51", "55", "2221"))
        number, layout = luhn_complete(prefix + _digits(rng, 15 - len(prefix))), (4, 4, 4, 4)
    if not valid:
        number = number[:-1] + str((int(number[-1]) + 1) % 10)
    groups, pos = [], 0
    for size in layout:
        groups.append(number[pos : pos + size])
        pos += size
    return rng.choice((" ", "-", "")).join(groups)


def iban_check_digits(country: str, bban: str) -> str:
    """The two ISO 13616 check digits of an IBAN with this country and BBAN."""
    numeric = int("".join(str(int(ch, 36)) for ch in bban + country + "00"))
    return f"{98 - numeric % 97:02d}"


def make_iban(rng: random.Random, valid: bool = True) -> str:
    """An IBAN of a common country, grouped by four or compact; invalid ones fail mod 97."""
    country = rng.choice(("DE", "GB", "FR", "NL", "ES", "IT"))
    length = IBAN_LENGTHS[country]
    if country in ("GB", "NL"):
        bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + _digits(rng, length - 8)
    else:
        bban = _digits(rng, length - 4)
    check = iban_check_digits(country, bban)
    if not valid:
        check = f"{(int(check) + 1) % 97 or 2:02d}"
    compact = country + check + bban
    if rng.random() < 0.5:
        return compact
    return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))


def make_ssn(rng: random.Random) -> str:
    """A US SSN with valid area, group and serial, dashed, spaced or dotted."""
    area = rng.choice([a for a in range(1, 900) if a != 666])
    sep = rng.choice(("-", "-", " ", "."))
    return f"{area:03d}{sep}{rng.randint(1, 99):02d}{sep}{rng.randint(1, 9999):04d}"


def make_phone(rng: random.Random) -> str:
    """A phone number in a US, international or national layout of the regions Presidio validates by default."""
    area, exchange, line = rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)
    return rng.choice(
        (
            f"+1 {area}-{exchange}-{line:04d}",
            f"({area}) {exchange}-{line:04d}",
            f"{area}-{exchange}-{line:04d}",
            f"{area}.{exchange}.{line:04d}",
            f"+44 20 {_digits(rng, 4)} {_digits(rng, 4)}",
            f"+49 30 {_digits(rng, 8)}",
            f"+33 1 {' '.join(_digits(rng, 2) for _ in range(4))}",
            f"020 7{_digits(rng, 3)} {_digits(rng, 4)}",
            f"01 {' '.join(_digits(rng, 2) for _ in range(4))}",
            f"+91 9{_digits(rng, 4)} {_digits(rng, 5)}",
            f"+55 11 9{_digits(rng, 4)}-{_digits(rng, 4)}",
            f"(11) 9{_digits(rng, 4)}-{_digits(rng, 4)}",
            f"050-{_digits(rng, 3)}-{_digits(rng, 4)}",
            f"+972 50-{_digits(rng, 3)}-{_digits(rng, 4)}",
        )
    )


def make_ip(rng: random.Random) -> str:
    """An IPv4 or IPv6 address (full or compressed)."""
    if rng.random() < 0.6:
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    if rng.random() < 0.5:
        return "2001:db8::" + ":".join(groups[:2])
    return ":".join(groups)


def make_email(rng: random.Random, first: str, last: str) -> str:
    """An email address built from a person's name."""
    ascii_first = first.encode("ascii", "ignore").decode().lower() or "user"
    ascii_last = last.encode("ascii", "ignore").decode().lower().replace("'", "") or "name"
    local = rng.choice(
        (
            f"{ascii_first}.{ascii_last}",
            f"{ascii_first}_{ascii_last}+tickets",
            f"{ascii_first[0]}{ascii_last}{rng.randint(1, 99)}",
        )
    )
    return f"{local}@{rng.choice(DOMAINS)}"


def _token(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n)) + rng.choice(string.digits)


def make_api_key(rng: random.Random) -> str:
    """A vendor API key (OpenAI, AWS access key id, GitHub, Slack)."""
    alnum = string.ascii_letters + string.digits
    return rng.choice(
        (
            "sk-proj-" + _token(rng, alnum, 40),
            "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(15)) + "7",
            "ghp_" + _token(rng, alnum, 35),
            "xoxb-" + _digits(rng, 11) + "-" + _token(rng, alnum, 23),
        )
    )


# Decoys: ordinary identifiers, dates, amounts and near-misses that must not be flagged.
def make_decoys(rng: random.Random) -> list[str]:
    """Values a careless detector flags: ids, SKUs, error codes, dates, amounts, tokens, checksum failures."""
    return [
        f"order {rng.randint(10000, 99999)}",
        f"SKU-{rng.randint(10, 99)}-{rng.choice('ABCDEF')}",
        f"ERR-{rng.randint(1000, 9999)}",
        f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d} USD",
        f"policy/refunds-{rng.randint(2019, 2026)}",
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
        "<EMAIL_3f9a2c1d>",
        f"ticket T-{rng.randint(1000, 9999)}",
        f"card {make_card(rng, valid=False)}",
        f"IBAN {make_iban(rng, valid=False)}",
        f"{rng.randint(10, 99)} items",
    ]


SENTENCE_KINDS = 11


def planted_sentence(kind: int, rng: random.Random, first: str, last: str) -> list[tuple[str, str | None]]:
    """One sentence of kind 0-10 as pieces (text, planted entity type or None)."""
    alnum = string.ascii_letters + string.digits
    sentences: list[list[tuple[str, str | None]]] = [
        [
            ("Customer ", None),
            (f"{first} {last}", PERSON),
            (" wrote from ", None),
            (make_email(rng, first, last), EMAIL),
        ],
        [("Call back on ", None), (make_phone(rng), PHONE), (" after 5pm", None)],
        [("Card on file ", None), (make_card(rng), CARD), (" was charged", None)],
        [("Refund to IBAN ", None), (make_iban(rng), IBAN), (" please", None)],
        [("Verified SSN ", None), (make_ssn(rng), NATIONAL_ID), (" by phone", None)],
        [("Login seen from ", None), (make_ip(rng), IP), (" yesterday", None)],
        [("Leaked key ", None), (make_api_key(rng), API_KEY), (" in the ticket", None)],
        [("Header Authorization: Bearer ", None), (_token(rng, alnum, 30), SECRET), (" was pasted", None)],
        [("Config had password=", None), (_token(rng, alnum, 10), SECRET), (" inline", None)],
        [
            ("Webhook ", None),
            (f"https://svc:{_token(rng, alnum, 12)}@hooks.example.com/v1/notify", URL),
            (" fails", None),
        ],
        [("Hi ", None), (first, PERSON), (", thanks for waiting", None)],
    ]
    return sentences[kind] + [(". ", None)]


def planted_corpus(n_docs: int, seed: int = 7) -> PlantedCorpus:
    """Support-ticket style documents, each with 3-6 planted sentences of distinct kinds and two decoys after each."""
    rng = random.Random(seed)
    people = [(f, n) for f in FIRST_NAMES for n in LAST_NAMES]
    customers = {}
    texts: list[str] = []
    planted: list[list[Planted]] = []
    for i in range(n_docs):
        first, last = rng.choice(people)
        customers[f"c-{i}"] = {"first_name": first, "last_name": last, "full_name": f"{first} {last}"}
        pieces: list[tuple[str, str | None]] = []
        for kind in rng.sample(range(SENTENCE_KINDS), k=rng.randint(3, 6)):
            pieces += planted_sentence(kind, rng, first, last)
            pieces += [(f"Ref {decoy}. ", None) for decoy in rng.sample(make_decoys(rng), k=2)]
        text, spans = "", []
        for piece, entity_type in pieces:
            if entity_type is not None:
                spans.append(Planted(len(text), len(text) + len(piece), entity_type, piece))
            text += piece
        texts.append(text)
        planted.append(spans)
    return PlantedCorpus(texts, planted, {"customers": customers})


# ---------------------------------------------------------------- detections as spans


def our_spans(texts: Sequence[str], names: Iterable[str] = ()) -> list[list[Planted]]:
    """Our detections per text, found the production way: the combined regex in polars, classification in Python."""
    name_set = frozenset(names)
    sentinel = "\ufdd0"
    pattern = combined_pattern(person_words=bool(name_set))
    wrapped = pl.Series(list(texts), dtype=pl.String).str.replace_all(pattern, sentinel + "${0}" + sentinel)
    out: list[list[Planted]] = []
    for text in wrapped.to_list():
        spans, pos = [], 0
        for i, segment in enumerate(text.split(sentinel)):
            if i % 2 == 1:
                spans += [
                    Planted(pos + f.start, pos + f.end, f.entity_type, f.value) for f in classify(segment, name_set)
                ]
            pos += len(segment)
        out.append(spans)
    return out


def corpus_names(corpus: PlantedCorpus) -> list[str]:
    """The names de-identification collects from the corpus's customer records (a case's fixtures)."""
    cases = cases_frame_from_records([{"case_id": "records", "lanes": ["agent"], "fixtures": corpus.fixtures}])
    return collect_names(empty(TRACES_SCHEMA), cases)


def blank_presidio_analyzer() -> Any:
    """Presidio's AnalyzerEngine with its predefined recognizers over a blank spaCy English pipeline: no model is
    downloaded, so only pattern recognizers find anything (NER-based PERSON finds nothing)."""
    import spacy
    import tldextract
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    # Presidio's email validator calls tldextract, which would fetch the public suffix list over the network;
    # the snapshot bundled with tldextract is used instead.
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class BlankSpacyNlpEngine(SpacyNlpEngine):
        """SpacyNlpEngine over spacy.blank('en'): tokens for context words, no trained components."""

        def load(self) -> None:
            self.nlp = {"en": spacy.blank("en")}

    engine = BlankSpacyNlpEngine()
    engine.load()
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def presidio_spans(analyzer: Any, texts: Sequence[str]) -> list[list[Planted]]:
    """Presidio's detections per text, for the entity types both tools cover (default score threshold)."""
    entities = list(PRESIDIO_TYPES)
    return [
        [
            Planted(r.start, r.end, PRESIDIO_TYPES[r.entity_type], text[r.start : r.end])
            for r in analyzer.analyze(text=text, language="en", entities=entities)
        ]
        for text in texts
    ]


def _covered(planted: Planted, hits: Sequence[Planted]) -> bool:
    """True when detections cover every non-space character of the planted span (a name may be found word by word)."""
    covered = set()
    for h in hits:
        covered.update(range(max(h.start, planted.start), min(h.end, planted.end)))
    return all(i in covered for i, ch in enumerate(planted.value, start=planted.start) if not ch.isspace())


def score(
    planted: Sequence[Sequence[Planted]], detected: Sequence[Sequence[Planted]], tool: str, types: Iterable[str]
) -> pl.DataFrame:
    """Recall (planted spans whose characters detections of the same type cover) and precision (detections
    overlapping a planted span of their type) per entity type; null where a denominator is 0."""
    rows = []
    for entity_type in types:
        n_planted = found = n_detected = correct = 0
        for plants, hits in zip(planted, detected, strict=True):
            mine = [p for p in plants if p.entity_type == entity_type]
            theirs = [h for h in hits if h.entity_type == entity_type]
            n_planted += len(mine)
            n_detected += len(theirs)
            found += sum(_covered(p, theirs) for p in mine)
            correct += sum(any(h.start < p.end and p.start < h.end for p in mine) for h in theirs)
        rows.append(
            {
                "tool": tool,
                "entity_type": entity_type,
                "planted": n_planted,
                "detected": n_detected,
                "recall": found / n_planted if n_planted else None,
                "precision": correct / n_detected if n_detected else None,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "tool": pl.String,
            "entity_type": pl.String,
            "planted": pl.Int64,
            "detected": pl.Int64,
            "recall": pl.Float64,
            "precision": pl.Float64,
        },
    )


# ---------------------------------------------------------------- a synthetic run for throughput


_FILLER = (
    "Annual SMB plans can be refunded within 14 days of purchase. Monthly plans are not refundable after the "
    "first invoice. Refunds go back to the original payment method within 5-10 business days. "
)


def synthetic_run(n_traces: int, n_cases: int = 500, seed: int = 7) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(traces, cases, corpus) frames shaped like a real agent+RAG run: each trace carries personal data in its
    input, query, context, answer, tool arguments, results and final state, among ordinary ids and prose."""
    from eval_pipeline.contracts.frames import CORPUS_SCHEMA, canonical_json, cases_frame, traces_frame

    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits
    people = []
    for i in range(n_cases):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        people.append(
            {
                "id": f"c-{i}",
                "full_name": f"{first} {last}",
                "email": make_email(rng, first, last),
                "phone": make_phone(rng),
                "card": make_card(rng),
                "iban": make_iban(rng),
            }
        )
    cases = []
    for i, p in enumerate(people):
        order = str(10000 + i)
        cases.append(
            {
                "dataset_version": "bench",
                "case_id": f"case-{i:05d}",
                "case_revision": 1,
                "lanes": ["rag", "agent"],
                "input": f"Refund order {order} for {p['email']}",
                "criticality": "normal",
                "required_doc_ids": [f"policy/doc-{i % 200}"],
                "expected_answer_contains": ["14 days"],
                "reference_answer": "Annual SMB plans have a 14 day refund window.",
                "expect_refusal": False,
                "multi_hop": False,
                "allowed_tools": ["get_order", "issue_refund", "send_email"],
                "forbidden_tools": [],
                "reference_tool_calls": [
                    {"name": "get_order", "args_json": canonical_json({"order_id": order})},
                    {
                        "name": "send_email",
                        "args_json": canonical_json({"to": p["email"], "subject": f"Refund {order}"}),
                    },
                ],
                "tool_match": "strict_order",
                "alternatives": [],
                "dependencies": [["get_order", "send_email"]],
                "fixtures_json": canonical_json({"customers": {p["id"]: {k: v for k, v in p.items() if k != "id"}}}),
                "clock": "2026-03-01T12:00:00Z",
                "milestones": [
                    {"name": "notified", "path": f"notifications.{p['id']}.sent", "op": "equals", "value_json": "true"}
                ],
                "fault_kind": None,
                "fault_tool": None,
                "unsafe_after_fault": [],
                "escalation_tools": [],
                "scope_json": None,
                "source_file": "bench",
            }
        )
    traces = []
    for t in range(n_traces):
        i = t % n_cases
        p, order, doc = people[i], str(10000 + i), f"policy/doc-{i % 200}"
        ip = make_ip(rng)
        key = "sk-proj-" + _token(rng, alnum, 30)
        traces.append(
            {
                "run_id": "bench",
                "trace_id": f"bench:case-{i:05d}#{t}",
                "case_id": f"case-{i:05d}",
                "case_revision": 1,
                "attempt": t // n_cases + 1,
                "status": "ok",
                "error": None,
                "input": f"Refund order {order} for {p['email']}, I called from {p['phone']} twice.",
                "retrieval": [
                    {
                        "round": 1,
                        "tool": "search_docs",
                        "variant": "dense-v3",
                        "query": f"refund window order {order} SKU-88-B",
                        "candidates": [{"doc_id": doc, "score": 0.8}],
                        "hits": [{"doc_id": doc, "score": 0.9}],
                    }
                ],
                "context": [
                    {
                        "doc_id": doc,
                        "text": _FILLER * 2 + "Contact billing at billing@example.com, ref ERR-4412.",
                        "tokens": 180,
                    },
                    {
                        "doc_id": "faq/contact",
                        "text": _FILLER + "Our office hours are 9-17 CET on weekdays.",
                        "tokens": 90,
                    },
                ],
                "has_answer": True,
                "answer_text": f"Hi {p['full_name'].split()[0]}, your refund of 49.00 for order {order} was sent to "
                f"{p['email']} [doc:{doc}]. " + _FILLER,
                "answer_refused": False,
                "citations": [
                    {
                        "doc_id": doc,
                        "quote": "Annual SMB plans can be refunded within 14 days of purchase.",
                        "claim_index": 0,
                    }
                ],
                "steps": [
                    {
                        "index": 1,
                        "kind": "tool_call",
                        "tool": "get_order",
                        "args_json": canonical_json({"order_id": order}),
                        "status": "ok",
                        "result_json": canonical_json(
                            {
                                "order_id": order,
                                "amount": 49,
                                "customer": {
                                    "full_name": p["full_name"],
                                    "email": p["email"],
                                    "card": p["card"],
                                    "last_ip": ip,
                                },
                            }
                        ),
                        "error": None,
                        "state_diff_json": None,
                        "dispatched_tool": "get_order",
                        "dispatched_args_json": canonical_json({"order_id": order}),
                        "content": None,
                    },
                    {
                        "index": 2,
                        "kind": "tool_call",
                        "tool": "send_email",
                        "args_json": canonical_json({"to": p["email"], "subject": f"Refund {order}"}),
                        "status": "ok",
                        "result_json": canonical_json({"queued": True, "debug": f"api key {key}"}),
                        "error": None,
                        "state_diff_json": canonical_json(
                            [{"path": f"notifications.{p['id']}.sent", "before": None, "after": True}]
                        ),
                        "dispatched_tool": "send_email",
                        "dispatched_args_json": canonical_json({"to": p["email"], "subject": f"Refund {order}"}),
                        "content": None,
                    },
                    {
                        "index": 3,
                        "kind": "finish",
                        "tool": None,
                        "args_json": None,
                        "status": None,
                        "result_json": None,
                        "error": None,
                        "state_diff_json": None,
                        "dispatched_tool": None,
                        "dispatched_args_json": None,
                        "content": f"Refund issued for order {order}; receipt to {p['email']}.",
                    },
                ],
                "final_state_json": canonical_json({"notifications": {p["id"]: {"sent": True, "to": p["email"]}}}),
                "input_tokens": 1900,
                "output_tokens": 120,
                "cost_usd": 0.0042,
                "latency_ms": 2300.0,
                "source_file": "bench",
                "source_line": t + 1,
            }
        )
    corpus = pl.DataFrame(
        [
            {
                "corpus_version": "bench",
                "doc_id": f"policy/doc-{d}",
                "family": "policy",
                "version": "1",
                "current": True,
                "indexed": True,
                "text": _FILLER * 3
                + f"Escalations: {people[d % n_cases]['full_name']}, {people[d % n_cases]['phone']}.",
            }
            for d in range(200)
        ],
        schema=CORPUS_SCHEMA,
    )
    return traces_frame(traces), cases_frame(cases), corpus
