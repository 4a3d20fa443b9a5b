"""`eval-pipeline show` and the case pages: one case end to end from the scored sample, de-identified, fast."""

import argparse
import re
from collections import Counter

import polars as pl
import pytest

from eval_pipeline.cli.show import register
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.quality.contracts import check_no_personal_data
from eval_pipeline.reporting.case_pages import case_ids_worth_a_page, read_case_tables, write_case_pages
from eval_pipeline.reporting.case_story import (
    CASE_TABLES,
    RUN_TABLES,
    CaseTables,
    build_story,
    call_argument_diffs,
    case_page_html,
    case_story_text,
    field_diffs,
)


def show(scored, capsys, *argv):
    """(exit code, stdout, stderr) of `eval-pipeline show ARGV` against the scored sample."""
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers())
    args = parser.parse_args(["show", *argv, "--data", str(scored["data"]), "--warehouse", scored["warehouse"].root])
    code = args.handler(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def cells(html: str) -> str:
    """HTML with the attributes of table cells dropped (styling classes are render.py's business)."""
    return re.sub(r"<(td|th)\b[^>]*>", r"<\1>", html)


def planted_trace(planted, trace_id, lane=None):
    return next(t for t in planted["traces"] if t["trace_id"] == trace_id and (lane is None or t["lane"] == lane))


def test_agent_case_names_the_wrong_argument_with_both_values(scored, capsys, planted):
    assert planted_trace(planted, "cand-42:agent-009#1")["expected"] == "tool_arguments"
    code, out, err = show(scored, capsys, "agent-009", "--run", "cand-42")
    assert code == 0, err
    # reference issue_refund amount 10 (the 10.00 difference), the agent refunded the whole 89.00
    assert "issue_refund.amount: expected 10, got 89" in out
    assert "agent: FAIL at tool_arguments (owner: agent tool calling (argument construction))" in out
    assert "refund_amount: ✘ failed — orders.88180.refunded_amount equals 10 (final state: 89.0)" in out
    assert "reliability (agent): 0 of 3 complete attempts succeeded" in out and "flaky no" in out
    # three identical failures: told once, then referred to
    assert out.count("issue_refund.amount: expected 10, got 89") == 1
    assert "attempt 3 — cand-42:agent-009#3 (harness ok)\n  same stages, evidence and answer as attempt 1" in out
    # no --baseline: the policy's baseline_run_id (base-41) is scored and another run
    assert "against baseline base-41 (baseline → cand-42):" in out
    assert "agent tool_arguments: pass → fail  ✘ changed" in out and "args_valid_rate 1.0000 → 0.5000 (-0.5000)" in out
    assert "blocks gate agent_args_valid_rate (fail, owner agent-tools, against base-41)" in out


def test_type_error_in_an_argument_shows_json_types(scored, capsys):
    code, out, _ = show(scored, capsys, "agent-008", "--run", "cand-42")
    assert code == 0
    assert 'get_order.order_id: expected "88171", got 88171' in out
    assert "step 1 get_order: error — invalid arguments: order_id must be a string" in out


def test_rag_case_prints_each_unsupported_claim_with_verdict_and_quote(scored, capsys, planted):
    code, out, _ = show(scored, capsys, "rag-006", "--run", "cand-42")
    assert code == 0
    (claim,) = planted_trace(planted, "cand-42:rag-006#1")["claims"]
    assert claim["verdict"] == "CONTRADICTED"
    assert f'claim 0: CONTRADICTED (score 0.2143) "{claim["claim"]}"' in out
    assert 'evidence policy/shipping-2025: "Standard shipping takes 3 to 5 business days."' in out
    assert f"citation: {claim['citation_verdict']} → policy/shipping-2025" in out
    assert "rag: FAIL at grounding (owner: generation (prompt, model))" in out
    assert "answer checks: contains_all no (missing 3 to 5 business days)" in out

    code, out, _ = show(scored, capsys, "rag-035", "--run", "cand-42")
    planted_claims = planted_trace(planted, "cand-42:rag-035#1")["claims"]
    for index, claim in enumerate(planted_claims):
        assert f"claim {index}: {claim['verdict']} " in out and f'"{claim["claim"]}"' in out


def test_rag_031_against_its_baseline_and_the_gate_it_blocks(scored, capsys, planted):
    assert planted_trace(planted, "base-41:rag-031#1")["metrics"]["recall_at_10"] == 1.0
    assert planted_trace(planted, "cand-42:rag-031#1")["metrics"]["recall_at_10"] == 0.5
    recall_gate = next(g for g in planted["gates"]["results"] if g["name"] == "retrieval_recall_at_10")
    assert "rag-031" in recall_gate["blocking_cases"]
    code, out, _ = show(scored, capsys, "rag-031", "--run", "cand-42", "--baseline", "base-41")
    assert code == 0
    assert "    recall_at_10 1.0000 → 0.5000 (-0.5000)" in out
    assert (
        "blocks gate retrieval_recall_at_10 (fail, owner retrieval, against base-41): recall_at_10 dropped 11.11 "
        "points (allowed 2); this case: recall_at_10 1.0000 → 0.5000"
    ) in out
    # the ranked list against the qrels: the human-graded pooled doc is found, the seed doc is not
    assert "rank 1: kb/plans-2025  ✔ relevant (grade 2)" in out
    assert "rank 2: kb/sso-setup-2025  · not relevant (unjudged)" in out
    assert "✘ missed relevant policy/support-sla-2025 (grade 2, seed): never retrieved" in out
    assert "rag retrieval: pass → pass" in out and "context_recall 1.0000 → 0.5000" in out


def test_a_trace_id_shows_that_attempt_and_lists_the_others(scored, capsys):
    code, out, _ = show(scored, capsys, "cand-42:agent-009#2", "--run", "cand-42")
    assert code == 0
    assert "attempt 2 — cand-42:agent-009#2 (harness ok)" in out and "attempt 1 — " not in out
    assert "other attempts:\n  cand-42:agent-009#1: agent fail at tool_arguments\n  cand-42:agent-009#3:" in out
    assert "attempt 2: base-41:agent-009#2 → cand-42:agent-009#2" in out and "attempt 1: base-41" not in out

    code, out, _ = show(scored, capsys, "cand-42:both-001#2", "--run", "cand-42")
    assert code == 0
    assert "(harness error: sandbox crashed: connection reset by peer)" in out
    assert "rag: INCOMPLETE (owner: harness (evaluation infrastructure))" in out
    assert "agent: INCOMPLETE (owner: harness (evaluation infrastructure))" in out
    assert "missed relevant" not in out  # an attempt that never ran has no evidence to hold against it


def test_unknown_case_or_trace_exits_2_with_suggestions(scored, capsys):
    code, out, err = show(scored, capsys, "agent-0009", "--run", "cand-42")
    assert code == 2 and out == ""
    assert "case 'agent-0009' is not in run 'cand-42'; did you mean agent-009" in err
    code, out, err = show(scored, capsys, "cand-42:agent-009#7", "--run", "cand-42")
    assert code == 2 and "trace 'cand-42:agent-009#7' is not in run 'cand-42'; did you mean cand-42:agent-009#" in err


def test_unknown_run_or_baseline_exits_2(scored, capsys):
    code, out, err = show(scored, capsys, "agent-009", "--run", "cand-43")
    assert code == 2 and out == ""
    assert "run 'cand-43' has not been scored" in err and "did you mean cand-42" in err
    code, out, err = show(scored, capsys, "agent-009", "--run", "cand-42", "--baseline", "ghost")
    assert code == 2 and out == "" and "baseline run 'ghost' has not been scored" in err
    with pytest.raises(SystemExit) as exit_info:
        show(scored, capsys, "agent-009", "--run", "../cand-42")
    assert exit_info.value.code == 2


def test_html_page_has_claims_side_by_side_and_report_links(scored, capsys, tmp_path):
    page = tmp_path / "pages" / "rag-006.html"
    code, out, _ = show(scored, capsys, "rag-006", "--run", "cand-42", "--baseline", "base-41", "--html", str(page))
    assert code == 0 and f"wrote {page}" in out
    html = cells(page.read_text())
    assert html.startswith("<!doctype html>") and "</html>" in html
    for href in ("../rag.html", "../agent.html", "../gate.html"):
        assert f'href="{href}"' in html
    assert "<h3>Claims</h3>" in html and "CONTRADICTED</td>" in html
    assert "<td>Standard shipping takes 3 to 5 business days.</td>" in html
    assert "<h2>Against baseline base-41</h2>" in html and "<th>baseline base-41</th><th>this run cand-42</th>" in html
    assert "<td>grounding</td>" in html and "<h3>Metrics side by side</h3>" in html
    assert "<td>grounding_rate</td><td>1.0000</td><td>0.0000</td>" in html

    page = tmp_path / "rag-031.html"
    show(scored, capsys, "rag-031", "--run", "cand-42", "--baseline", "base-41", "--html", str(page))
    assert "<td>1</td><td>recall_at_10</td><td>1.0000</td><td>0.5000</td><td>-0.5000</td><td>yes</td>" in cells(
        page.read_text()
    )


def test_write_case_pages_writes_one_page_per_case_and_respects_the_limit(scored, tmp_path):
    warehouse = scored["warehouse"]
    cases = ["rag-031", "agent-009", "rag-006", "no-such-case"]
    uris = write_case_pages(warehouse, tmp_path, "cand-42", cases, baseline_run_id="base-41")
    assert [uri.rsplit("/", 1)[1] for uri in uris] == ["rag-031.html", "agent-009.html", "rag-006.html"]
    folder = tmp_path / "cand-42" / "cases"
    assert sorted(p.name for p in folder.iterdir()) == [
        ".published.json",
        "agent-009.html",
        "rag-006.html",
        "rag-031.html",
    ]
    assert "issue_refund.amount" in (folder / "agent-009.html").read_text()
    assert "Against baseline base-41" in (folder / "rag-031.html").read_text()

    limited = tmp_path / "limited"
    uris = write_case_pages(warehouse, str(limited), "cand-42", cases, limit=2)
    assert len(uris) == 2 and sorted(p.name for p in (limited / "cand-42" / "cases").iterdir()) == [
        ".published.json",
        "agent-009.html",
        "rag-031.html",
    ]
    assert "Against baseline" not in (limited / "cand-42" / "cases" / "rag-031.html").read_text()
    assert write_case_pages(warehouse, limited, "cand-42", cases, limit=0) == []
    with pytest.raises(LookupError):
        write_case_pages(warehouse, limited, "ghost", cases)


@pytest.fixture
def reads(monkeypatch):
    """Warehouse.read calls counted by (table, run_id)."""
    counts: Counter = Counter()
    original = Warehouse.read

    def counting(self, table, run_id=None, **kwargs):
        counts[(table, run_id)] += 1
        return original(self, table, run_id, **kwargs)

    monkeypatch.setattr(Warehouse, "read", counting)
    return counts


def test_pages_and_show_read_each_table_once(scored, capsys, tmp_path, reads):
    wanted = [*CASE_TABLES, *RUN_TABLES]
    write_case_pages(
        scored["warehouse"], tmp_path, "cand-42", ["rag-031", "agent-009", "both-001"], baseline_run_id="base-41"
    )
    for run in ("cand-42", "base-41"):
        assert {t: reads[(t, run)] for t in wanted} == dict.fromkeys(wanted, 1)
        assert reads[("run_manifest", run)] == 1
    reads.clear()
    show(scored, capsys, "rag-031", "--run", "cand-42", "--baseline", "base-41")
    # deid_traces and deid_cases are read twice in the run shown: their id columns first, to resolve the target
    assert {t: reads[(t, "cand-42")] for t in wanted} == {
        t: 2 if t in ("deid_traces", "deid_cases") else 1 for t in wanted
    }
    assert {t: reads[(t, "base-41")] for t in wanted} == dict.fromkeys(wanted, 1)


def _raw_personal_values(data) -> set[str]:
    """E-mails, phone numbers and people's names planted in the raw cases and traces."""
    files = [*data.glob("cases/**/*.yaml"), *data.glob("traces/**/*.jsonl")]
    text = "\n".join(p.read_text(errors="replace") for p in files)
    emails = set(re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", text))
    phones = set(re.findall(r"\+\d{1,3}(?: \d{1,5}){2,4}", text))
    names = set(re.findall(r"^\s*name: ([A-Z][a-z]+ [A-Z][a-z]+)$", text, flags=re.M))
    return emails | phones | names


def test_output_holds_no_raw_personal_data(scored, capsys, tmp_path):
    raw = _raw_personal_values(scored["data"])
    assert {"aisha.karimova@example.com", "+1 312 555 0176", "Aisha Karimova"} <= raw and len(raw) > 20
    outputs = []
    for case in ("agent-009", "agent-007", "both-001", "agent-014", "rag-031"):
        page = tmp_path / f"{case}.html"
        code, out, _ = show(scored, capsys, case, "--run", "cand-42", "--html", str(page))
        assert code == 0
        outputs += [out, page.read_text()]
    leaked = {value for value in raw for text in outputs if value in text}
    assert leaked == set()
    # the pseudonyms are there instead, and the residual scanners (both) find nothing
    assert "<EMAIL_" in outputs[2] and "<PERSON_" in outputs[0]  # agent-007 looks the customer up by e-mail
    verdict = check_no_personal_data("show", pl.DataFrame({"text": outputs}), independent=True)
    assert verdict.passed, verdict.description


def test_case_ids_worth_a_page_orders_by_priority(scored):
    warehouse = scored["warehouse"]
    gates, attribution = warehouse.read("gate_results", "cand-42"), warehouse.read("attribution", "cand-42")
    cases, review = warehouse.read("deid_cases", "cand-42"), warehouse.read("review_queue", "cand-42")
    by_lane = [attribution.filter(pl.col("lane") == lane) for lane in ("rag", "agent")]
    ids = case_ids_worth_a_page(gates, by_lane, review, 500, cases=cases)
    blocking = sorted(set(gates.filter(pl.col("status") == "fail")["blocking_cases"].explode().to_list()))
    # 30 planted cases and the ignored and broken counterfactuals (agent-019-cf, agent-020-cf)
    assert len(blocking) == 32 and "rag-031" in blocking  # rag-031 passes, yet blocks the recall gate
    # then the failed cases no gate blocks: agent-014 (high criticality, flaky), then agent-017 and rag-037; last the
    # incomplete ones no other group holds
    incomplete = sorted(
        set(attribution.filter(pl.col("outcome") == "incomplete")["case_id"].to_list())
        - {*blocking, "agent-014", "agent-017", "rag-037"}
    )
    assert ids == [*blocking, "agent-014", "agent-017", "rag-037", *incomplete]
    assert case_ids_worth_a_page(gates, by_lane, review, 3, cases=cases) == blocking[:3]

    review_queue = pl.DataFrame({"case_id": ["rag-050", "agent-009"]})
    attribution = pl.DataFrame(
        {"case_id": ["rag-002", "rag-001", "rag-009", "rag-005"], "outcome": ["fail", "fail", "incomplete", "fail"]}
    )
    criticality = pl.DataFrame({"case_id": ["rag-001", "rag-005"], "criticality": ["normal", "high"]})
    failed_gate = pl.DataFrame({"status": ["fail", "pass"], "blocking_cases": [["agent-009"], ["rag-002"]]})
    assert case_ids_worth_a_page(failed_gate, attribution, review_queue, 10, cases=criticality) == [
        "agent-009",
        "rag-005",
        "rag-001",
        "rag-002",
        "rag-050",
        "rag-009",
    ]


def test_argument_diffs_are_field_level_with_dotted_paths():
    assert field_diffs(
        {"a": {"b": 1, "c": "x"}, "l": [1, 2], "t": True, "n": 10},
        {"a": {"b": 2, "c": "x"}, "l": [1, 3], "t": 1, "n": 10.0, "extra": None},
    ) == [("a.b", "1", "2"), ("extra", "(absent)", "null"), ("l[1]", "2", "3"), ("t", "true", "1")]
    assert call_argument_diffs(
        'issue_refund({"amount":98,"order_id":"1"})', 'issue_refund({"amount":89,"order_id":"1"})'
    ) == [("issue_refund.amount", "98", "89")]
    assert call_argument_diffs("get_order({})", "get_ticket({})") == [
        ("get_ticket (tool)", '"get_order"', '"get_ticket"')
    ]
    # the scorer's value rules found a difference no value shows: the whole calls are given
    assert call_argument_diffs('f({"x":1})', 'f({"x":1.0})') == [("f (arguments)", 'f({"x":1})', 'f({"x":1.0})')]


def test_story_from_hand_made_frames_without_a_warehouse():
    cases = pl.DataFrame(
        {"case_id": ["a-1"], "lanes": [["agent"]], "input": ["refund order 7"], "criticality": ["high"]}
    )
    stages = pl.DataFrame(
        {
            "run_id": "r",
            "trace_id": "r:a-1#1",
            "case_id": "a-1",
            "attempt": 1,
            "lane": "agent",
            "stage": ["policy", "tool_arguments"],
            "stage_order": [0, 2],
            "status": ["pass", "fail"],
            "reason": [None, "bad amount"],
        }
    )
    diffs = pl.DataFrame(
        {
            "trace_id": ["r:a-1#1"],
            "case_id": ["a-1"],
            "position": [1],
            "match": ["args_differ"],
            "actual_call": ['refund({"amount":{"value":5}})'],
            "expected_call": ['refund({"amount":{"value":7}})'],
            "actual_status": ["ok"],
            "matched_path": ["reference"],
        }
    )
    tables = CaseTables("r", {"run_id": "r"}, {"deid_cases": cases, "stage_results": stages, "tool_call_diffs": diffs})
    story = build_story(tables, "a-1")
    text = case_story_text(story)
    assert "refund.amount.value: expected 7, got 5" in text
    assert "agent: FAIL at tool_arguments (owner: agent tool calling (argument construction))" in text
    assert "lanes: agent · criticality: high" in text
    assert "Wrong arguments" in case_page_html(story, build_story(CaseTables("b"), "a-1"))


def test_read_case_tables_reads_only_deidentified_tables(scored):
    tables = read_case_tables(scored["warehouse"], "cand-42", ["rag-031"])
    assert not any(name.startswith("_") for name in tables.frames)
    assert set(tables.frames["deid_traces"]["case_id"]) == {"rag-031"}
    assert set(tables.frames["qrels"]["query_id"]) == {"rag-031"}
    assert read_case_tables(scored["warehouse"], "ghost") is None


def test_a_trace_may_be_named_without_its_run_and_a_case_in_any_case(scored, capsys):
    import argparse

    from eval_pipeline.cli.show import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    for target in ("agent-009#2", "AGENT-009"):
        args = parser.parse_args(
            ["show", target, "--run", "cand-42", "--data", str(scored["data"]), "--warehouse", scored["warehouse"].root]
        )
        assert args.handler(args) == 0, target
        assert "case agent-009 in run cand-42" in capsys.readouterr().out


def test_the_default_baseline_is_the_one_gate_uses_the_runs_own_before_the_policys(
    scored, capsys, tmp_path, monkeypatch
):
    from eval_pipeline.gating import facts

    # a policy that names no baseline, and a run whose run.yaml names base-41:
    # `gate` compares with base-41, so does show
    data = tmp_path / "data"
    (data / "policy").mkdir(parents=True)
    policy = (scored["data"] / "policy" / "gates.yaml").read_text()
    (data / "policy" / "gates.yaml").write_text(policy.replace("baseline_run_id: base-41\n", ""))
    own = facts.manifest_from_warehouse

    def with_own_baseline(warehouse, run_id):
        manifest = own(warehouse, run_id)
        return {**manifest, "baseline_run_id": "base-41"} if run_id == "cand-42" else manifest

    monkeypatch.setattr(facts, "manifest_from_warehouse", with_own_baseline)
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["show", "rag-031", "--run", "cand-42", "--data", str(data), "--warehouse", scored["warehouse"].root]
    )
    assert args.handler(args) == 0
    assert "    recall_at_10 1.0000 → 0.5000 (-0.5000)" in capsys.readouterr().out
