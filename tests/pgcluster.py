"""A private PostgreSQL 15 cluster for tests and benchmarks: ``initdb`` into a
temp dir, ``pg_ctl`` start on a free loopback port, stopped (by its own
``pg_ctl stop``) at the end. initdb refuses root, so as root the cluster runs
as the ``postgres`` user of Debian's package (the folder is handed to it).

    with PgCluster() as pg:
        pg.url   # postgresql://holon@127.0.0.1:PORT/holon
        pg.restart()
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from types import TracebackType

PG_BIN = Path(os.environ.get("HOLON_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def postgres_missing() -> str | None:
    """Why a real cluster cannot run here (the skip reason), or None."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / tool).exists():
            return (
                f"postgresql is not installed ({PG_BIN / tool} missing; Debian package postgresql)"
            )
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "postgresql: running as root and no 'postgres' user to run initdb as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    """In a fresh folder of its own under the system temp dir (not under
    pytest's tmp_path: every new pytest session resets /tmp/pytest-of-USER to
    0700, which the postgres user could then no longer cross); removed at exit."""

    def __init__(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="holon-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql://holon@127.0.0.1:{self.port}/holon"

    def _run(self, *argv: str) -> None:
        cmd = [str(PG_BIN / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            import shlex

            cmd = ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(cmd)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root)
        if res.returncode:
            raise RuntimeError(f"{argv[0]} failed ({res.returncode}): {res.stderr or res.stdout}")

    def init(self) -> PgCluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "holon", "--no-sync")
        return self

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "start"
        )

    def createdb(self, name: str = "holon") -> None:
        import psycopg

        base = self.url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> PgCluster:
        self.init()
        self.start()
        self.createdb()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
