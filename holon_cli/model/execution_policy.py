"""The execution policy projection: which confinement the command backend
enforces, as ``holon debug prompt --json`` (``execution_policy``) and the
prompt's execution binding show it.

Pure: derived from ``config.yaml``'s ``execution`` section alone
(``sandbox: none|bwrap``, ``network: on|off``). Without a sandbox nothing is
enforced: commands run on the host as the user. Under ``bwrap`` paths, writes
(only the execution root), child processes (inside the sandbox, gone with
it) and, unless ``network`` is on, the network are confined. Secret
confinement is never claimed: what the sandbox leaves readable is not a
promise this projection can make. Claiming less than is enforced is safe;
claiming more is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

Confinement = Literal["enforced", "not_enforced"]

CONFINEMENTS = (
    "path_confinement",
    "write_confinement",
    "network_confinement",
    "secret_confinement",
    "child_process_confinement",
)


class ExecutionPolicy(TypedDict):
    backend: str  # host_local | bwrap
    path_confinement: Confinement
    write_confinement: Confinement
    network_confinement: Confinement
    secret_confinement: Confinement
    child_process_confinement: Confinement


def _on(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("on", "true", "yes", "1")


def execution_section(config: Mapping[str, Any] | None, agent_id: str | None) -> dict[str, Any]:
    """``execution``, with ``agents.<id>.execution`` over it key by key."""
    cfg: Mapping[str, Any] = config or {}
    section = cfg.get("execution")
    out = dict(section) if isinstance(section, Mapping) else {}
    agents = cfg.get("agents")
    agent = agents.get(agent_id) if agent_id and isinstance(agents, Mapping) else None
    mine = agent.get("execution") if isinstance(agent, Mapping) else None
    for k, v in (mine if isinstance(mine, Mapping) else {}).items():
        if v is not None:
            out[k] = v
    return out


def execution_policy(
    config: Mapping[str, Any] | None, agent_id: str | None = None
) -> ExecutionPolicy:
    """The projection for this config and agent (the sandbox the command
    backend applies: :func:`holon_cli.runtime.tasks.sandbox.policy` reads the
    same section)."""
    ex = execution_section(config, agent_id)
    sandboxed = str(ex.get("sandbox") or "none").strip().lower() == "bwrap"

    def c(enforced: bool) -> Confinement:
        return "enforced" if enforced else "not_enforced"

    return {
        "backend": "bwrap" if sandboxed else "host_local",
        "path_confinement": c(sandboxed),
        "write_confinement": c(sandboxed),
        "network_confinement": c(sandboxed and not _on(ex.get("network", False))),
        "secret_confinement": "not_enforced",
        "child_process_confinement": c(sandboxed),
    }


def describe(policy: ExecutionPolicy) -> str:
    """One line for the prompt: the backend, then what is and is not enforced."""

    states: dict[str, object] = dict(policy)

    def names(state: Confinement) -> str:
        picked = [k.removesuffix("_confinement") for k in CONFINEMENTS if states[k] == state]
        return ", ".join(n.replace("_", "-") for n in picked) or "none"

    return (
        f"execution policy: {policy['backend']} (confinement enforced: {names('enforced')}; "
        f"not enforced: {names('not_enforced')})"
    )
