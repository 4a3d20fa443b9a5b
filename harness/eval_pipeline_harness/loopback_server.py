"""A small OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks of the openai judge backend.

It answers chat completions from a responder (canned answers), can be told to fail the next requests
(any HTTP error such as 429 with Retry-After or 500, a reply slower than the client's timeout, malformed JSON,
a reply that breaks the schema), adds a fixed latency to every completion, records every request with its arrival time,
and implements the files and batches endpoints well enough for the Batch API mode. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Responder = Callable[[dict[str, Any]], "dict[str, Any] | str"]


@dataclass(frozen=True)
class Fault:
    """A failure served instead of (or before) the next chat completion.

    kind: `http` (an error reply with `status`, and a Retry-After header when `retry_after` is set), `timeout`
    (the reply waits `delay_s` first), `malformed` (content that is not JSON), `bad_schema` (JSON with an
    invalid verdict).
    """

    kind: str
    status: int = 500
    retry_after: float | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    body: dict[str, Any] | None
    received_at: float
    status: int


def user_payload(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON object of the last user message of a chat request ({} when it is not JSON)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            try:
                value = json.loads(message.get("content") or "")
            except json.JSONDecodeError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def canned_responder(
    verdicts: dict[str, dict[str, Any]] | None = None, preferences: dict[str, str] | None = None
) -> Responder:
    """A responder answering claims from `verdicts` (claim text → reply object) and pairs from `preferences`.

    An unknown claim is NOT_IN_EVIDENCE with no quote; an unknown pair (keyed by answer_a) is a tie.
    """
    verdicts = verdicts or {}
    preferences = preferences or {}

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        payload = user_payload(body)
        if "answer_a" in payload:
            return {"preference": preferences.get(payload["answer_a"], "tie"), "reason": "canned"}
        claim = payload.get("claim", "")
        default = {"claim": claim, "verdict": "NOT_IN_EVIDENCE", "evidence_quote": None, "evidence_doc_id": None}
        return {**default, **verdicts.get(claim, {})}

    return respond


def quoting_responder(body: dict[str, Any]) -> dict[str, Any]:
    """SUPPORTED, quoting the first evidence chunk verbatim (NOT_IN_EVIDENCE without evidence); for benchmarks."""
    payload = user_payload(body)
    evidence = payload.get("evidence") or []
    if not evidence:
        return {
            "claim": payload.get("claim", ""),
            "verdict": "NOT_IN_EVIDENCE",
            "evidence_quote": None,
            "evidence_doc_id": None,
        }
    first = evidence[0]
    return {
        "claim": payload.get("claim", ""),
        "verdict": "SUPPORTED",
        "evidence_quote": first.get("text"),
        "evidence_doc_id": first.get("doc_id"),
    }


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


@dataclass
class _State:
    responder: Responder
    latency_s: float
    batch_polls: int
    faults: deque[Fault] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: itertools.count = field(default_factory=itertools.count)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog is set when the socket opens: enough for a benchmark's whole pool to connect at once.
    request_queue_size = 512


class LoopbackServer:
    """An OpenAI-compatible server on 127.0.0.1 (module docstring); use as a context manager."""

    def __init__(self, responder: Responder | None = None, latency_s: float = 0.0, batch_polls: int = 1) -> None:
        self.state = _State(responder or canned_responder(), latency_s, batch_polls)
        self._server = _Server(("127.0.0.1", 0), _handler_for(self.state))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        """The `base_url` to give the openai client."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> None:
        """Start serving on a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject(self, *faults: Fault) -> None:
        """Serve these faults, in order, to the next chat completions."""
        with self.state.lock:
            self.state.faults.extend(faults)

    def set_latency(self, seconds: float) -> None:
        """Fixed delay before every chat completion reply."""
        self.state.latency_s = seconds

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self.state.lock:
            return list(self.state.requests)

    def count(self, path: str = "/v1/chat/completions") -> int:
        """How many requests arrived for a path."""
        return sum(1 for r in self.requests if r.path == path)

    def reset(self) -> None:
        """Forget recorded requests and pending faults."""
        with self.state.lock:
            self.state.requests.clear()
            self.state.faults.clear()


def _handler_for(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes; with Nagle's algorithm on, the client's delayed ACK
        # would hold the body back about 40 ms on every reply.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        # ---------------------------------------------------------- plumbing

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _send(
            self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
        ) -> None:
            data = raw if raw is not None else json.dumps(payload).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if raw is None else "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (a timeout it was told to hit); nothing to answer.
                self.close_connection = True

        def _record(self, body: dict[str, Any] | None, status: int, received_at: float) -> None:
            with state.lock:
                state.requests.append(RecordedRequest(self.command, self.path, body, received_at, status))

        def _next_id(self, prefix: str) -> str:
            with state.lock:
                return f"{prefix}-{next(state.ids)}"

        # ---------------------------------------------------------- routes

        def do_POST(self) -> None:
            received_at = time.monotonic()
            raw = self._body()
            if self.path == "/v1/chat/completions":
                body = json.loads(raw or b"{}")
                self._chat(body, received_at)
            elif self.path == "/v1/files":
                self._upload(raw, received_at)
            elif self.path == "/v1/batches":
                self._create_batch(json.loads(raw or b"{}"), received_at)
            else:
                self._record(None, 404, received_at)
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        def do_GET(self) -> None:
            received_at = time.monotonic()
            parts = self.path.strip("/").split("/")
            if len(parts) == 3 and parts[:2] == ["v1", "batches"] and parts[2] in state.batches:
                self._record(None, 200, received_at)
                self._send(200, self._poll(parts[2]))
            elif len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content" and parts[2] in state.files:
                self._record(None, 200, received_at)
                self._send(200, None, raw=state.files[parts[2]][1])
            else:
                self._record(None, 404, received_at)
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        # ---------------------------------------------------------- chat completions

        def _chat(self, body: dict[str, Any], received_at: float) -> None:
            with state.lock:
                fault = state.faults.popleft() if state.faults else None
            if fault is not None and fault.kind == "http":
                headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                self._record(body, fault.status, received_at)
                self._send(
                    fault.status, {"error": {"message": f"injected HTTP {fault.status}", "type": "injected"}}, headers
                )
                return
            if fault is not None and fault.kind == "timeout":
                time.sleep(fault.delay_s)
            if state.latency_s:
                time.sleep(state.latency_s)
            if fault is not None and fault.kind == "malformed":
                content = "Sure! The claim is supported {verdict: SUPPORTED"
            elif fault is not None and fault.kind == "bad_schema":
                content = json.dumps({"claim": "", "verdict": "MAYBE", "evidence_quote": None, "evidence_doc_id": None})
            else:
                reply = state.responder(body)
                content = reply if isinstance(reply, str) else json.dumps(reply)
            self._record(body, 200, received_at)
            self._send(200, completion(body, content, self._next_id("chatcmpl")))

        # ---------------------------------------------------------- files and batches

        def _upload(self, raw: bytes, received_at: float) -> None:
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + self.headers.get("Content-Type", "").encode() + b"\r\n\r\n" + raw
            )
            fields: dict[str, tuple[str | None, bytes]] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
            filename, data = fields.get("file", (None, b""))
            file_id = self._next_id("file")
            with state.lock:
                state.files[file_id] = (filename or "upload.jsonl", data)
            self._record({"purpose": fields.get("purpose", (None, b""))[1].decode()}, 200, received_at)
            self._send(200, _file_object(file_id, filename or "upload.jsonl", len(data), "batch"))

        def _create_batch(self, body: dict[str, Any], received_at: float) -> None:
            batch_id = self._next_id("batch")
            lines = [json.loads(x) for x in state.files[body["input_file_id"]][1].decode().splitlines() if x.strip()]
            out = []
            for line in lines:
                reply = state.responder(line["body"])
                content = reply if isinstance(reply, str) else json.dumps(reply)
                out.append(
                    {
                        "id": self._next_id("batch_req"),
                        "custom_id": line["custom_id"],
                        "response": {
                            "status_code": 200,
                            "request_id": self._next_id("req"),
                            "body": completion(line["body"], content, self._next_id("chatcmpl")),
                        },
                        "error": None,
                    }
                )
            output_id = self._next_id("file")
            with state.lock:
                state.files[output_id] = ("batch_output.jsonl", ("\n".join(json.dumps(o) for o in out) + "\n").encode())
                state.batches[batch_id] = {
                    "id": batch_id,
                    "object": "batch",
                    "endpoint": body.get("endpoint"),
                    "errors": None,
                    "input_file_id": body["input_file_id"],
                    "completion_window": body.get("completion_window", "24h"),
                    "status": "in_progress",
                    "output_file_id": None,
                    "error_file_id": None,
                    "created_at": int(time.time()),
                    "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                    "metadata": body.get("metadata"),
                    "_output": output_id,
                }
                state.polls[batch_id] = 0
            self._record(body, 200, received_at)
            self._send(200, _public(state.batches[batch_id]))

        def _poll(self, batch_id: str) -> dict[str, Any]:
            with state.lock:
                state.polls[batch_id] += 1
                batch = state.batches[batch_id]
                if state.polls[batch_id] >= state.batch_polls:
                    total = batch["request_counts"]["total"]
                    batch.update(
                        status="completed",
                        output_file_id=batch["_output"],
                        request_counts={"total": total, "completed": total, "failed": 0},
                    )
                return _public(batch)

    return Handler


def completion(body: dict[str, Any], content: str, completion_id: str) -> dict[str, Any]:
    """A chat.completion object replying `content` to a request body, with usage counted at 4 characters a token."""
    prompt = sum(_tokens(m.get("content") or "") for m in body.get("messages") or [])
    output = _tokens(content)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "loopback"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output},
    }


def _file_object(file_id: str, filename: str, size: int, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
    }


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def main(argv: list[str] | None = None) -> int:
    """Serve on 127.0.0.1 until interrupted, printing the base_url first (for benchmarks in another process)."""
    import argparse

    parser = argparse.ArgumentParser(
        description="OpenAI-compatible loopback server for judge tests and benchmarks (127.0.0.1 only)."
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, help="fixed delay before every chat completion reply")
    parser.add_argument(
        "--responder",
        choices=("quoting", "canned"),
        default="quoting",
        help="quoting: SUPPORTED quoting the first evidence chunk; canned: NOT_IN_EVIDENCE for every claim",
    )
    args = parser.parse_args(argv)
    server = LoopbackServer(
        quoting_responder if args.responder == "quoting" else canned_responder(), latency_s=args.latency_ms / 1000
    )
    server.start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
