"""Servers on 127.0.0.1 for the integration tests and the scale-out benchmark: PostgreSQL, Redis, Celery workers."""

from __future__ import annotations

import dataclasses
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class Missing(RuntimeError):
    """A server cannot be started on this machine; the message names what is missing and how to install it."""


class StartFailed(RuntimeError):
    """A server was there but did not start; the message carries its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int, process: subprocess.Popen | None = None, timeout: float = 60) -> bool:
    """Whether something accepts connections on a loopback port before `process` exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (process is None or process.poll() is None):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def stop_group(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM a process started in its own session and everything it started, SIGKILL what is left after `timeout`."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


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
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.db_name,
        }

    def connect(self, db_name: str | None = None):
        """A psycopg2 connection to the instance database, or to `db_name` (autocommit)."""
        import psycopg2

        connection = psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=db_name or self.db_name
        )
        connection.autocommit = True
        return connection

    def new_database(self, name: str) -> PostgresServer:
        """The same server with a new, empty database `name` as the instance database."""
        admin = self.connect("postgres")
        try:
            with admin.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            admin.close()
        return dataclasses.replace(self, db_name=name)


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
        raise Missing(
            "running as root and no `postgres` account to run the server as (apt-get install postgresql)"
        ) from None
    runuser = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), None
    )
    if runuser is None:
        raise Missing("running as root and runuser (util-linux) is missing, so PostgreSQL cannot be started")
    return [runuser, "-u", "postgres", "--"], account.pw_uid


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """initdb a fresh cluster in a temporary folder, start it on a free loopback port, stop and delete it after."""
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        raise Missing(
            "psycopg2 is not installed (a dependency of dagster-postgres: pip install 'dagster-postgres')"
        ) from None
    bindir = postgres_bindir()
    if bindir is None:
        raise Missing(
            "PostgreSQL server binaries (initdb, pg_ctl) not found; on Debian: bash scripts/services.sh "
            "(apt-get install postgresql)"
        )
    prefix, owner = _server_account()
    # The server account must reach its folder, so not under a private (0700) temporary root.
    base = Path(tempfile.mkdtemp(prefix="evalpg-"))
    data, sockets, log = base / "data", base / "sock", base / "server.log"
    sockets.mkdir()
    password = secrets.token_hex(16)
    (base / "pwfile").write_text(password + "\n")
    if owner is not None:
        for path in (base, sockets, base / "pwfile"):
            os.chown(path, owner, -1)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)

    try:
        init = run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "evaluser",
            f"--pwfile={base / 'pwfile'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        if init.returncode != 0:
            raise StartFailed(f"initdb failed: {init.stdout}{init.stderr}")
        started = None
        for _ in range(3):
            port = free_port()
            # Durability is irrelevant for a throwaway cluster; without fsync it starts and commits faster.
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
            )
            started = run(
                str(bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data), "-l", str(log), "-o", options
            )
            if started.returncode == 0:
                break
        if started is None or started.returncode != 0:
            detail = log.read_text() if log.exists() else ""
            raise StartFailed(
                f"pg_ctl start failed: {started.stdout if started else ''}{started.stderr if started else ''}{detail}"
            )
        try:
            server = PostgresServer(host="127.0.0.1", port=port, user="evaluser", password=password, db_name="postgres")
            yield server.new_database("dagster")
        finally:
            run(str(bindir / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(data))
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class RedisServer:
    """A Redis server on 127.0.0.1: the Celery broker (database 0) and result backend (database 1)."""

    port: int

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def celery_env(self) -> dict[str, str]:
        """The variables deploy/celery/celery.yaml and `eval-pipeline run --executor celery` read."""
        return {"DAGSTER_CELERY_BROKER_URL": self.url(0), "DAGSTER_CELERY_BACKEND_URL": self.url(1)}


@contextmanager
def redis_server(log: Path) -> Iterator[RedisServer]:
    """redis-server on a free loopback port, in memory only, stopped after."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise Missing("redis-server not found; on Debian: bash scripts/services.sh (apt-get install redis-server)")
    try:
        import redis  # noqa: F401
    except ImportError:
        raise Missing("the Redis client is not installed (pip install 'celery[redis]')") from None
    for _ in range(3):
        port = free_port()
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [
                    binary,
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "yes",
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if listening(port, process, timeout=20):
            break
        stop_group(process)
    else:
        raise StartFailed(f"redis-server did not start: {log.read_text()[-2000:]}")
    try:
        yield RedisServer(port=port)
    finally:
        stop_group(process)


@dataclass
class CeleryWorker:
    """A `dagster-celery worker start` process and the log it writes."""

    name: str
    process: subprocess.Popen
    log: Path

    @property
    def hostname(self) -> str:
        """The name Celery reports for it (what the executor's engine events record as the worker)."""
        return f"{self.name}@{socket.gethostname()}"


def _venv_bin() -> str:
    return str(Path(sys.executable).parent)


@contextmanager
def celery_workers(
    names: list[str],
    env: Mapping[str, str],
    config_yaml: Path,
    logs: Path,
    processes_per_worker: int = 1,
    timeout: float = 120,
) -> Iterator[list[CeleryWorker]]:
    """Start one `dagster-celery worker start` per name (Dagster's own worker entry point), wait until each is ready."""
    try:
        import dagster_celery  # noqa: F401
    except ImportError:
        raise Missing("dagster-celery is not installed (pip install 'eval-pipeline[celery]')") from None
    # dagster-celery runs `celery` from PATH: the one installed beside this interpreter
    environment = {**os.environ, **env, "PATH": _venv_bin() + os.pathsep + os.environ.get("PATH", "")}
    workers: list[CeleryWorker] = []
    try:
        for name in names:
            log = logs / f"celery-{name}.log"
            with log.open("ab") as sink:
                process = subprocess.Popen(
                    [
                        os.path.join(_venv_bin(), "dagster-celery"),
                        "worker",
                        "start",
                        "-A",
                        "dagster_celery.app",
                        "-y",
                        str(config_yaml),
                        "-n",
                        name,
                        "-l",
                        "INFO",
                        "--",
                        "-c",
                        str(processes_per_worker),
                    ],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=environment,
                    start_new_session=True,
                )
            workers.append(CeleryWorker(name, process, log))
        deadline = time.monotonic() + timeout
        for worker in workers:
            while " ready." not in worker.log.read_text(errors="replace"):
                if worker.process.poll() is not None or time.monotonic() > deadline:
                    raise StartFailed(
                        f"Celery worker {worker.name} did not become ready:\n{worker.log.read_text()[-3000:]}"
                    )
                time.sleep(0.3)
        yield workers
    finally:
        for worker in workers:
            stop_group(worker.process)


@contextmanager
def background(
    command: list[str], env: Mapping[str, str], cwd: Path, log: Path, port: int | None = None, timeout: float = 120
) -> Iterator[subprocess.Popen]:
    """A long-running command in its own session (the webserver, the daemon), logging to a file; with `port`,
    started once it accepts connections there. Stopped, with everything it started, after."""
    environment = {**os.environ, **env, "PATH": _venv_bin() + os.pathsep + os.environ.get("PATH", "")}
    with log.open("ab") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=environment, cwd=cwd, start_new_session=True
        )
    try:
        if port is not None and not listening(port, process, timeout):
            raise StartFailed(
                f"{' '.join(command)} did not listen on {port}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        yield process
    finally:
        stop_group(process)
