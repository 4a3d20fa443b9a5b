"""`export --endpoint`: credentials never follow a redirect, nothing is reported sent that the receiver did not confirm,
and what a receiver answers is shown cut and scrubbed. Real loopback servers on two ports; a small warehouse."""

from __future__ import annotations

import argparse
import base64
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import polars as pl
import pytest

from eval_pipeline.cli.exports import register
from eval_pipeline.exports.http import SHOWN_CHARS, scrub
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_tests.exports.conftest import start_loopback, stop_loopback

PUBLIC, SECRET = "pk-lf-1234-public", "sk-lf-5678-secret"
AUTH = "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
OTLP_TOKEN = "otlp-token-9f8e7d6c5b4a"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.c2lnbmF0dXJlLWJ5dGVz"
STAGES = 6  # rows of stage_results written below: one Langfuse score, one OTLP event each


@dataclass
class Seen:
    """One request a server got: method, path, headers (lower-case names), body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """A loopback server that records every request and answers `respond(seen) -> (status, headers, body bytes)`."""

    respond: Callable[[Seen], tuple[int, dict[str, str], bytes]]
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    origin: str = ""


@pytest.fixture()
def serve() -> Iterator[Callable[..., Server]]:
    """Start servers on 127.0.0.1 (each its own port) answering GET and POST; shut down after the test."""
    running = []

    def start(respond) -> Server:
        state = Server(respond)

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                state.seen.append(seen)
                status, headers, body = state.respond(seen)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _answer  # noqa: N815 - http.server's names

            def log_message(self, *args):
                pass

        state.origin = state.url = start_loopback(Handler, running)
        return state

    yield start
    stop_loopback(running)


def langfuse_answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    """What Langfuse's ingestion API answers a good request: 207, every event a success."""
    if seen.method != "POST" or seen.headers.get("authorization") != AUTH:
        return 401, {}, b'{"message": "Invalid credentials"}'
    events = json.loads(seen.body)["batch"]
    return 207, {}, json.dumps({"successes": [{"id": e["id"], "status": 201} for e in events], "errors": []}).encode()


def echo_headers(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    """A 500 that echoes the request's headers and a few more credential shapes, as a careless server does."""
    lines = [f"{k}: {v}" for k, v in seen.headers.items()]
    lines += [f"public={PUBLIC}", f"secret={SECRET}", f"token {JWT}", "Authorization: Bearer abcdefghijklmnop"]
    return 500, {"Content-Type": "text/plain"}, ("internal error\n" + "\n".join(lines) + "\n" + "x" * 5000).encode()


@pytest.fixture()
def warehouse(tmp_path) -> Warehouse:
    """A warehouse with six stage_results rows of one run, r-1."""
    store = Warehouse.at(tmp_path / "wh")
    rows = pl.DataFrame(
        {
            "run_id": ["r-1"] * STAGES,
            "trace_id": [f"r-1:c-{i}#1" for i in range(STAGES)],
            "case_id": [f"c-{i}" for i in range(STAGES)],
            "attempt": [1] * STAGES,
            "lane": ["rag"] * STAGES,
            "stage": ["retrieval"] * STAGES,
            "stage_order": [0] * STAGES,
            "status": ["pass", "fail"] * 3,
            "reason": [None, "recall below 0.8"] * 3,
            "code_version": ["stages-1"] * STAGES,
        }
    )
    store.write_partition("stage_results", rows, "r-1")
    return store


@pytest.fixture()
def export(warehouse, tmp_path, monkeypatch):
    """Run `export stage_results ARGS…` against the small warehouse; returns the exit code."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer {OTLP_TOKEN},x-api-key={SECRET}")

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        args = parser.parse_args(
            ["export", "stage_results", *argv, "--warehouse", str(warehouse.root), "--timeout", "10"]
        )
        return args.handler(args)

    return run


def assert_no_credential(text: str) -> None:
    for secret in (PUBLIC, SECRET, AUTH.split()[1], OTLP_TOKEN, JWT, "abcdefghijklmnop"):
        assert secret not in text
    assert not re.search(r"(?i)(bearer|basic) (?!\[redacted\])\S", text), text


def redirect_to(
    target: Server, code: int, path: str = "/api/public/ingestion"
) -> Callable[[Seen], tuple[int, dict, bytes]]:
    return lambda seen: (code, {"Location": target.origin + path}, b"")


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("fmt", ["langfuse", "otlp"])
def test_a_redirect_to_another_port_is_refused_and_named(export, serve, capsys, code, fmt):
    other = serve(langfuse_answer if fmt == "langfuse" else lambda seen: (200, {}, b"{}"))
    first = serve(redirect_to(other, code, "/api/public/ingestion" if fmt == "langfuse" else "/v1/traces"))
    assert export("--format", fmt, "--endpoint", first.url) == 1
    err = capsys.readouterr().err
    target = other.origin + ("/api/public/ingestion" if fmt == "langfuse" else "/v1/traces")
    assert f"HTTP {code} from {first.url}" in err and f"redirects to another origin, {target}: refused" in err
    # the other server never got a request, let alone the Authorization header; nothing is reported sent
    assert other.seen == [] and len(first.seen) == 1
    assert ("sent 0 of 6 Langfuse scores" in err) if fmt == "langfuse" else ("stopped after 0 accepted spans" in err)
    assert_no_credential(err)


def moved_within(code: int) -> Callable[[Seen], tuple[int, dict, bytes]]:
    """Langfuse behind a `code` redirect from /api/public/ingestion to /v2/api/public/ingestion on the same server."""

    def respond(seen):
        if seen.path == "/api/public/ingestion":
            return code, {"Location": "/v2/api/public/ingestion"}, b""
        return langfuse_answer(seen)

    return respond


@pytest.mark.parametrize("code", [301, 302, 303])
def test_a_same_origin_redirect_that_would_drop_the_body_is_refused(export, serve, capsys, code):
    server = serve(moved_within(code))
    assert export("--format", "langfuse", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert (
        f"redirects to {server.origin}/v2/api/public/ingestion: not followed, a {code} would resend the POST as a GET"
        in err
    )
    assert [s.path for s in server.seen] == ["/api/public/ingestion"] and "sent 0 of 6" in err


@pytest.mark.parametrize("code", [307, 308])
def test_a_same_origin_307_or_308_is_followed_with_method_body_and_credentials(export, serve, capsys, code):
    server = serve(moved_within(code))
    assert export("--format", "langfuse", "--endpoint", server.url) == 0
    assert [(s.method, s.path) for s in server.seen] == [
        ("POST", "/api/public/ingestion"),
        ("POST", "/v2/api/public/ingestion"),
    ]
    assert server.seen[1].body == server.seen[0].body and server.seen[1].headers["authorization"] == AUTH
    assert len(json.loads(server.seen[1].body)["batch"]) == STAGES
    assert "sent 6 of 6 Langfuse scores" in capsys.readouterr().err


def test_an_error_body_that_echoes_the_headers_is_cut_and_scrubbed(export, serve, capsys):
    server = serve(echo_headers)
    assert export("--format", "langfuse", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert "HTTP 500 from" in err and "internal error" in err and "[redacted]" in err and "sent 0 of 6" in err
    assert server.seen[0].headers["authorization"] == AUTH  # the server did get the key, and echoed it
    assert_no_credential(err)
    line = next(line for line in err.splitlines() if "HTTP 500" in line)
    detail = line.split(f"{server.url}/api/public/ingestion: ", 1)[1].split("; stopped after")[0]
    assert len(detail) <= SHOWN_CHARS + 1 and detail.endswith("…")


def test_an_otlp_error_body_that_echoes_the_headers_is_scrubbed(export, serve, capsys):
    server = serve(echo_headers)
    assert export("--format", "otlp", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert (
        server.seen[0].headers["authorization"] == f"Bearer {OTLP_TOKEN}"
        and server.seen[0].headers["x-api-key"] == SECRET
    )
    assert "HTTP 500 from" in err and "stopped after 0 accepted spans" in err
    assert_no_credential(err)


@pytest.mark.parametrize("answer", [b"", b"{}", b"<html>welcome</html>", b'{"errors": []}'])
def test_a_2xx_that_confirms_no_score_is_not_reported_as_sent(export, serve, capsys, answer):
    server = serve(lambda seen: (200, {"Content-Type": "text/html"}, answer))
    assert export("--format", "langfuse", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert "confirmed no score" in err and "sent 0 of 6 Langfuse scores" in err


def test_an_otlp_2xx_that_is_not_an_otlp_answer_is_not_reported_as_sent(export, serve, capsys):
    server = serve(lambda seen: (200, {"Content-Type": "text/html"}, b"<html>welcome</html>"))
    assert export("--format", "otlp", "--endpoint", server.url) == 1
    assert "confirmed no span" in capsys.readouterr().err


def test_scrub_removes_every_credential_shape_and_folds_control_characters():
    text = (
        f"Authorization: {AUTH}\r\n\x1b[31mkey {PUBLIC} and {SECRET}; jwt {JWT}; Bearer abcdefghijklmnop; "
        '"x-api-key": "k-1234567890"; token=plain-words stay'
    )
    shown = scrub(text, secrets=["my-own-key-42"], limit=1000)
    assert_no_credential(shown)
    assert "k-1234567890" not in shown and "\x1b" not in shown and "\r" not in shown and "\n" not in shown
    assert shown.count("[redacted]") >= 6 and "stay" in shown
    assert scrub("the key my-own-key-42 leaked", secrets=["my-own-key-42"]) == "the key [redacted] leaked"
    assert scrub("x" * 500) == "x" * SHOWN_CHARS + "…"
