"""Fixtures of the export tests: the shared sample materialization, a loopback HTTP receiver, the command runner."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eval_pipeline.cli.exports import register


@pytest.fixture(scope="session")
def sample(scored) -> dict:
    """The session's one materialization of both sample runs (`scored`), as the export tests read it: data root,
    warehouse root, Warehouse."""
    warehouse = scored["warehouse"]
    # A failed report step (exit 1) leaves the tables written; what these tests read must be there for both runs.
    assert scored["code"] in (0, 1), scored["summary"]
    for table in (
        "run_manifest",
        "stage_results",
        "claims",
        "judge_calibration",
        "retrieval_scores",
        "tool_scores",
        "outcome_scores",
    ):
        assert warehouse.runs(table) == ["base-41", "cand-42"], table
    return {"data": scored["data"], "root": Path(warehouse.root), "warehouse": warehouse}


@pytest.fixture()
def export(sample):
    """Run `export ARGS...` against the sample warehouse through its argparse registration; returns the exit code."""

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        args = parser.parse_args(["export", *argv, "--data", str(sample["data"]), "--warehouse", str(sample["root"])])
        return args.handler(args)

    return run


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Receiver:
    """A loopback HTTP server that records every POST and answers with `respond(request) -> (status, body)`."""

    respond: Callable[[Received], tuple[int, dict | None]]
    requests: list[Received] = field(default_factory=list)
    url: str = ""


@pytest.fixture()
def receiver() -> Iterator[Callable[[Callable[[Received], tuple[int, dict | None]]], Receiver]]:
    """Start receivers on 127.0.0.1 (port 0) in threads; each is shut down after the test."""
    servers = []

    def start(respond) -> Receiver:
        state = Receiver(respond)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                state.requests.append(request)
                status, body = state.respond(request)
                payload = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # keep the test output clean
                pass

        state.url = start_loopback(Handler, servers)
        return state

    yield start
    stop_loopback(servers)


def start_loopback(handler: type[BaseHTTPRequestHandler], servers: list) -> str:
    """Serve `handler` on 127.0.0.1 (a free port) in a thread, added to `servers`; its http://host:port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    servers.append((server, thread))
    return f"http://127.0.0.1:{server.server_address[1]}"


def stop_loopback(servers: list) -> None:
    """Shut down every server start_loopback started."""
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
