"""The workers of a DBOS cluster, as the ``holon_workers`` table has them:
each worker's row and heartbeat, the dead ones (silent ``DEAD_AFTER_S``)
whose pending passes a live worker has DBOS recover, and the listing
``holon serve`` status shows.

A live worker that finds a stale row locks it (``FOR UPDATE SKIP LOCKED``:
one taker), has DBOS recover that executor's pending workflows, and deletes
the row in the same transaction: if it dies half-way, the row comes back
for another.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any, TypedDict

from holon_cli.serve.dbos import compat
from holon_cli.serve.dbos.database import psycopg_url

HEARTBEAT_S = 1.0
DEAD_AFTER_S = 5.0  # a worker silent this long is dead: its workflows are recovered


class WorkerRow(TypedDict):
    executor_id: str
    host: str
    pid: int
    http_addr: str | None
    started_at: str
    heartbeat_at: str
    alive: bool


def default_executor_id() -> str:
    return os.environ.get("HOLON_EXECUTOR_ID") or f"{socket.gethostname()}-{os.getpid()}"


class Registry:
    """This worker's row: its heartbeat on a connection of its own, the
    database's absences (after one, the others get time to come back before
    anyone counts as dead), and the dead workers it recovered."""

    def __init__(self, database_url: str, executor_id: str, log: Callable[[str], None]) -> None:
        self.database_url = database_url
        self.executor_id = executor_id
        self.log = log
        self._conn: Any = None
        self.down_since: float | None = None
        self._recover_after = 0.0
        self.recovered: list[str] = []

    def _connect(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                psycopg_url(self.database_url), autocommit=True, connect_timeout=3
            )
            self._conn.execute(_WORKERS_DDL)
        return self._conn

    def drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
        self._conn = None

    def beat(self, http_addr: str | None, started_at: str) -> bool:
        """Record this worker as alive. True when the database is reachable
        again after it was away (the wakes enqueued meanwhile were lost)."""
        try:
            self._connect().execute(
                _UPSERT,
                (self.executor_id, socket.gethostname(), os.getpid(), http_addr, started_at),
            )
        except Exception as exc:  # noqa: BLE001 - the database is away: keep trying
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.log(f"database unreachable ({type(exc).__name__}); retrying")
            self.drop()
            return False
        if self.down_since is None:
            return False
        self.log("database reachable again")
        self.down_since = None
        self._recover_after = time.monotonic() + 2 * DEAD_AFTER_S
        return True

    def recover_dead(self) -> list[str]:
        """Have DBOS recover the pending workflows of workers silent for
        ``DEAD_AFTER_S``, then delete their rows, in one transaction holding
        the rows (``FOR UPDATE SKIP LOCKED``): one worker handles a dead one,
        and if it dies half-way the rows come back for another."""
        if self.down_since is not None or time.monotonic() < self._recover_after:
            return []
        try:
            conn = self._connect()
            with conn.transaction():
                rows = conn.execute(_DEAD, (self.executor_id, DEAD_AFTER_S)).fetchall()
                dead = [r[0] for r in rows]
                if dead:
                    handles = compat.recover_pending_workflows(dead)
                    conn.execute(_FORGET, (dead,))
        except Exception as exc:  # noqa: BLE001 - the next second tries again
            self.log(f"cannot recover dead workers ({type(exc).__name__}: {exc})")
            self.drop()
            return []
        if dead:
            self.recovered.extend(dead)
            self.log(
                f"recovered {len(handles)} pending pass(es) of dead worker(s) {', '.join(dead)}"
            )
        return dead

    def mark_gone(self) -> None:
        """On a clean stop: a heartbeat in the past, so a live worker at once
        recovers whatever this worker leaves pending (usually nothing)."""
        try:
            self._connect().execute(_GONE, (self.executor_id,))
        except Exception:  # noqa: BLE001 - then its heartbeat simply ages
            pass
        self.drop()


_WORKERS_DDL = """
CREATE TABLE IF NOT EXISTS holon_workers (
    executor_id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    http_addr text,
    started_at text NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now()
)"""
_UPSERT = """
INSERT INTO holon_workers (executor_id, host, pid, http_addr, started_at, heartbeat_at)
VALUES (%s, %s, %s, %s, %s, now())
ON CONFLICT (executor_id) DO UPDATE SET heartbeat_at = now(), http_addr = EXCLUDED.http_addr"""
_DEAD = """
SELECT executor_id FROM holon_workers
WHERE executor_id <> %s AND heartbeat_at < now() - make_interval(secs => %s)
FOR UPDATE SKIP LOCKED"""
_FORGET = "DELETE FROM holon_workers WHERE executor_id = ANY(%s)"
_GONE = "UPDATE holon_workers SET heartbeat_at = 'epoch' WHERE executor_id = %s"
_LIST = """
SELECT executor_id, host, pid, http_addr, started_at, heartbeat_at,
       heartbeat_at >= now() - make_interval(secs => %s) AS alive
FROM holon_workers ORDER BY executor_id"""


def list_workers(conn: Any) -> list[WorkerRow]:
    """The cluster's workers as the heartbeat table has them."""
    conn.execute(_WORKERS_DDL)
    rows = conn.execute(_LIST, (DEAD_AFTER_S,)).fetchall()
    return [
        {
            "executor_id": r[0],
            "host": r[1],
            "pid": r[2],
            "http_addr": r[3],
            "started_at": r[4],
            "heartbeat_at": r[5].isoformat(),
            "alive": bool(r[6]),
        }
        for r in rows
    ]


def cluster_workers(url: str) -> list[WorkerRow]:
    """The cluster's workers, on a connection of its own."""
    import psycopg

    with psycopg.connect(psycopg_url(url), autocommit=True, connect_timeout=3) as conn:
        return list_workers(conn)
