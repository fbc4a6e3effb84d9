"""The home-level workspace registry: ``$HOLON_HOME/workspaces.json``.

One entry per workspace anchor, so an anchor keeps its ``ws_…`` id in every
agent of the home. Entries are only ever added: detaching a workspace from an
agent, or its directory disappearing, leaves its entry (and its id) alone.
Snapshot protocol (``fsio.write_snapshot``) under ``run/locks/workspaces.lock``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from holon_cli.errors import CorruptStateError
from holon_cli.model.workspace import REGISTRY_VERSION, RegistryEntry
from holon_cli.store.fsio import read_snapshot, write_snapshot
from holon_cli.store.layout import HomeLayout
from holon_cli.store.locks import locked


def _problem(doc: Mapping[str, object]) -> str | None:
    rows = doc.get("workspaces")
    if not isinstance(rows, list):
        return "`workspaces` must be a list"
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not all(
            isinstance(r.get(k), str) and r.get(k) for k in ("workspace_id", "workspace_anchor")
        ):
            return f"workspaces[{i}] needs a `workspace_id` and a `workspace_anchor`"
    return None


def read_registry(layout: HomeLayout) -> list[RegistryEntry]:
    """Every registered workspace (none when the file does not exist yet)."""
    path = layout.workspace_registry
    doc = read_snapshot(path, max_version=REGISTRY_VERSION)
    if doc is None:
        return []
    reason = _problem(doc)
    if reason:
        raise CorruptStateError(
            f"{path}: {reason}",
            hint="restore it from a backup, or move it aside (ids are derived from anchors "
            "again on next use)",
            details={"path": str(path), "reason": reason},
        )
    return [cast(RegistryEntry, r) for r in doc["workspaces"]]


def update_registry(
    layout: HomeLayout, fn: Callable[[list[RegistryEntry]], bool]
) -> list[RegistryEntry]:
    """Read-modify-write under the registry lock; ``fn`` returns whether it
    changed anything (nothing is written otherwise)."""
    with locked(layout.locks_dir / "workspaces.lock", what="the workspace registry"):
        rows = read_registry(layout)
        if fn(rows):
            write_snapshot(layout.workspace_registry, {"v": REGISTRY_VERSION, "workspaces": rows})
        return rows
