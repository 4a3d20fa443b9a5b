"""Real servers on loopback for the integration tests: a PostgreSQL cluster and an S3-compatible store (moto)."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
S3_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ALLOW_HTTP")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<major>/bin (newest)."""
    initdb = shutil.which("initdb")
    candidates = [Path(initdb).resolve().parent] if initdb else []
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    candidates += [Path(p) for p in versions if Path(p).parent.name.isdigit()]
    return next((c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()), None)


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL cluster on 127.0.0.1 with one database for the Dagster instance."""

    host: str
    port: int
    user: str
    password: str
    db_name: str

    def env(self) -> dict[str, str]:
        """The variables deploy/postgres/dagster.yaml reads."""
        return {"DAGSTER_PG_HOST": self.host, "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_USER": self.user,
                "DAGSTER_PG_PASSWORD": self.password, "DAGSTER_PG_DB": self.db_name}

    def connect(self):
        """A psycopg2 connection to the instance database (autocommit)."""
        import psycopg2

        connection = psycopg2.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                      dbname=self.db_name)
        connection.autocommit = True
        return connection


def _server_account() -> tuple[list[str], int | None]:
    """The command prefix that runs PostgreSQL's tools and the uid that must own its files.

    PostgreSQL refuses to run as root; as root (CI containers) the tools run as the `postgres` account that the
    Debian package creates, through runuser.
    """
    if os.geteuid() != 0:
        return [], None
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and no `postgres` account to run the server as (apt-get install postgresql)")
    runuser = shutil.which("runuser") or next((p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), None)
    if runuser is None:
        pytest.skip("running as root and runuser (util-linux) is missing, so PostgreSQL cannot be started")
    return [runuser, "-u", "postgres", "--"], account.pw_uid


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory) -> PostgresServer:
    """initdb a fresh cluster in a temporary folder, start it on a free loopback port, stop and delete it after."""
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (pip install 'dagster-postgres')")
    pytest.importorskip("psycopg2", reason="psycopg2 is not installed (a dependency of dagster-postgres)")
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; on Debian: apt-get install postgresql")
    prefix, owner = _server_account()
    # As root the server account must reach its folder; pytest's own temp root is private to root (0700).
    base = Path(tempfile.mkdtemp(prefix="evalpg-")) if owner is not None else tmp_path_factory.mktemp("postgres")
    data, sockets, log = base / "data", base / "sock", base / "server.log"
    sockets.mkdir()
    password = secrets.token_hex(16)
    (base / "pwfile").write_text(password + "\n")
    if owner is not None:
        for path in (base, sockets, base / "pwfile"):
            os.chown(path, owner, -1)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)

    init = run(str(bindir / "initdb"), "-D", str(data), "-U", "evaluser", f"--pwfile={base / 'pwfile'}",
               "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
    if init.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"initdb failed: {init.stdout}{init.stderr}")
    started = None
    for _ in range(3):
        port = free_port()
        # Durability is irrelevant for a throwaway cluster; without fsync it starts and commits faster.
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        started = run(str(bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data), "-l", str(log), "-o", options)
        if started.returncode == 0:
            break
    if started is None or started.returncode != 0:
        detail = log.read_text() if log.exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"pg_ctl start failed: {started.stdout if started else ''}{started.stderr if started else ''}{detail}")
    server = PostgresServer(host="127.0.0.1", port=port, user="evaluser", password=password, db_name="dagster")
    try:
        import psycopg2

        admin = psycopg2.connect(host=server.host, port=server.port, user=server.user, password=password, dbname="postgres")
        admin.autocommit = True
        with admin.cursor() as cursor:
            cursor.execute("CREATE DATABASE dagster")
        admin.close()
        yield server
    finally:
        run(str(bindir / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(data))
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class S3Server:
    """A moto S3 server on 127.0.0.1 and the credentials it accepts."""

    endpoint: str

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point clients (deltalake, pyarrow, boto3) at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "integration", "AWS_SECRET_ACCESS_KEY": "integration",
                "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}

    def client(self):
        """A boto3 S3 client for this server."""
        import boto3

        env = self.env()
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_REGION"])


def _listening(port: int, process: subprocess.Popen, timeout: float = 60) -> bool:
    """Whether a server process accepts connections on a loopback port before it exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


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
            process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                       stdout=sink, stderr=subprocess.STDOUT)
        if _listening(port, process):
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
