"""A real PostgreSQL server on 127.0.0.1 for the timeline tests: Debian's PostgreSQL (initdb, pg_ctl) in a
temporary folder, on a free loopback port, one per test session (`postgres_server`), with one database whose
contents are dropped before each test (`postgres_target`). Logins over TCP need a password (scram-sha-256),
as on a real site.

`initdb` refuses root, so as root the server runs as the `postgres` user (`runuser`) in a folder given to it.
It is always stopped (`pg_ctl stop -m immediate`) and its folder removed; every step is bounded in time.
Without PostgreSQL the tests skip, or fail when EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI).

    with PostgresServer() as server:
        target = server.create_database("t1")
        server.stop(); server.start()  # the same port and data
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mqtt_broker import free_port
from timeline.postgres_target import PostgresTarget

POSTGRES_PACKAGE = "postgresql"
USER, PASSWORD = "assistant", "s3cret-Test-pw"
STEP_TIMEOUT_S = 60


def postgres_bin() -> Path | None:
    """The folder of initdb/pg_ctl/postgres (Debian: /usr/lib/postgresql/<version>/bin; the newest)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def require_postgres() -> Path:
    """The binaries' folder; skips the test without them, fails it when EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI)."""
    folder = postgres_bin()
    missing = None
    if folder is None:
        missing = f"PostgreSQL not found; apt-get install {POSTGRES_PACKAGE}"
    else:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            missing = "psycopg not installed; pip install 'psycopg[binary]'"
    if missing:
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    return folder


class PostgresServer:
    """PostgreSQL on 127.0.0.1:`port` with a login role `USER`/`PASSWORD` allowed to create databases.
    A context manager: entering creates and starts it, leaving stops it and removes its folder."""

    def __init__(self) -> None:
        self.bin = require_postgres()
        self.folder = Path(tempfile.mkdtemp(prefix="edge-assistant-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.running = False
        self._names = itertools.count(1)

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, cwd=self.folder)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stderr[-2000:]}{log}")
        return done

    def create(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync",
                  "--auth-local=trust", "--auth-host=scram-sha-256")  # fmt: skip
        settings = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.folder}'",
            "fsync = off",  # a test server: speed over surviving a power cut (commits still survive a killed server)
            "full_page_writes = off",
            "max_connections = 40",
            "shared_buffers = 16MB",
        ]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(settings) + "\n")

    def start(self) -> None:
        """Starts the server and waits (bounded) until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30", "start")
        self.running = True

    def stop(self) -> None:
        """Stops at once (`-m immediate`: clients see the connection drop, as when a server dies)."""
        if self.running:
            self.running = False
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")

    def admin(self, sql: str, dbname: str = "postgres") -> None:
        """Runs `sql` as the superuser over the server's Unix socket."""
        import psycopg

        with psycopg.connect(host=str(self.folder), port=self.port, user="postgres", dbname=dbname,
                             autocommit=True, connect_timeout=10) as conn:  # fmt: skip
            conn.execute(sql)

    def target(self, dbname: str, **kwargs) -> PostgresTarget:
        return PostgresTarget("127.0.0.1", dbname, self.port, USER, kwargs.pop("password", PASSWORD), **kwargs)

    def create_database(self, prefix: str = "timeline") -> PostgresTarget:
        """A new empty database owned by `USER`, and the target to reach it over TCP with the password."""
        name = f"{prefix}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} OWNER {USER}")
        return self.target(name)

    def drop_database(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def __enter__(self) -> PostgresServer:
        try:
            self.create()
            self.start()
            self.admin(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One server for the whole session (started at its first use)."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_database(postgres_server: PostgresServer) -> PostgresTarget:
    return postgres_server.create_database("suite")  # once: CREATE DATABASE takes a second on a busy machine


@pytest.fixture
def postgres_target(postgres_server: PostgresServer, postgres_database: PostgresTarget) -> PostgresTarget:
    """An empty database for one test: the session's, with everything the last test made in it dropped."""
    if not postgres_server.running:  # a test that stopped it failed before starting it again
        postgres_server.start()
    postgres_server.admin(f"DROP OWNED BY {USER}", dbname=postgres_database.dbname)
    return postgres_database
