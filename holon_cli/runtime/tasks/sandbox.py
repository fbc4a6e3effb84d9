"""The command sandbox: ``execution.sandbox`` and ``execution.network``.

With ``bwrap`` every model-run command (``ExecCommand``, its batch, command
tasks, ``holon task run``) starts as ``bwrap ... -- argv``: a new mount
namespace with the whole system read-only, the execution root writable, a
private ``/tmp``, ``$HOLON_HOME`` hidden behind an empty tmpfs (the root is
bound back over it when it lives there, its ``.holon/`` hidden again), a pid
namespace that dies with the supervisor and, unless ``network: on``, no
network namespace but loopback.

Invariants:
- the policy comes only from ``config.yaml`` (``execution``, then
  ``agents.<id>.execution`` key by key); nothing in a tool call can turn it off;
- configured but unavailable (``bwrap`` not on the command's ``PATH``): the
  launch raises :class:`SandboxUnavailable` before anything starts: commands
  fail closed, never unconfined;
- the environment stays the one :func:`procs.command_env` built (secrets
  withheld); bwrap adds nothing to it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from holon_cli.errors import RejectedError
from holon_cli.kinds import ErrorKind

Backend = Literal["none", "bwrap"]
Axis = Literal["enforced", "not_enforced"]
AXES = (
    "path_confinement",
    "write_confinement",
    "network_confinement",
    "secret_confinement",
    "child_process_confinement",
)
INSTALL_HINT = (
    "install bubblewrap (`apt-get install bubblewrap`) so `bwrap` is on PATH, or set "
    "`execution.sandbox: none` in config.yaml to run commands unconfined"
)


class SandboxUnavailable(RejectedError):
    kind: ErrorKind = "sandbox_unavailable"  # type: ignore[assignment]


class Policy(NamedTuple):
    backend: Backend
    network: bool

    def axes(self) -> dict[str, Axis]:
        """Which confinement axes hold for this policy: the one projection
        (``model/execution_policy.py``) that ``debug prompt`` and the prompt show."""
        from holon_cli.model.execution_policy import CONFINEMENTS, execution_policy

        network = "on" if self.network else "off"
        proj = execution_policy({"execution": {"sandbox": self.backend, "network": network}})
        return {k: proj[k] for k in CONFINEMENTS}  # type: ignore[literal-required]

    def describe(self) -> str:
        if self.backend == "none":
            return "host_local (commands run unconfined with the user's rights)"
        net = "network on" if self.network else "no network"
        return (
            "bwrap (read-only system, execution root and a private /tmp writable, "
            f".holon/ and the rest of HOLON_HOME invisible, {net})"
        )


def policy(config: Any, agent_id: str | None = None) -> Policy:
    """The sandbox policy of ``agent_id``: no sandbox unless ``bwrap``; under
    bwrap no network unless ``execution.network: on`` (the contract)."""
    from holon_cli.model.execution_policy import execution_section

    sect = execution_section(config if isinstance(config, Mapping) else None, agent_id)
    backend: Backend = "bwrap" if sect.get("sandbox") == "bwrap" else "none"
    network = sect.get("network") in (True, "on")
    return Policy(backend, network)


def bwrap_path(env: Mapping[str, str]) -> str | None:
    """``bwrap`` as the command's ``PATH`` finds it (``None``: unavailable)."""
    return shutil.which("bwrap", path=env.get("PATH", os.defpath))


def require(pol: Policy, env: Mapping[str, str]) -> str | None:
    """The bwrap executable a ``bwrap`` policy needs (``None`` for ``none``);
    raises :class:`SandboxUnavailable` when it cannot be found."""
    if pol.backend == "none":
        return None
    exe = bwrap_path(env)
    if exe is None:
        raise SandboxUnavailable(
            "execution.sandbox is bwrap but `bwrap` is not on PATH: the command was not run",
            hint=INSTALL_HINT,
            details={"sandbox": "bwrap", "path": env.get("PATH", "")},
        )
    return exe


def wrap(
    argv: list[str],
    pol: Policy,
    *,
    root: Path,
    cwd: Path,
    hidden: list[Path],
    env: Mapping[str, str],
    tty: bool = False,
) -> list[str]:
    """``argv`` as the sandbox runs it (unchanged for ``none``). ``hidden``:
    folders replaced by an empty tmpfs (``$HOLON_HOME``, the agent's
    ``.holon/``); the root is bound back over a hidden folder it lives in, and
    a hidden folder inside the root is hidden again after that."""
    exe = require(pol, env)
    if exe is None:
        return argv
    root = Path(os.path.realpath(root))
    out = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    real = [Path(os.path.realpath(h)) for h in hidden]
    around = [h for h in real if h == root or h in root.parents]  # the root is inside
    # a hidden folder inside another hidden one needs no mount of its own
    inside = [
        h for h in real if h not in around and not any(g in h.parents for g in real if g != h)
    ]
    for h in around:
        out += ["--tmpfs", str(h)]
    out += ["--bind", str(root), str(root)]
    for h in [*inside, root / ".holon"]:
        if h.is_dir():
            out += ["--tmpfs", str(h)]
    out += ["--unshare-pid", "--die-with-parent", "--unshare-ipc", "--unshare-uts"]
    if not pol.network:
        out += ["--unshare-net"]
    if not tty:
        out += ["--new-session"]  # no TIOCSTI into a terminal outside
    out += ["--chdir", str(cwd), "--"]
    return out + list(argv)
