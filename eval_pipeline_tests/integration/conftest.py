"""Real servers on loopback for the integration tests: PostgreSQL, Redis and an S3-compatible store (moto)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline_harness.loopback_services import (
    Missing,
    PostgresServer,
    RedisServer,
    StartFailed,
    free_port,
    listening,
)
from eval_pipeline_harness.loopback_services import postgres_server as postgres_server_on_loopback
from eval_pipeline_harness.loopback_services import redis_server as redis_server_on_loopback

REPO_ROOT = Path(__file__).resolve().parents[2]
S3_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ALLOW_HTTP")


@contextmanager
def started(service):
    """A loopback_services context: skipped naming what is missing, failed with the server's log when it breaks."""
    try:
        with service as server:
            yield server
    except Missing as exc:
        pytest.skip(str(exc))
    except StartFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    """A fresh PostgreSQL cluster on a free loopback port for the session, deleted after."""
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (pip install 'dagster-postgres')")
    with started(postgres_server_on_loopback()) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> RedisServer:
    """redis-server on a free loopback port for the session: the Celery broker and result backend."""
    with started(redis_server_on_loopback(tmp_path_factory.mktemp("redis") / "server.log")) as server:
        yield server


@dataclass(frozen=True)
class S3Server:
    """A moto S3 server on 127.0.0.1 and the credentials it accepts."""

    endpoint: str

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point clients (deltalake, pyarrow, boto3) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "integration",
            "AWS_SECRET_ACCESS_KEY": "integration",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self):
        """A boto3 S3 client for this server."""
        import boto3

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_REGION"],
        )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> S3Server:
    """moto's S3 server in its own process (`python -m moto.server`), stopped after the session."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install 'moto[server]')")
    pytest.importorskip("boto3", reason="boto3 is not installed (a dependency of moto)")
    # A separate process, not moto's ThreadedMotoServer: deltalake holds the GIL during some HTTP calls
    # (DeltaTable.history), which deadlocks against a server thread in the same interpreter.
    # The server logs every request: to a file, since an undrained pipe would fill and block it.
    log = tmp_path_factory.mktemp("moto") / "server.log"
    for _ in range(3):
        port = free_port()
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        if listening(port, process):
            break
        process.kill()
        process.wait()
    else:
        pytest.fail(f"moto server did not start: {log.read_text()[-2000:]}")
    try:
        yield S3Server(endpoint=f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> S3Server:
    """The AWS variables set for this test (and restored after it)."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def bucket(s3_env, request) -> str:
    """A fresh, empty bucket named after the test."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    s3_env.client().create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def sample_inputs(tmp_path_factory) -> Path:
    """A private copy of the bundled sample inputs (data/ without outputs)."""
    root = tmp_path_factory.mktemp("sample") / "data"
    shutil.copytree(REPO_ROOT / "data", root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    return root
