"""`eval-pipeline import otlp` against the pipeline run on what it imports (a benchmark, not a test).

    .venv/bin/python bench/bench_import.py --traces 100000 --out /tmp/bench_import

1. The harness's synthetic data root of N traces (`write_synthetic`: cases, corpus, tools and a native run) is kept
   under OUT/nN/data and reused; each native trace is then written as the OpenInference spans an instrumented app
   would emit, in OTLP/JSON, one ExportTraceServiceRequest of 512 spans a line (the SDK's batch span processor
   and the Collector's file exporter), files rotated at 256 MiB, so a trace's spans may span two lines or files.
   A RAG trace is a root CHAIN (input, answer, `metadata` {"case_id"}), per retrieval round a RETRIEVER (its
   candidates with their corpus text) with an EMBEDDING inside and a RERANKER (candidates in, hits out), a prompt
   template CHAIN, an LLM span (the context texts in the system message) and an output parser CHAIN: 7 spans.
   An agent trace is a LangGraph-like loop: per model turn an `agent` CHAIN holding an LLM span (the conversation
   so far in, one tool call or the answer out), per tool call a `tools` CHAIN holding a TOOL span (arguments in,
   result or error out): 1 + 4 per call + 2 spans. Tokens are split over a trace's LLM spans (the sums are the
   native usage), the root's duration is the native latency; spans are written children first, as they end.
2. `eval-pipeline import otlp` of the files into the data root as run `otlp-N` (golden cases of the synthetic
   dataset, its corpus and tool registry), in a child process: seconds and peak RSS (the child's rusage).
3. `eval-pipeline run` of the imported run, in a child process: seconds and peak RSS; and the floor, `orjson.loads`
   of every line of the OTLP files on one core.
Prints spans, file size, import seconds and spans/s, import peak RSS, pipeline seconds, the ratios import/pipeline
and import/floor, traces imported and rejected (with the reasons); OUT/nN/bench-import.json holds the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from eval_pipeline.exports.otel import BATCH_SPANS, attribute

KIND = "openinference.span.kind"
SCOPE = {"name": "openinference.instrumentation.langchain", "version": "0.1.0"}
RESOURCE = {"attributes": [attribute("service.name", "support-assistant")]}
ROTATE_BYTES = 256 << 20  # the Collector file exporter's rotation size in this bench
EPOCH_NS = 1_772_409_600_000_000_000  # 2026-03-02T00:00:00Z, the synthetic run's date
AGENT_SYSTEM = "You are a support agent. Use the tools to resolve the customer's request, then tell them what you did."
RAG_SYSTEM = "Answer the question from these documents only; say so when they do not hold the answer.\n\n"
SPAN_INTERNAL, STATUS_ERROR = 1, 2
DAGSTER_YAML = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\ntelemetry:\n  enabled: false\n"


class TraceSpans:
    """The spans of one trace under construction: ids, parents and times; `spans` in the order they end."""

    def __init__(self, native_id: str, start_ns: int, duration_ns: int) -> None:
        self.trace_id = hashlib.md5(native_id.encode()).hexdigest()
        self.start, self.duration = start_ns, max(duration_ns, 1_000_000)
        self.spans: list[dict[str, Any]] = []
        self.count = 0

    def span_id(self) -> str:
        self.count += 1
        return f"{self.trace_id[:12]}{self.count:04x}"

    def add(
        self,
        span_id: str,
        parent: str | None,
        name: str,
        window: tuple[float, float],
        attrs: dict[str, Any],
        error: str | None = None,
        error_type: str = "Exception",
    ) -> None:
        """A span over the fraction `window` of the trace's duration; None-valued attributes are left out; a span
        with an error gets status ERROR and an exception event of `error_type`."""
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "name": name,
            "kind": SPAN_INTERNAL,
            "startTimeUnixNano": str(self.start + int(window[0] * self.duration)),
            "endTimeUnixNano": str(self.start + int(window[1] * self.duration)),
            "attributes": [attribute(k, v) for k, v in attrs.items() if v is not None],
            "status": {},
        }
        if parent is not None:
            span["parentSpanId"] = parent
        if error is not None:
            span["status"] = {"code": STATUS_ERROR, "message": error}
            span["events"] = [
                {
                    "timeUnixNano": span["endTimeUnixNano"],
                    "name": "exception",
                    "attributes": [attribute("exception.type", error_type), attribute("exception.message", error)],
                }
            ]
        self.spans.append(span)


def _documents(prefix: str, ranked: list[dict[str, Any]], corpus: dict[str, str]) -> dict[str, Any]:
    """OpenInference's flattened document list: `<prefix>.K.document.{id,content,score}`."""
    attrs: dict[str, Any] = {}
    for k, doc in enumerate(ranked):
        attrs[f"{prefix}.{k}.document.id"] = doc["doc_id"]
        attrs[f"{prefix}.{k}.document.content"] = corpus.get(doc["doc_id"])
        attrs[f"{prefix}.{k}.document.score"] = float(doc["score"]) if doc.get("score") is not None else None
    return attrs


def _messages(prefix: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """OpenInference's flattened messages: role, content, tool calls (id, name, JSON arguments), tool_call_id."""
    attrs: dict[str, Any] = {}
    for k, message in enumerate(messages):
        head = f"{prefix}.{k}.message"
        attrs[f"{head}.role"] = message["role"]
        attrs[f"{head}.content"] = message.get("content")
        attrs[f"{head}.tool_call_id"] = message.get("tool_call_id")
        for j, call in enumerate(message.get("tool_calls", [])):
            attrs[f"{head}.tool_calls.{j}.tool_call.id"] = call["id"]
            attrs[f"{head}.tool_calls.{j}.tool_call.function.name"] = call["name"]
            attrs[f"{head}.tool_calls.{j}.tool_call.function.arguments"] = call["arguments"]
    return attrs


def _llm(
    tokens: tuple[int, int], cost: float | None, inputs: list[dict[str, Any]], output: dict[str, Any]
) -> dict[str, Any]:
    return {
        KIND: "LLM",
        "llm.model_name": "synthetic-model",
        **_messages("llm.input_messages", inputs),
        **_messages("llm.output_messages", [output]),
        "llm.token_count.prompt": tokens[0],
        "llm.token_count.completion": tokens[1],
        "llm.token_count.total": tokens[0] + tokens[1],
        "llm.cost.total": cost,
    }


def _root(trace: dict[str, Any], answer: str | None) -> dict[str, Any]:
    return {
        KIND: "CHAIN",
        "input.value": trace["input"],
        "output.value": answer,
        "metadata": json.dumps({"case_id": trace["case_id"]}),
    }


def _root_error(trace: dict[str, Any]) -> tuple[str | None, str]:
    """(the root's error message or None, its exception type)."""
    error = None if trace["status"] == "ok" else (trace.get("error") or trace["status"])
    return error, "TimeoutError" if trace["status"] == "timeout" else "Exception"


def _split(total: int, parts: int) -> list[int]:
    """`total` in `parts` integers that sum to it (the remainder on the last)."""
    return [total // parts] * (parts - 1) + [total - total // parts * (parts - 1)]


def rag_spans(trace: dict[str, Any], corpus: dict[str, str], out: TraceSpans) -> None:
    """A RAG chain's spans (see the module docstring)."""
    usage, answer = trace.get("usage") or {}, (trace.get("answer") or {}).get("text")
    root = out.span_id()
    rounds = trace.get("retrieval") or []
    slot = 0.5 / max(1, len(rounds))
    for n, r in enumerate(rounds):
        at = n * slot
        retriever, embedding = out.span_id(), out.span_id()
        out.add(
            embedding,
            retriever,
            "OpenAIEmbeddings",
            (at + 0.01, at + 0.1 * slot),
            {
                KIND: "EMBEDDING",
                "embedding.model_name": "synthetic-embedding",
                "embedding.embeddings.0.embedding.text": r["query"],
            },
        )
        found = r["candidates"] if r.get("candidates") is not None else r["hits"]
        out.add(
            retriever,
            root,
            r.get("tool") or "retriever",
            (at + 0.01, at + 0.6 * slot),
            {KIND: "RETRIEVER", "input.value": r["query"], **_documents("retrieval.documents", found, corpus)},
        )
        if r.get("candidates") is not None:
            out.add(
                out.span_id(),
                root,
                "CrossEncoderReranker",
                (at + 0.6 * slot, at + 0.95 * slot),
                {
                    KIND: "RERANKER",
                    "reranker.query": r["query"],
                    "reranker.model_name": "synthetic-reranker",
                    "reranker.top_k": len(r["hits"]),
                    **_documents("reranker.input_documents", r["candidates"], corpus),
                    **_documents("reranker.output_documents", r["hits"], corpus),
                },
            )
    context = "\n\n".join(c["text"] for c in trace.get("context") or [])
    out.add(
        out.span_id(),
        root,
        "ChatPromptTemplate",
        (0.5, 0.51),
        {KIND: "CHAIN", "input.value": json.dumps({"question": trace["input"]})},
    )
    inputs = [{"role": "system", "content": RAG_SYSTEM + context}, {"role": "user", "content": trace["input"]}]
    out.add(
        out.span_id(),
        root,
        "ChatOpenAI",
        (0.51, 0.98),
        _llm(
            (usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
            usage.get("cost_usd"),
            inputs,
            {"role": "assistant", "content": answer},
        ),
    )
    out.add(out.span_id(), root, "StrOutputParser", (0.98, 0.99), {KIND: "CHAIN", "output.value": answer})
    out.add(root, None, "RetrievalQA", (0.0, 1.0), _root(trace, answer), *_root_error(trace))


def agent_spans(trace: dict[str, Any], out: TraceSpans) -> None:
    """A tool-calling agent's spans, one model turn per tool call and a last turn for the answer."""
    usage = trace.get("usage") or {}
    calls = [s for s in trace.get("steps") or [] if s["kind"] == "tool_call"]
    answer = next(
        (s.get("content") for s in reversed(trace.get("steps") or []) if s["kind"] in ("finish", "message")), None
    )
    turns = len(calls) + 1
    prompt, completion = _split(usage.get("input_tokens", 0), turns), _split(usage.get("output_tokens", 0), turns)
    root, slot = out.span_id(), 1.0 / turns
    conversation: list[dict[str, Any]] = [
        {"role": "system", "content": AGENT_SYSTEM},
        {"role": "user", "content": trace["input"]},
    ]
    for turn in range(turns):
        at = turn * slot
        node, llm = out.span_id(), out.span_id()
        step = calls[turn] if turn < len(calls) else None
        if step is not None:
            asked = step.get("dispatched") or {"tool": step["tool"], "args": step["args"]}
            call = {"id": f"call_{turn + 1}", "name": asked["tool"], "arguments": json.dumps(asked["args"])}
            output = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            output = {"role": "assistant", "content": answer}
        cost = usage.get("cost_usd") if step is None else None
        out.add(
            llm,
            node,
            "ChatOpenAI",
            (at + 0.01 * slot, at + 0.45 * slot),
            _llm((prompt[turn], completion[turn]), cost, conversation, output),
        )
        out.add(node, root, "agent", (at, at + 0.5 * slot), {KIND: "CHAIN"})
        if step is None:
            break
        result = None if step["status"] == "error" else json.dumps(step.get("result"))
        tools, tool = out.span_id(), out.span_id()
        out.add(
            tool,
            tools,
            step["tool"],
            (at + 0.55 * slot, at + 0.95 * slot),
            {
                KIND: "TOOL",
                "tool.name": step["tool"],
                "tool_call.id": call["id"],
                "input.value": json.dumps(step["args"]),
                "output.value": result,
            },
            (step.get("error") or "the tool failed") if step["status"] == "error" else None,
            "ToolException",
        )
        out.add(tools, root, "tools", (at + 0.5 * slot, at + slot), {KIND: "CHAIN"})
        conversation = [
            *conversation,
            output,
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": result if result is not None else f"Error: {step.get('error')}",
            },
        ]
    out.add(root, None, "LangGraph", (0.0, 1.0), _root(trace, answer), *_root_error(trace))


def trace_spans(trace: dict[str, Any], index: int, corpus: dict[str, str]) -> list[dict[str, Any]]:
    """The OpenInference spans of one native trace, the `index`-th of the run.

    It starts a second after the one before.
    """
    latency = (trace.get("usage") or {}).get("latency_ms") or 1000
    out = TraceSpans(trace["trace_id"], EPOCH_NS + index * 1_000_000_000, int(latency * 1_000_000))
    if trace.get("retrieval") is not None:
        rag_spans(trace, corpus, out)
    else:
        agent_spans(trace, out)
    return out.spans


class OtlpFiles:
    """OTLP/JSON lines of BATCH_SPANS spans each, in files rotated at ROTATE_BYTES."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.pending, self.files, self.handle = folder, [], [], None
        self.spans = self.bytes = self.size = 0

    def add(self, spans: list[dict[str, Any]]) -> None:
        self.pending += spans
        while len(self.pending) >= BATCH_SPANS:
            self._line(self.pending[:BATCH_SPANS])
            del self.pending[:BATCH_SPANS]

    def _line(self, spans: list[dict[str, Any]]) -> None:
        if self.handle is None or self.size >= ROTATE_BYTES:
            self._close_file()
            self.files.append(self.folder / f"spans-{len(self.files) + 1:05d}.jsonl")
            # held open across calls until the file rotates or close(): no with-block fits
            self.handle, self.size = open(self.files[-1], "wb"), 0  # noqa: SIM115
        request = {"resourceSpans": [{"resource": RESOURCE, "scopeSpans": [{"scope": SCOPE, "spans": spans}]}]}
        line = orjson.dumps(request) + b"\n"
        self.handle.write(line)
        self.size += len(line)
        self.bytes += len(line)
        self.spans += len(spans)

    def close(self) -> None:
        if self.pending:
            self._line(self.pending)
            self.pending = []
        self._close_file()

    def _close_file(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def native_traces(data: Path, run_id: str) -> Iterator[dict[str, Any]]:
    for path in sorted((data / "traces" / run_id).glob("*.jsonl")):
        with path.open("rb") as handle:
            yield from map(orjson.loads, handle)


@dataclass
class Source:
    """A generated data root and the OTLP files of its native run."""

    data: str
    otlp: str
    native_run: str
    dataset_version: str
    corpus_version: str
    environment_version: str
    traces: int
    spans: int
    files: int
    bytes: int
    seconds: float


def generate(n: int, seed: int, out: Path) -> Source:
    """The synthetic data root of n traces (reused when present) and its native run as OpenInference OTLP/JSON."""
    from eval_pipeline_harness.sample_data.synthetic import write_synthetic

    data, otlp, marker = out / "data", out / "otlp", out / "otlp.json"
    if marker.exists():
        return Source(**json.loads(marker.read_text()))
    started = time.perf_counter()
    if data.exists():
        shutil.rmtree(data)
    summary = write_synthetic(data, n, seed=seed, progress=sys.stderr)
    manifest = yaml.safe_load((data / "traces" / summary.run_id / "run.yaml").read_text())
    with open(data / "corpus" / manifest["corpus_version"] / "docs.jsonl", "rb") as handle:
        corpus = {doc["doc_id"]: doc["text"] for doc in map(orjson.loads, handle)}
    shutil.rmtree(otlp, ignore_errors=True)
    otlp.mkdir(parents=True)
    files, traces = OtlpFiles(otlp), 0
    for index, trace in enumerate(native_traces(data, summary.run_id)):
        files.add(trace_spans(trace, index, corpus))
        traces += 1
    files.close()
    source = Source(
        str(data),
        str(otlp),
        summary.run_id,
        manifest["dataset_version"],
        manifest["corpus_version"],
        manifest["environment_version"],
        traces,
        files.spans,
        len(files.files),
        files.bytes,
        round(time.perf_counter() - started, 2),
    )
    marker.write_text(json.dumps(asdict(source), indent=2))
    return source


def timed(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float, float, float]:
    """(exit status, wall seconds, CPU seconds, peak RSS MiB) of a child process, from its own rusage (the child and
    the processes it waited for): CPU seconds tell more than wall time when other work shares the machine."""
    started = time.perf_counter()
    with log.open("wb") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def decode_floor(files: list[Path]) -> tuple[float, float]:
    """(wall, CPU) seconds to read and `orjson.loads` every line of the files, on one core."""
    started, cpu = time.perf_counter(), time.process_time()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                orjson.loads(line)
    return time.perf_counter() - started, time.process_time() - cpu


def imported(data: Path, run_id: str) -> tuple[int, int, Counter[str]]:
    """(traces written, rejects, reject reasons by count) of an imported run."""
    folder = data / "traces" / run_id
    traces = sum(1 for path in folder.glob("*.jsonl") for _ in path.open("rb"))
    rejects_file = folder / "import_rejects.json"
    rejects = json.loads(rejects_file.read_text()) if rejects_file.exists() else []
    return traces, len(rejects), Counter(r.get("reason", "?") for r in rejects)


def measure(n: int, seed: int, out: Path, *, pipeline: bool = True) -> dict[str, Any]:
    """Generate (or reuse), import, run the pipeline on the imported run, and the decode floor: one result dict."""
    source = generate(n, seed, out)
    data, run_id, work = Path(source.data), f"otlp-{n}", out / "work"
    for stale in (data / "traces" / run_id, work):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in (data / "corpus").glob(f"*-{run_id}"):
        shutil.rmtree(stale)
    (work / "dagster").mkdir(parents=True)
    # a Dagster instance of its own, so the bench leaves the project's .dagster alone
    (work / "dagster" / "dagster.yaml").write_text(DAGSTER_YAML)
    cli = str(Path(sys.executable).with_name("eval-pipeline"))
    print(
        f"bench_import: {source.traces:,} traces, {source.spans:,} spans in {source.files} files "
        f"({source.bytes / 2**20:,.1f} MiB); importing ...",
        file=sys.stderr,
    )
    rc, seconds, cpu, peak = timed(
        [
            cli,
            "import",
            "otlp",
            source.otlp,
            "--run",
            run_id,
            "--data",
            source.data,
            "--dataset-version",
            source.dataset_version,
            "--corpus-version",
            source.corpus_version,
            "--environment-version",
            source.environment_version,
            "--force",
        ],
        work / "import.log",
    )
    traces, rejects, reasons = imported(data, run_id)
    result: dict[str, Any] = {
        "traces": source.traces,
        "spans": source.spans,
        "files": source.files,
        "mib": round(source.bytes / 2**20, 1),
        "generate_seconds": source.seconds,
        "import_exit": rc,
        "import_seconds": round(seconds, 2),
        "import_cpu_seconds": round(cpu, 2),
        "spans_per_second": round(source.spans / seconds),
        "import_peak_rss_mib": round(peak, 1),
        "imported": traces,
        "rejected": rejects,
        "reject_reasons": dict(reasons.most_common(5)),
    }
    print(f"bench_import: imported in {seconds:.1f} s; decode floor ...", file=sys.stderr)
    floor, floor_cpu = decode_floor(sorted(Path(source.otlp).glob("*.jsonl")))
    result.update(
        decode_floor_seconds=round(floor, 2),
        decode_floor_cpu_seconds=round(floor_cpu, 2),
        import_over_floor=round(seconds / floor, 2),
        import_over_floor_cpu=round(cpu / floor_cpu, 2),
    )
    if pipeline:
        print("bench_import: pipeline run on the imported run ...", file=sys.stderr)
        rc, seconds, cpu, peak = timed(
            [
                cli,
                "run",
                "--data",
                source.data,
                "--run",
                run_id,
                "--warehouse",
                str(work / "warehouse"),
                "--reports",
                str(work / "reports"),
                "--deid-demo",
                "--quiet",
            ],
            work / "pipeline.log",
            {"DAGSTER_HOME": str(work / "dagster")},
        )
        result.update(
            pipeline_exit=rc,
            pipeline_seconds=round(seconds, 2),
            pipeline_cpu_seconds=round(cpu, 2),
            pipeline_peak_rss_mib=round(peak, 1),
            import_over_pipeline=round(result["import_seconds"] / seconds, 3),
            import_over_pipeline_cpu=round(result["import_cpu_seconds"] / cpu, 3),
        )
    return result


def report(r: dict[str, Any]) -> str:
    """The result as the lines the doc quotes."""
    lines = [
        (
            f"spans                {r['spans']:,} ({r['spans'] / r['traces']:.1f} a trace, "
            f"{r['files']} files, {r['mib']:,.1f} MiB)"
        ),
        (
            f"import               {r['import_seconds']:.1f} s ({r['import_cpu_seconds']:.1f} s CPU), "
            f"{r['spans_per_second']:,} spans/s, peak RSS {r['import_peak_rss_mib']:,.0f} MiB (exit {r['import_exit']})"
        ),
        f"traces               {r['imported']:,} imported, {r['rejected']:,} rejected of {r['traces']:,}",
        (
            f"decode floor         {r['decode_floor_seconds']:.1f} s ({r['decode_floor_cpu_seconds']:.1f} s CPU); "
            "import/floor "
            f"{r['import_over_floor']:.1f}x ({r['import_over_floor_cpu']:.1f}x in CPU)"
        ),
    ]
    lines += [f"  reject: {count} x {reason[:200]}" for reason, count in r["reject_reasons"].items()]
    if "pipeline_seconds" in r:
        lines.append(
            f"pipeline             {r['pipeline_seconds']:.1f} s ({r['pipeline_cpu_seconds']:.1f} s CPU), peak RSS "
            f"{r['pipeline_peak_rss_mib']:,.0f} MiB (exit {r['pipeline_exit']})"
        )
        lines.append(
            f"import / pipeline    {r['import_over_pipeline']:.2f} ({r['import_over_pipeline_cpu']:.2f} in CPU)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, required=True, metavar="N")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_import"), help="kept: OUT/nN/{data,otlp,work}")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-pipeline", action="store_true", help="generate, import and decode only")
    args = parser.parse_args(argv)
    out = args.out / f"n{args.traces}"
    result = measure(args.traces, args.seed, out, pipeline=not args.no_pipeline)
    (out / "bench-import.json").write_text(json.dumps(result, indent=2))
    print(report(result))
    print(json.dumps(result))
    return (
        0 if result["import_exit"] == 0 and result["rejected"] == 0 and result.get("pipeline_exit", 0) in (0, 1) else 1
    )


if __name__ == "__main__":
    raise SystemExit(main())
