"""The parts of ``holon home check`` beyond ledgers and snapshots: the home
itself (a file where a folder belongs, permissions), ``config.yaml``, inbox
envelopes, leftovers of killed writers, and the space ``.holon/outputs/``
uses. Read-only: nothing here changes a file.

Each function returns ``Problem``s (make ``home check`` exit 1) and notes
(reported, exit 0); ``runtime/inspect.home_check`` composes them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from holon_cli.store.layout import AgentLayout, HomeLayout
from holon_cli.store.ledger import Problem


def home_root_problem(home: HomeLayout) -> Problem | None:
    """``HOLON_HOME`` names something that is not a folder."""
    root = home.root
    if root.exists() and not root.is_dir():
        return Problem(
            str(root),
            None,
            "HOLON_HOME is a file, not a folder: point HOLON_HOME at a folder "
            "(it is created when missing), or unset it to use ~/.holon",
        )
    return None


def config_problems(home: HomeLayout) -> list[Problem]:
    from holon_cli.errors import ConfigError
    from holon_cli.store.config import load_config

    try:
        data = load_config(home)
    except ConfigError as exc:
        key = exc.details.get("key")
        msg = exc.message.removeprefix(f"{home.config}: ")
        if exc.hint:
            msg += f" ({exc.hint})"
        return [Problem(str(home.config), None, msg if key is None else msg)]
    if "ingress" not in data:
        return []
    import os

    from holon_cli.store.config_schema import ingress_problems

    # what `holon serve` needs from its environment (a webhook secret unset)
    return [
        Problem(str(home.config), None, f"{msg} (export it before `holon serve`)")
        for _key, msg in ingress_problems(data, os.environ)
    ]


def permission_notes(home: HomeLayout) -> list[dict[str, Any]]:
    """The home holds message content: say so when others can read it."""
    try:
        mode = stat.S_IMODE(home.root.stat().st_mode)
    except OSError:
        return []
    if mode & 0o077:
        return [
            {
                "path": str(home.root),
                "message": f"the home is accessible to other users (mode {mode:04o}); "
                f"it holds message content: `chmod 700 {home.root}`",
            }
        ]
    return []


def staging_notes(home: HomeLayout) -> list[dict[str, Any]]:
    from holon_cli.runtime.agents import stale_staging

    return [
        {
            "path": str(p),
            "message": "leftover of an interrupted `agent create`; "
            "it is removed by the next `holon agent create` (or remove it yourself)",
        }
        for p in stale_staging(home)
    ]


def inbox_problems(layout: AgentLayout) -> tuple[list[Problem], int]:
    """Delivered, not yet ingested messages that ingestion would refuse."""
    from holon_cli.store.records import envelope_problem

    problems: list[Problem] = []
    count = 0
    new = layout.inbox_dir / "new"
    try:
        names = sorted(os.listdir(new))
    except (FileNotFoundError, NotADirectoryError):
        return problems, 0
    for name in names:
        p = new / name
        count += 1
        try:
            import json

            obj = json.loads(p.read_bytes())
        except (OSError, ValueError) as exc:
            problems.append(Problem(str(p), None, f"unreadable inbox message: {exc}"))
            continue
        except RecursionError:  # e.g. megabytes of `[`
            problems.append(Problem(str(p), None, "unreadable inbox message: nested too deeply"))
            continue
        reason = envelope_problem(obj, "inbox message")
        if reason:
            problems.append(Problem(str(p), None, reason))
    return problems, count


def outputs_usage(layout: AgentLayout) -> dict[str, int]:
    """Files and bytes under ``.holon/outputs/`` (full outputs of truncated commands)."""
    root = layout.runtime / "outputs"
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            files += 1
            size += st.st_size
    return {"files": files, "bytes": size}


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def outputs_path(layout: AgentLayout) -> Path:
    return layout.runtime / "outputs"
