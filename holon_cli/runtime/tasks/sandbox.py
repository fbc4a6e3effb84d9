"""The command sandbox: ``execution.sandbox`` (``auto|bwrap|none``, default
``auto``) and ``execution.network``.

Under bwrap every model-run command (``ExecCommand``, its batch, command
tasks, ``holon task run``) starts as ``bwrap ... -- argv``:

- no capabilities whatever holon's uid (``--cap-drop ALL``), in a user
  namespace that cannot create another one where the kernel allows it
  (:mod:`.sandbox_probe` picks the form): ``mount``, ``umount``, ``chroot``
  and raw sockets fail, even for root;
- a new mount namespace with the whole system read-only, the execution root
  writable, a private ``/tmp``, ``$HOLON_HOME`` hidden behind an empty tmpfs
  (the root is bound back over it when it lives there, its ``.holon/``
  hidden again); new pid, ipc and uts namespaces; the tree dies with the
  supervisor;
- ``network: off``: a network namespace with loopback only (no TCP/UDP to
  the host, no abstract socket), the host's ``/run`` (and a real
  ``/var/run``) hidden too, and the seccomp filter of :mod:`.seccomp`: no
  Unix socket can be created, so no socket file anywhere on the read-only
  filesystem can be reached.

``auto`` is bwrap when bubblewrap is installed and works here (probed once,
cached: :mod:`.sandbox_probe`), else no sandbox, with the reason in
``holon status``, ``debug prompt --json`` and ``home check``.

Invariants:
- the policy comes only from ``config.yaml`` (``execution``, then
  ``agents.<id>.execution`` key by key); nothing in a tool call can turn it off;
- ``bwrap`` set explicitly and unusable (not on the command's ``PATH``, or
  the probe failed): the launch raises :class:`SandboxUnavailable` before
  anything starts: commands fail closed, never unconfined;
- the environment stays the one :func:`.environment.command_env` built;
  bwrap adds nothing to it but ``TMPDIR=/tmp`` when the caller's ``TMPDIR``
  would be read-only inside.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypedDict

from holon_cli.errors import RejectedError
from holon_cli.kinds import ErrorKind
from holon_cli.model.execution_policy import (
    ExecutionPolicy,
    Resolved,
    Setting,
    execution_policy,
    execution_section,
    network_on,
    sandbox_setting,
)
from holon_cli.runtime.tasks import sandbox_probe
from holon_cli.runtime.tasks.sandbox_probe import Probe

Backend = Literal["none", "bwrap"]
INSTALL_HINT = (
    "install bubblewrap (`apt-get install bubblewrap`) so `bwrap` is on PATH, or set "
    "`execution.sandbox: none` in config.yaml to run commands unconfined"
)
UNUSABLE_HINT = (
    "allow unprivileged user namespaces (e.g. `sysctl kernel.unprivileged_userns_clone=1`, "
    "or the AppArmor profile for bwrap on Ubuntu), or set `execution.sandbox: none` in "
    "config.yaml to run commands unconfined"
)
# where a command's argv carries the seccomp program's fd (the supervisor
# replaces the argument at ``Wrapped.seccomp_arg`` with the real number)
SECCOMP_FD_PLACEHOLDER = "<seccomp-fd>"
# host folders a network-off sandbox hides: sockets of system services live there
HIDDEN_WITHOUT_NETWORK = ("/run", "/var/run")


class SandboxUnavailable(RejectedError):
    kind: ErrorKind = "sandbox_unavailable"


class Policy(NamedTuple):
    """What the command backend applies: ``backend`` is what commands run
    under; ``usable`` False only for an explicit ``bwrap`` that cannot run
    here (commands are then refused)."""

    backend: Backend
    network: bool
    setting: Setting = "bwrap"
    reason: str | None = None
    usable: bool = True
    form: str | None = None
    exe: str | None = None

    def resolved(self) -> Resolved:
        return Resolved(self.backend, self.reason)

    def axes(self) -> dict[str, str]:
        """Which confinement axes hold for this policy: the one projection
        (``model/execution_policy.py``) that ``debug prompt`` and the prompt show."""
        from holon_cli.model.execution_policy import CONFINEMENTS

        cfg = {"execution": {"sandbox": self.setting, "network": "on" if self.network else "off"}}
        proj: Mapping[str, object] = execution_policy(cfg, None, self.resolved())
        return {k: str(proj[k]) for k in CONFINEMENTS}

    def describe(self) -> str:
        if self.backend == "none":
            why = f": {self.reason}" if self.reason else ""
            return f"host_local (commands run unconfined with the user's rights{why})"
        net = "network on" if self.network else "no network, no Unix sockets"
        return (
            "bwrap (no capabilities, read-only system, execution root and a private /tmp "
            f"writable, .holon/ and the rest of HOLON_HOME invisible, {net})"
        )


def which(name: str, path: str | None) -> str | None:
    """``name`` as ``PATH`` finds it (``shutil.which`` without importing shutil:
    ``holon status`` reads the sandbox's state)."""
    for d in (path if path is not None else os.defpath).split(os.pathsep):
        cand = os.path.join(d or ".", name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def bwrap_path(env: Mapping[str, str]) -> str | None:
    """``bwrap`` as the command's ``PATH`` finds it (``None``: unavailable)."""
    return which("bwrap", env.get("PATH", os.defpath))


def _run_dir() -> Path:
    from holon_cli.store.layout import HomeLayout

    return HomeLayout.current().run_dir


_filter: list[bytes | None] = []


def _seccomp() -> bytes | None:
    if not _filter:
        from holon_cli.runtime.tasks.seccomp import unix_socket_filter

        _filter.append(unix_socket_filter())
    return _filter[0]


# what `bwrap` on a PATH came to, for a while: a turn resolves the policy for
# every round's prompt and every command (~0.5 ms each to look bwrap up and
# key its probe); installing or fixing bubblewrap is seen within this delay
RECHECK_S = 30.0
_recent: dict[tuple[str, str], tuple[float, str | None, Probe | None]] = {}


def forget() -> None:
    """Drop what this process remembers (tests; the file cache stays)."""
    _recent.clear()
    sandbox_probe._memo.clear()


def _usable(path: str) -> tuple[str | None, Probe | None]:
    """``bwrap`` on ``path`` and its probe (None, None: not installed)."""
    run_dir = _run_dir()
    key = (path, str(run_dir))
    now = time.monotonic()
    hit = _recent.get(key)
    if hit is not None and now - hit[0] < RECHECK_S:
        return hit[1], hit[2]
    exe = which("bwrap", path)
    found = None if exe is None else sandbox_probe.probe(exe, run_dir, _seccomp())
    _recent[key] = (now, exe, found)
    return exe, found


def policy(
    config: Any, agent_id: str | None = None, env: Mapping[str, str] | None = None
) -> Policy:
    """The sandbox policy of ``agent_id`` on this machine (probing bwrap once
    when the setting is ``auto`` or ``bwrap``). ``env``: the command's
    environment (its ``PATH`` finds bwrap); default ours."""
    sect = execution_section(config if isinstance(config, Mapping) else None, agent_id)
    setting = sandbox_setting(sect)
    net = network_on(sect)
    if setting == "none":
        return Policy("none", net, setting, "execution.sandbox is none")
    exe, found = _usable((os.environ if env is None else env).get("PATH", os.defpath))
    if exe is None or found is None:
        why = "bubblewrap is not installed (`bwrap` is not on PATH)"
        if setting == "auto":
            return Policy("none", net, setting, why)
        return Policy("bwrap", net, setting, why, usable=False)
    if found.ok:
        return Policy("bwrap", net, setting, None, form=found.form, exe=exe)
    if setting == "auto":
        return Policy("none", net, setting, found.reason)
    return Policy("bwrap", net, setting, found.reason, usable=False, exe=exe)


def projection(config: Any, agent_id: str | None = None) -> ExecutionPolicy:
    """``execution_policy`` with ``auto`` resolved on this machine: what
    ``holon debug prompt --json`` and every turn's prompt show."""
    cfg = config if isinstance(config, Mapping) else None
    return execution_policy(cfg, agent_id, policy(cfg, agent_id).resolved())


class SandboxStatus(TypedDict):
    """The sandbox as ``holon status`` shows it."""

    setting: str
    network: str  # on | off
    sandbox: str  # bwrap | none | unknown (not probed yet)
    reason: str | None


def status(config: Any, agent_id: str | None = None) -> SandboxStatus:
    """The sandbox as ``holon status`` shows it, from the probe's cache only
    (``sandbox: unknown`` until something probed: a command, ``holon home
    check``, ``holon debug prompt``)."""
    sect = execution_section(config if isinstance(config, Mapping) else None, agent_id)
    setting = sandbox_setting(sect)
    net = "on" if network_on(sect) else "off"

    def said(sandbox: str, reason: str | None) -> SandboxStatus:
        return {"setting": setting, "network": net, "sandbox": sandbox, "reason": reason}

    if setting == "none":
        return said("none", "execution.sandbox is none")
    exe = bwrap_path(os.environ)
    if exe is None:
        why = "bubblewrap is not installed (`bwrap` is not on PATH)"
        if setting == "bwrap":
            why += ": commands are refused"
        return said("none" if setting == "auto" else "bwrap", why)
    hit = sandbox_probe.cached(exe, _run_dir())
    if hit is None:
        why = "not probed yet (the first command, `holon home check` or `holon debug prompt` does)"
        return said("unknown", why)
    if hit.ok:
        return said("bwrap", None)
    if setting == "bwrap":
        return said("bwrap", f"{hit.reason}: commands are refused")
    return said("none", hit.reason)


def require(pol: Policy) -> None:
    """Raise :class:`SandboxUnavailable` when ``bwrap`` is set but cannot run."""
    if pol.backend == "none" or pol.usable:
        return
    missing = pol.exe is None
    raise SandboxUnavailable(
        "execution.sandbox is bwrap but "
        + ("`bwrap` is not on PATH" if missing else f"it cannot run here ({pol.reason})")
        + ": the command was not run",
        hint=INSTALL_HINT if missing else UNUSABLE_HINT,
        details={"sandbox": "bwrap", "reason": pol.reason},
    )


class Wrapped(NamedTuple):
    """A command as the sandbox runs it: ``argv``, and the seccomp program
    to hand bwrap on a pipe (its fd goes to ``argv[seccomp_arg]``)."""

    argv: list[str]
    seccomp: bytes | None = None
    seccomp_arg: int | None = None

    def spawnable(self) -> tuple[list[str], tuple[int, ...]]:
        """``(argv, pass_fds)`` for a caller that starts the command itself
        (an MCP stdio server): the seccomp program is written to a pipe whose
        read end is in ``pass_fds`` and in ``argv``; close those fds once the
        process is started. (The task supervisor does the same from the
        launch spec.)"""
        argv = list(self.argv)
        if self.seccomp is None or self.seccomp_arg is None:
            return argv, ()
        r, w = os.pipe()
        try:
            os.write(w, self.seccomp)
        finally:
            os.close(w)
        argv[self.seccomp_arg] = str(r)
        return argv, (r,)


def wrap(
    argv: list[str],
    pol: Policy,
    *,
    root: Path,
    cwd: Path,
    hidden: list[Path],
    env: Mapping[str, str],
    tty: bool = False,
    anchor: Path | None = None,
) -> Wrapped:
    """``argv`` as the sandbox runs it (unchanged for ``none``). ``hidden``:
    folders replaced by an empty tmpfs (``$HOLON_HOME``, the agent's
    ``.holon/``); the root is bound back over a hidden folder it lives in, and
    a hidden folder inside the root is hidden again after that. ``anchor``:
    the workspace anchor of the binding (see :func:`_git_binds`)."""
    require(pol)
    if pol.backend == "none":
        return Wrapped(list(argv))
    exe = pol.exe or bwrap_path(env)
    assert exe is not None
    seccomp = None if pol.network else _seccomp()
    if not pol.network and seccomp is None:
        raise SandboxUnavailable(
            f"execution.network is off but this machine's architecture ({os.uname().machine}) "
            "has no seccomp filter here to block Unix sockets: the command was not run",
            hint="set `execution.network: on` (or `execution.sandbox: none`) in config.yaml",
            details={"sandbox": "bwrap", "network": "off"},
        )
    root = Path(os.path.realpath(root))
    out = [exe, *_flags(pol.form), "--cap-drop", "ALL"]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if not pol.network:
        for d in HIDDEN_WITHOUT_NETWORK:
            if os.path.isdir(d) and not os.path.islink(d):
                out += ["--tmpfs", d]
    real = [Path(os.path.realpath(h)) for h in hidden]
    around = [h for h in real if h == root or h in root.parents]  # the root is inside
    # a hidden folder inside another hidden one needs no mount of its own
    inside = [
        h for h in real if h not in around and not any(g in h.parents for g in real if g != h)
    ]
    for h in around:
        out += ["--tmpfs", str(h)]
    out += ["--bind", str(root), str(root)]
    out += _git_binds(root, anchor, real)
    for h in [*inside, root / ".holon"]:
        if h.is_dir():
            out += ["--tmpfs", str(h)]
    out += ["--unshare-pid", "--die-with-parent", "--unshare-ipc", "--unshare-uts"]
    if not pol.network:
        out += ["--unshare-net"]
    if not tty:
        out += ["--new-session"]  # no TIOCSTI into a terminal outside
    tmpdir = env.get("TMPDIR")
    if tmpdir and tmpdir != "/tmp" and not _inside(Path(tmpdir), root):
        out += ["--setenv", "TMPDIR", "/tmp"]  # read-only inside: the private /tmp instead
    at = None
    if seccomp is not None:
        out += ["--seccomp", SECCOMP_FD_PLACEHOLDER]
        at = len(out) - 1
    out += ["--chdir", str(cwd), "--"]
    return Wrapped(out + list(argv), seccomp, at)


# what a commit in a linked worktree writes in the repository's common git
# folder; its config, hooks and info/ stay read-only (a hook or
# ``core.fsmonitor`` written there would run outside the sandbox later)
GIT_COMMON_WRITABLE = ("objects", "refs", "logs")


def _git_binds(root: Path, anchor: Path | None, hidden: list[Path]) -> list[str]:
    """A linked git worktree as the root (a managed one, or the user's): its
    ``.git`` file points outside the root, into its repository's git folder.
    That folder is made visible (read-only, even under ``/tmp``) and what a
    commit writes is made writable: the worktree's own folder (``HEAD``,
    ``index``) and the common ``objects``, ``refs`` and ``logs``.

    The repository is the binding's anchor (chosen through the workspace
    plane, the home refused), never what the ``.git`` file in the root says:
    the command can rewrite that file. The file only picks which of the
    anchor's ``.git/worktrees/<name>`` folders is this one; pointing it
    anywhere else binds nothing. Nothing inside a hidden folder (the holon
    home) is bound."""
    if anchor is None:
        return []
    common = Path(os.path.realpath(Path(anchor) / ".git"))
    if not common.is_dir() or _inside(common, root):
        return []  # no repository, or a plain checkout (its .git is inside the root)
    try:
        text = (root / ".git").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    gitdir = Path(os.path.realpath(root / text[len("gitdir:") :].strip()))
    if gitdir.parent != common / "worktrees" or not gitdir.is_dir():
        return []
    if any(_inside(common, h) or _inside(h, common) for h in hidden):
        return []
    out = ["--ro-bind", str(common), str(common)]
    for sub in (*(common / n for n in GIT_COMMON_WRITABLE), gitdir):
        if sub.is_dir():
            out += ["--bind", str(sub), str(sub)]
    return out


def _flags(form: str | None) -> tuple[str, ...]:
    return dict(sandbox_probe.FORMS).get(form or "", ())


def _inside(path: Path, root: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents
