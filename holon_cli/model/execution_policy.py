"""The execution policy projection: which confinement the command backend
enforces, as ``holon debug prompt --json`` (``execution_policy``) and the
prompt's execution binding show it.

Pure: derived from ``config.yaml``'s ``execution`` section
(``sandbox: auto|bwrap|none``, ``network: on|off``) and, for ``auto``, from
what the runtime found on this machine (``resolved``: ``bwrap`` or ``none``
and why; :func:`holon_cli.runtime.tasks.sandbox.projection` probes and
passes it). Without a sandbox nothing is enforced: commands run on the host
as the user, with the user's capabilities (``capabilities: kept``). Under
``bwrap`` paths, writes (only the execution root), child processes (inside
the sandbox, gone with it) and, unless ``network`` is on, the network are
confined, and the command has no capability (``capabilities: dropped``).
Secret confinement is never claimed: what the sandbox leaves readable is not
a promise this projection can make. Claiming less than is enforced is safe;
claiming more is not, so an ``auto`` that was not resolved counts as none.

``network`` defaults to ``on``, except where ``sandbox: bwrap`` is set
explicitly (there it was ``off`` before ``auto`` existed, and stays so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, TypedDict

Confinement = Literal["enforced", "not_enforced"]
Setting = Literal["auto", "bwrap", "none"]
SETTINGS: tuple[Setting, ...] = ("auto", "bwrap", "none")

CONFINEMENTS = (
    "path_confinement",
    "write_confinement",
    "network_confinement",
    "secret_confinement",
    "child_process_confinement",
)


class ExecutionPolicy(TypedDict):
    backend: str  # host_local | bwrap
    sandbox: str  # bwrap | none: what commands run under
    sandbox_setting: str  # auto | bwrap | none: what config.yaml asks for
    sandbox_reason: str | None  # why auto resolved to none, or why bwrap cannot run
    network: str  # on | off
    capabilities: str  # dropped | kept
    path_confinement: Confinement
    write_confinement: Confinement
    network_confinement: Confinement
    secret_confinement: Confinement
    child_process_confinement: Confinement


class Resolved(NamedTuple):
    """What ``auto`` (or ``bwrap``) came to on this machine."""

    sandbox: Literal["bwrap", "none"]
    reason: str | None = None


def _on(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("on", "true", "yes", "1")


def execution_section(config: Mapping[str, Any] | None, agent_id: str | None) -> dict[str, Any]:
    """``execution``, with ``agents.<id>.execution`` over it key by key (the
    ``env`` mapping too: its own keys one by one)."""
    cfg: Mapping[str, Any] = config or {}
    section = cfg.get("execution")
    out = dict(section) if isinstance(section, Mapping) else {}
    agents = cfg.get("agents")
    agent = agents.get(agent_id) if agent_id and isinstance(agents, Mapping) else None
    mine = agent.get("execution") if isinstance(agent, Mapping) else None
    for k, v in (mine if isinstance(mine, Mapping) else {}).items():
        if v is None:
            continue
        if k == "env" and isinstance(v, Mapping) and isinstance(out.get("env"), Mapping):
            out["env"] = {**out["env"], **{ek: ev for ek, ev in v.items() if ev is not None}}
        else:
            out[k] = v
    return out


def sandbox_setting(section: Mapping[str, Any]) -> Setting:
    raw = str(section.get("sandbox") or "auto").strip().lower()
    return raw if raw in SETTINGS else "auto"


def network_on(section: Mapping[str, Any]) -> bool:
    """``network`` of a section: on unless ``off``, or unset under an explicit ``bwrap``."""
    raw = section.get("network")
    if raw is None:
        return sandbox_setting(section) != "bwrap"
    return _on(raw)


def execution_policy(
    config: Mapping[str, Any] | None,
    agent_id: str | None = None,
    resolved: Resolved | None = None,
) -> ExecutionPolicy:
    """The projection for this config and agent. ``resolved``: what the
    sandbox setting came to on this machine (without it ``auto`` counts as
    none and an explicit ``bwrap`` as bwrap)."""
    ex = execution_section(config, agent_id)
    setting = sandbox_setting(ex)
    if resolved is None:
        resolved = (
            Resolved("bwrap")
            if setting == "bwrap"
            else Resolved("none", "execution.sandbox is none" if setting == "none" else None)
        )
    sandboxed = resolved.sandbox == "bwrap"
    net = network_on(ex)

    def c(enforced: bool) -> Confinement:
        return "enforced" if enforced else "not_enforced"

    return {
        "backend": "bwrap" if sandboxed else "host_local",
        "sandbox": resolved.sandbox,
        "sandbox_setting": setting,
        "sandbox_reason": resolved.reason,
        "network": "on" if net else "off",
        "capabilities": "dropped" if sandboxed else "kept",
        "path_confinement": c(sandboxed),
        "write_confinement": c(sandboxed),
        "network_confinement": c(sandboxed and not net),
        "secret_confinement": "not_enforced",
        "child_process_confinement": c(sandboxed),
    }


def describe(policy: ExecutionPolicy) -> str:
    """One line for the prompt: the backend, what is and is not enforced, and
    the command's capabilities."""

    states: dict[str, object] = dict(policy)

    def names(state: Confinement) -> str:
        picked = [k.removesuffix("_confinement") for k in CONFINEMENTS if states[k] == state]
        return ", ".join(n.replace("_", "-") for n in picked) or "none"

    caps = states.get("capabilities") or "kept"
    return (
        f"execution policy: {policy['backend']} (confinement enforced: {names('enforced')}; "
        f"not enforced: {names('not_enforced')}; capabilities {caps})"
    )
