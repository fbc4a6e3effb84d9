"""Where everything lives under ``HOLON_HOME`` and each ``agent_home``.

Pure path arithmetic plus environment lookup; nothing here creates files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from holon_cli.errors import UsageError

AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

LEDGERS = (
    "events",
    "queue",
    "transcript",
    "briefs",
    "work_items",
    "delivery_summaries",
    "waiting_intents",
)


def home_root() -> Path:
    env = os.environ.get("HOLON_HOME")
    if env:
        return Path(env).expanduser().absolute()
    return Path.home() / ".holon"


def default_agent_id() -> str:
    return os.environ.get("HOLON_AGENT_ID") or "main"


def validate_agent_id(agent_id: str) -> str:
    if not AGENT_ID_RE.fullmatch(agent_id) or agent_id in (".", ".."):
        raise UsageError(
            f"invalid agent id {agent_id!r}",
            hint=(
                "use 1-64 characters: letters, digits, '.', '_' or '-', starting with a letter "
                "or digit"
            ),
        )
    return agent_id


class HomeLayout(NamedTuple):
    root: Path

    @classmethod
    def current(cls) -> HomeLayout:
        return cls(home_root())

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    @property
    def marker(self) -> Path:
        return self.root / "home.json"

    @property
    def locks_dir(self) -> Path:
        return self.root / "run" / "locks"

    @property
    def workspace_registry(self) -> Path:
        """The home-level workspace registry (ids by anchor)."""
        return self.root / "workspaces.json"

    @property
    def worktrees_dir(self) -> Path:
        """Where runtime-managed git worktrees live (outside any agent home, so
        removing a temporary agent never removes a worktree)."""
        return self.root / "worktrees"

    @property
    def budgets_dir(self) -> Path:
        """The home's spend plane: ``spend.jsonl`` (every agent's spend, kept
        after an agent is removed), live request ``reservations/`` and the
        bounds of running ``holon run``s (``runs/``)."""
        return self.root / "budgets"

    @property
    def spend_ledger(self) -> Path:
        return self.budgets_dir / "spend.jsonl"

    @property
    def spend_lock(self) -> Path:
        """The home spend ledger's append lock."""
        return self.locks_dir / "spend.lock"

    @property
    def budget_lock(self) -> Path:
        """Held while a request is checked against the budgets and reserved."""
        return self.locks_dir / "budgets.lock"

    @property
    def reservations_dir(self) -> Path:
        return self.budgets_dir / "reservations"

    @property
    def run_bounds_dir(self) -> Path:
        return self.budgets_dir / "runs"

    @property
    def budget_waiters_dir(self) -> Path:
        return self.budgets_dir / "waiters"

    def agent(self, agent_id: str) -> AgentLayout:
        return AgentLayout(self.agents_dir / agent_id, agent_id)


class _AgentPaths:
    """Every path of one agent home, joined once: a tick and a turn ask for
    them a hundred times, and each ``Path / name`` costs a parse."""

    __slots__ = (
        "runtime",
        "state_dir",
        "ledger_dir",
        "locks_dir",
        "inbox_dir",
        "agent_file",
        "queue_file",
        "template_file",
        "idempotency_dir",
        "idempotency_lock",
        "agent_lock",
        "turn_lock",
        "work_items_dir",
        "tasks_dir",
        "ledgers",
        "ledger_locks",
    )

    def __init__(self, home: Path) -> None:
        rt = self.runtime = home / ".holon"
        state = self.state_dir = rt / "state"
        self.ledger_dir = rt / "ledger"
        locks = self.locks_dir = rt / "locks"
        self.inbox_dir = rt / "inbox"
        self.agent_file = state / "agent.json"
        self.queue_file = state / "queue.json"
        self.template_file = state / "template.json"
        self.idempotency_dir = state / "idempotency"
        self.idempotency_lock = locks / "idempotency.lock"
        self.agent_lock = locks / "agent.lock"
        self.turn_lock = locks / "turn.lock"
        self.work_items_dir = home / "work-items"
        self.tasks_dir = rt / "tasks"
        self.ledgers: dict[str, Path] = {}
        self.ledger_locks: dict[str, Path] = {}


_PATHS: dict[Path, _AgentPaths] = {}
_PATHS_MAX = 4096  # agent homes remembered (a tick over more starts again)


def _paths(home: Path) -> _AgentPaths:
    got = _PATHS.get(home)
    if got is None:
        if len(_PATHS) >= _PATHS_MAX:
            _PATHS.clear()
        got = _PATHS[home] = _AgentPaths(home)
    return got


class AgentLayout(NamedTuple):
    home: Path
    agent_id: str

    @property
    def runtime(self) -> Path:
        return _paths(self.home).runtime

    @property
    def state_dir(self) -> Path:
        return _paths(self.home).state_dir

    @property
    def ledger_dir(self) -> Path:
        return _paths(self.home).ledger_dir

    @property
    def locks_dir(self) -> Path:
        return _paths(self.home).locks_dir

    @property
    def inbox_dir(self) -> Path:
        return _paths(self.home).inbox_dir

    @property
    def agent_file(self) -> Path:
        return _paths(self.home).agent_file

    @property
    def queue_file(self) -> Path:
        return _paths(self.home).queue_file

    @property
    def template_file(self) -> Path:
        return _paths(self.home).template_file

    @property
    def idempotency_dir(self) -> Path:
        """Idempotency keys of ``holon enqueue --idempotency-key`` (one file each)."""
        return _paths(self.home).idempotency_dir

    @property
    def idempotency_lock(self) -> Path:
        return _paths(self.home).idempotency_lock

    @property
    def agent_lock(self) -> Path:
        return _paths(self.home).agent_lock

    @property
    def turn_lock(self) -> Path:
        return _paths(self.home).turn_lock

    def ledger_path(self, name: str) -> Path:
        p = _paths(self.home)
        got = p.ledgers.get(name)
        if got is None:
            got = p.ledgers[name] = p.ledger_dir / f"{name}.jsonl"
        return got

    def ledger_lock(self, name: str) -> Path:
        p = _paths(self.home)
        got = p.ledger_locks.get(name)
        if got is None:
            got = p.ledger_locks[name] = p.locks_dir / f"{name}.lock"
        return got

    @property
    def work_items_dir(self) -> Path:
        return _paths(self.home).work_items_dir

    @property
    def tasks_dir(self) -> Path:
        return _paths(self.home).tasks_dir

    @property
    def exists(self) -> bool:
        return self.agent_file.exists()
