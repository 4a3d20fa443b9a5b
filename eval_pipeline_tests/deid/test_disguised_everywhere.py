"""Issue 34 acceptance: personal data in every Unicode disguise, planted everywhere, survives in no spelling anywhere.

E-mails, phones, cards, IBANs and national ids in every Unicode disguise, planted in every text and id field of
traces, cases, corpus, qrels, grounding labels and run.yaml of a copy of the bundled sample whose run ids hold `token`
and `passwd`, survive in no spelling in any unrestricted table, report, case page, Dagster event, export file or
openai judge request; the run exits 0 with no privacy check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import dagster as dg
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.cli.exports import register
from eval_pipeline.deid.folding import fold_text
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline
from eval_pipeline_harness.loopback_server import LoopbackServer, canned_responder, quoting_responder, user_payload
from eval_pipeline_tests.fixtures.sample_runs import edit_jsonl, rename_in_inputs

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES = Path("cases") / "golden-2026.03"
# ordinary words that name secrets elsewhere, in both run ids (item 3 of the "Why")
RUNS = {"base-41": "passwd-base-41", "cand-42": "token-eval-42"}
BASE, CAND = RUNS["base-41"], RUNS["cand-42"]
DOC = "policy/refunds-2025"

FULL_WIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
DEVANAGARI = str.maketrans("0123456789", "०१२३४५६७८९")
DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def _inside(mark: str) -> Callable[[str], str]:
    return lambda v: v[: len(v) // 2] + mark + v[len(v) // 2 :]


# Every disguise of the issue; the e-mail-only ones apply to e-mails.
DISGUISES: dict[str, Callable[[str], str]] = {
    "full-width": lambda v: v.translate(FULL_WIDTH),
    "arabic-indic digits": lambda v: v.translate(ARABIC_INDIC),
    "devanagari digits": lambda v: v.translate(DEVANAGARI),
    "zero-width space": _inside("\u200b"),
    "zero-width joiner": _inside("\u200d"),
}
EMAIL_ONLY: dict[str, Callable[[str], str]] = {
    "IDN domain": lambda v: v.replace("@mail.example.org", "@bücher-straße.example"),
    "percent-encoded @": lambda v: v.replace("@", "%40"),
    "non-ASCII local part": lambda v: v.replace("mia", "josé.garcía", 1),
}
KINDS = ("email", "phone", "card", "iban", "national_id")


def _luhn(digits: str) -> str:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 == 0 else 1)
        total += n - 9 if n > 9 else n
    return digits + str((10 - total % 10) % 10)


def _iban(bban: str) -> str:
    check = 98 - int(bban + "131400") % 97  # DE = 13 14, check digits 00
    raw = f"DE{check:02d}{bban}"
    return " ".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def plain_value(kind: str, n: int) -> str:
    """A valid personal value of `kind`, distinct for each n, so a leak names the field it was planted in."""
    if kind == "email":
        return f"mia{n}.okafor@mail.example.org"
    if kind == "phone":
        return f"+44 20 7946 {n:04d}"
    if kind == "card":
        digits = _luhn(f"411111111111{n:03d}")
        return " ".join(digits[i : i + 4] for i in range(0, 16, 4))
    if kind == "iban":
        return _iban(f"37040044{n:010d}")
    digits = f"4829{n:04d}"
    return digits + DNI_LETTERS[int(digits) % 23]


def disguises_of(kind: str) -> list[str]:
    return [*DISGUISES, *(EMAIL_ONLY if kind == "email" else ())]


def disguise(kind: str, name: str, n: int) -> str:
    return {**DISGUISES, **EMAIL_ONLY}[name](plain_value(kind, n))


# Text fields carry one value of every kind; id fields one value (an id with five values is no id anybody writes).
TEXT_FIELDS = (
    "trace.input",
    "trace.answer",
    "trace.context",
    "trace.query",
    "trace.tool_args",
    "trace.tool_result",
    "case.input",
    "case.reference_answer",
    "corpus.text",
    "label.claim",
    "manifest.candidate",
    "manifest.model",
)
ID_FIELDS = (
    "trace.trace_id",
    "trace.hit_doc_id",
    "case.file_name",
    "case.case_id",
    "corpus.family",
    "corpus.doc_id",
    "qrels.annotator",
    "label.annotator",
)

pytestmark = pytest.mark.slow


class Plan:
    """Which disguised value goes where: (field, kind) -> (disguise name, value number)."""

    def __init__(self, choose: Callable[[str, str, int], str]) -> None:
        self.values: dict[tuple[str, str], tuple[str, int]] = {}
        n = 0
        for i, field in enumerate(TEXT_FIELDS + ID_FIELDS):
            kinds = KINDS if field in TEXT_FIELDS else (KINDS[i % len(KINDS)],)
            for kind in kinds:
                n += 1
                self.values[(field, kind)] = (choose(field, kind, n), n)

    def text(self, field: str) -> str:
        """The field's planted text: its values, separated as people write them."""
        return " / ".join(disguise(kind, name, n) for (f, kind), (name, n) in self.values.items() if f == field)

    def needles(self) -> dict[str, str]:
        """Every spelling that must not survive -> where it was planted: the disguised string, its folded form, the
        plain value and, for numbers, its digits only."""
        out = {}
        for (field, kind), (name, n) in self.values.items():
            disguised, plain = disguise(kind, name, n), plain_value(kind, n)
            for spelling in (
                disguised,
                fold_text(disguised),
                plain,
                re.sub(r"\D", "", plain) if kind != "email" else plain,
            ):
                out[spelling] = f"{field}:{kind}:{name}"
        return out


def rotation() -> Plan:
    """Each kind's disguises over the fields in turn, the kinds shifted apart: every (kind, disguise) pair is planted,
    and every disguise lands in each source."""
    turns = dict.fromkeys(KINDS, 0)

    def choose(field: str, kind: str, n: int) -> str:
        turns[kind] += 1
        return disguises_of(kind)[(turns[kind] + 2 * KINDS.index(kind)) % len(disguises_of(kind))]

    return Plan(choose)


def _rename_runs(root: Path) -> None:
    """base-41 and cand-42 renamed in every file and folder (trace ids, run.yaml, gate policy, labels)."""
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".yaml", ".json"):
            data = path.read_bytes()
            for old, new in RUNS.items():
                data = data.replace(old.encode(), new.encode())
            path.write_bytes(data)
    for old, new in RUNS.items():
        (root / "traces" / old).rename(root / "traces" / new)


def plant(root: Path, plan: Plan) -> None:
    """The plan's values into a copy of the sample whose runs are renamed."""
    _rename_runs(root)
    doc_id = f"policy/{plan.text('corpus.doc_id')}"
    rename_in_inputs(root, DOC, doc_id)

    def corpus(record):
        if record["doc_id"] == doc_id:
            record["text"] += f" Escalations: {plan.text('corpus.text')}."
        if record["doc_id"] == "policy/refunds-2024":
            record["family"] = plan.text("corpus.family")

    edit_jsonl(root / "corpus" / "kb-2026-03" / "docs.jsonl", corpus)
    seen = {"qrels": 0, "labels": 0}

    def qrels(record):
        if seen["qrels"] == 0:
            record["annotator"] = plan.text("qrels.annotator")
        seen["qrels"] += 1

    edit_jsonl(root / "labels" / "qrels" / "human-2026-03.jsonl", qrels)

    def labels(record):
        if seen["labels"] == 0:
            record["claim"] += f" Write to {plan.text('label.claim')}."
            record["annotator"] = plan.text("label.annotator")
        seen["labels"] += 1

    edit_jsonl(root / "labels" / "grounding" / "baseline-claims.jsonl", labels)
    case = yaml.safe_load((root / CASES / "rag-001.yaml").read_text())
    case["input"] += f" I am {plan.text('case.input')}."
    case["reference_answer"] += f" Contact {plan.text('case.reference_answer')}."
    (root / CASES / "rag-001.yaml").write_text(yaml.safe_dump(case, sort_keys=False, allow_unicode=True))
    shutil.move(root / CASES / "rag-002.yaml", root / CASES / f"{plan.text('case.file_name')}.yaml")
    broken = {"case_id": plan.text("case.case_id"), "case_revision": 1, "lanes": ["rag"], "input": "hello"}
    (root / CASES / "planted-id.yaml").write_text(yaml.safe_dump(broken, allow_unicode=True))
    manifest_path = root / "traces" / CAND / "run.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    manifest["candidate"]["system"] = plan.text("manifest.candidate")
    manifest["model"] = f"gpt-4.1 for {plan.text('manifest.model')}"
    manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True))

    def rag(record):
        if record["trace_id"] == f"{CAND}:rag-001#1":
            record["input"] += f" I am {plan.text('trace.input')}."
            record["answer"]["text"] += f" Reach me at {plan.text('trace.answer')}."
            record["context"][0]["text"] += f" Escalations: {plan.text('trace.context')}."
            record["retrieval"][0]["query"] += f" {plan.text('trace.query')}"
            record["retrieval"][0]["hits"].append({"doc_id": f"kb/{plan.text('trace.hit_doc_id')}", "score": 0.1})
        if record["trace_id"] == f"{CAND}:rag-003#1":
            record["trace_id"] = f"{CAND}:rag-003:{plan.text('trace.trace_id')}#1"

    edit_jsonl(root / "traces" / CAND / "rag.jsonl", rag)

    def agent(record):
        if record["trace_id"] == f"{CAND}:agent-002#1":
            step = next(s for s in record["steps"] if s.get("kind") == "tool_call")
            step["args"]["note"] = plan.text("trace.tool_args")
            step["result"] = {**(step.get("result") or {}), "contact": plan.text("trace.tool_result")}

    edit_jsonl(root / "traces" / CAND / "agent.jsonl", agent)


class Haystack:
    """Texts that must hold no planted spelling, each searched as written and folded."""

    def __init__(self, needles: dict[str, str]) -> None:
        self.needles = needles
        self.pattern = re.compile("|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True)))
        self.leaks: dict[str, set[str]] = {}

    def search(self, where: str, text: str) -> None:
        # as written, folded, and with the escapes of links (%xx) and HTML (&#64;) read back
        readings = {text, fold_text(text), fold_text(unquote(text)), fold_text(html.unescape(text))}
        found = {self.needles[m] for t in readings for m in self.pattern.findall(t)}
        if found:
            self.leaks.setdefault(where, set()).update(found)


def _respond(body: dict) -> dict:
    """Claims: SUPPORTED quoting the first evidence chunk (so quotes reach the claims table); pairs: a tie."""
    return canned_responder()(body) if "answer_a" in user_payload(body) else quoting_responder(body)


@contextlib.contextmanager
def _environment(**values: str):
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        yield


def evaluate(tmp: Path, plan: Plan, exports: bool) -> dict:
    """Plant the plan into a copy of the sample, run it with the openai judge against the loopback server, export
    every unrestricted table in every format; every place a planted value could reach, searched."""
    root = tmp / "data"
    shutil.copytree(REPO_ROOT / "data", root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    plant(root, plan)
    (tmp / "dagster").mkdir()
    with (
        LoopbackServer(_respond) as server,
        _environment(
            DAGSTER_HOME=str(tmp / "dagster"),
            LOOPBACK_JUDGE_KEY="sk-loopback",
            EVAL_PIPELINE_JUDGE_BACKEND="openai",
            EVAL_PIPELINE_JUDGE_MODEL="judge-model",
            EVAL_PIPELINE_JUDGE_BASE_URL=server.base_url,
            EVAL_PIPELINE_JUDGE_API_KEY_ENV="LOOPBACK_JUDGE_KEY",
        ),
    ):
        instance = dg.DagsterInstance.get()
        stream = io.StringIO()
        code = run_pipeline(
            data=str(root),
            warehouse=str(tmp / "wh"),
            reports=str(tmp / "reports"),
            deid_demo=True,
            quiet=True,
            instance=instance,
            stream=stream,
        )
        bodies = [json.dumps(r.body, ensure_ascii=False) for r in server.requests if r.body is not None]
        events = [str(e) for r in instance.get_runs() for e in instance.all_logs(r.run_id)]
        tables = sorted(p.name for p in (tmp / "wh").iterdir() if p.is_dir() and not p.name.startswith("_"))
        exported = _export_all(root, tmp, tables) if exports else {}
    hay = Haystack(plan.needles())
    warehouse = Warehouse.at(tmp / "wh")
    for table in tables:
        for run in (BASE, CAND):
            frame = warehouse.read(table, run)
            if frame is not None:
                hay.search(f"table {table}/{run}", json.dumps(frame.to_dicts(), default=str, ensure_ascii=False))
    reports = [p for p in (tmp / "reports").rglob("*") if p.is_file()]
    for path in reports:
        hay.search(f"report {path.relative_to(tmp)}", f"{path.relative_to(tmp)}\n{path.read_text()}")
    hay.search("run summary", stream.getvalue())
    for i, event in enumerate(events):
        hay.search(f"event {i}", event)
    for i, body in enumerate(bodies):
        hay.search(f"judge request {i}", body)
    with contextlib.closing(sqlite3.connect(root / ".judge_cache" / "verdicts.sqlite")) as cache:
        cached = cache.execute("SELECT * FROM verdicts").fetchall()
    hay.search("judge cache", json.dumps(cached, ensure_ascii=False))
    for name, (exit_code, text) in exported.items():
        hay.search(f"export {name} (exit {exit_code})", text)
    restricted = Haystack(plan.needles())
    raw = warehouse.read("traces", CAND, restricted=True)
    restricted.search("restricted traces", json.dumps(raw.to_dicts(), default=str, ensure_ascii=False))
    return {
        "code": code,
        "output": stream.getvalue(),
        "leaks": hay.leaks,
        "tables": tables,
        "reports": reports,
        "requests": len(bodies),
        "bodies": bodies,
        "cached": len(cached),
        "exports": exported,
        "restricted": restricted.leaks.get("restricted traces", set()),
        "warehouse": warehouse,
    }


FORMATS = ("csv", "jsonl", "parquet")


def _export_all(root: Path, tmp: Path, tables: list[str]) -> dict[str, tuple[int, str]]:
    """`export TABLE --format F --output FILE` of every table in every file format, and of the scores as langfuse and
    otlp objects: name -> (exit code, file text; parquet read back as JSON)."""
    import polars as pl

    out_dir = tmp / "exports"
    out_dir.mkdir()
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    jobs = [(t, f) for t in tables for f in FORMATS] + [("scores", "langfuse"), ("scores", "otlp")]
    exported = {}
    for table, fmt in jobs:
        target = out_dir / f"{table}.{fmt}"
        args = parser.parse_args(
            [
                "export",
                table,
                "--format",
                fmt,
                "--output",
                str(target),
                "--data",
                str(root),
                "--warehouse",
                str(tmp / "wh"),
            ]
        )
        with contextlib.redirect_stderr(io.StringIO()) as err:
            code = args.handler(args)
        if fmt == "parquet" and target.exists():
            text = json.dumps(pl.read_parquet(target).to_dicts(), default=str, ensure_ascii=False)
        else:
            text = target.read_text() if target.exists() else ""
        exported[f"{table}.{fmt}"] = (code, text + err.getvalue())
    return exported


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    return evaluate(tmp_path_factory.mktemp("disguised"), rotation(), exports=True)


def test_the_rotation_puts_every_disguise_in_every_source():
    plan = rotation()
    used = {(field.split(".")[0], name) for (field, _), (name, _) in plan.values.items()}
    assert {(kind, name) for (_, kind), (name, _) in plan.values.items()} == {
        (kind, name) for kind in KINDS for name in disguises_of(kind)
    }
    for source in ("trace", "case"):
        assert {name for s, name in used if s == source} >= set(DISGUISES), source
    assert len(plan.values) == len(TEXT_FIELDS) * len(KINDS) + len(ID_FIELDS)


def test_the_run_with_token_and_passwd_run_ids_exits_0_with_no_privacy_check_failed(rotated):
    assert rotated["code"] == 0, rotated["output"][-3000:]
    # no blocking check failed (a privacy check would be named "run R: asset.check failed: …"); the release is blocked,
    # as the sample's candidate is meant to be, and said as a result
    failed = [
        line
        for line in rotated["output"].splitlines()
        if line.startswith("run ") and " failed: " in line and not line.split(": ", 1)[1].startswith("Release blocked")
    ]
    assert failed == []
    assert f"run {CAND}: Release blocked: " in rotated["output"]
    assert "personal" not in rotated["output"] and "secret" not in rotated["output"].lower()
    assert rotated["warehouse"].runs("run_manifest") == sorted([BASE, CAND])


def test_the_search_can_fail_the_raw_restricted_traces_hold_the_planted_values(rotated):
    # every trace field's values (ids included) are in the restricted raw table in one spelling or another
    trace_fields = {f"{field}:{kind}" for field, kind in rotation().values if field.startswith("trace.")}
    found = {where.rsplit(":", 1)[0] for where in rotated["restricted"]}
    assert found >= trace_fields


def test_no_planted_value_reaches_a_table_report_event_summary_or_judge_request(rotated):
    assert {
        "deid_traces",
        "deid_cases",
        "deid_corpus",
        "claims",
        "qrels",
        "run_manifest",
        "trace_rejects",
        "input_rejects",
        "judge_verdicts",
    } <= set(rotated["tables"])
    assert len([p for p in rotated["reports"] if p.parent.name == "cases"]) >= 3
    # the openai judge was asked about the planted trace's answer (its values as pseudonyms) and the planted context
    assert rotated["requests"] >= 100
    planted = [b for b in rotated["bodies"] if "Reach me at <" in b]
    assert planted and all(b.count("<EMAIL_") + b.count("<PHONE_") >= 2 for b in planted)
    assert any("Escalations: <" in b for b in rotated["bodies"])
    assert rotated["cached"] >= 100
    manifest = rotated["warehouse"].read("run_manifest", CAND).row(0, named=True)
    assert manifest["candidate"].startswith("<") and manifest["model"].startswith("gpt-4.1 for <")
    assert {where: sorted(found) for where, found in rotated["leaks"].items() if not where.startswith("export")} == {}


def test_no_planted_value_reaches_an_export(rotated):
    exported = rotated["exports"]
    assert len(exported) == len(rotated["tables"]) * len(FORMATS) + 2
    assert {name: code for name, (code, _) in exported.items() if code != 0} == {}
    assert all(text for _, text in exported.values())
    assert {where: sorted(found) for where, found in rotated["leaks"].items() if where.startswith("export")} == {}


# One drawn assignment per run, whatever the profile: each example runs the whole pipeline and every export.
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(offsets=st.dictionaries(st.sampled_from(TEXT_FIELDS + ID_FIELDS), st.integers(0, 7)))
def test_a_drawn_assignment_of_disguises_to_fields_leaks_nowhere(tmp_path_factory, offsets):
    plan = Plan(lambda field, kind, n: disguises_of(kind)[(n + offsets.get(field, 0)) % len(disguises_of(kind))])
    result = evaluate(tmp_path_factory.mktemp("drawn"), plan, exports=False)
    assert result["code"] == 0, result["output"][-3000:]
    assert result["leaks"] == {}
