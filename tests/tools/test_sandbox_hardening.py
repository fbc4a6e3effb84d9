"""Issue 35 items 1, 2 and 10: the sandbox holds as root and as an
unprivileged user.

One probe (``PROBE``, standard-library Python run with the system's
``python3`` inside the sandbox) tries every way out the reliability probe
found, and prints what worked:

- item 1: ``CapEff`` is 0; ``mount -o remount,rw /``, ``umount`` of the
  tmpfs hiding ``$HOLON_HOME`` (also from a nested user namespace), ``chroot``,
  a raw socket and a write to ``/etc`` all fail;
- item 2, ``network: off``: no host socket is reachable: a Unix listener
  under ``/tmp``, under ``/run`` and in a folder of the test outside the
  execution root, a Unix datagram socket there (by ``socket`` or by a
  datagram ``socketpair`` and ``sendto``), an abstract socket and a TCP
  listener on 127.0.0.1; the host's ``/run`` and ``/dev/shm`` are not
  visible.

As root it runs through the real tool path (``ExecCommand``, the default
``auto`` setting and an explicit ``bwrap``); as ``nobody`` the argv holon
builds (``sandbox.wrap``, with the form an unprivileged probe picked) runs
under ``setpriv --reuid=65534``. The same probe without a sandbox reaches
every listener: the probe can see an escape.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from holon_cli.providers.base import ToolCall
from holon_cli.runtime.tasks import sandbox, sandbox_probe
from holon_cli.runtime.tasks.seccomp import unix_socket_filter
from holon_cli.store.layout import HomeLayout
from holon_cli.tools.base import ToolContext, ToolResult, execute
from holon_cli.tools.catalog import registry
from tests.inprocess_cli import bind_runner, run  # noqa: F401  (bind_runner: autouse)

REPO = Path(__file__).resolve().parents[2]
PY3 = "/usr/bin/python3"
BWRAP = shutil.which("bwrap")


def _why_not() -> str | None:
    if BWRAP is None:
        return "bubblewrap is not installed (bwrap not on PATH)"
    if not os.access(PY3, os.X_OK):
        return f"the probe needs {PY3}"
    found = sandbox_probe._run_probe(BWRAP, unix_socket_filter())
    return None if found.ok else str(found.reason)


WHY_NOT = _why_not()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")

PROBE = r"""
import json, os, socket, subprocess, sys
a = json.loads(sys.argv[1])
out = {}
caps = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("CapEff")]
out["capeff"] = caps[0]
def ok(cmd):
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
out["remount_rw"] = ok(["mount", "-o", "remount,rw", "/"])
out["umount_home"] = ok(["umount", a["home"]])
out["nested_umount_home"] = ok(["unshare", "-Urm", "umount", a["home"]])
out["chroot"] = ok(["/usr/sbin/chroot", "/", "/bin/true"])
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
    out["raw_socket"] = True
except OSError:
    out["raw_socket"] = False
try:
    with open("/etc/holon-escape-" + a["tag"], "w") as f:
        f.write("x")
    out["etc_write"] = True
except OSError:
    out["etc_write"] = False
def connect(family, addr):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return False
    s.settimeout(3)
    try:
        s.connect(addr)
        return s.recv(16) == b"hello\n"
    except OSError:
        return False
    finally:
        s.close()
out["unix"] = {name: connect(socket.AF_UNIX, p) for name, p in a["unix"].items()}
def dgram(make):
    try:
        s = make()
    except OSError:
        return False
    try:
        return s.sendto(b"x", a["dgram"]) == 1
    except OSError:
        return False
out["dgram"] = dgram(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
# a connected pair reaches nothing, but a datagram one can still sendto() a path
out["dgram_pair"] = dgram(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0])
# a virtual machine's host (CID 2) answers on vsock whatever the network namespace
try:
    v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    v.settimeout(3)
    try:
        v.connect((2, 1024))
        out["vsock_host"] = True
    except ConnectionResetError:
        out["vsock_host"] = True  # the host answered (nothing listens there)
    except OSError:
        out["vsock_host"] = False
except (OSError, AttributeError):
    out["vsock_host"] = False
out["abstract"] = connect(socket.AF_UNIX, "\0" + a["abstract"])
out["tcp"] = connect(socket.AF_INET, ("127.0.0.1", a["tcp"]))
out["visible"] = {name: os.path.exists(p) for name, p in a["markers"].items()}
print("PROBE " + json.dumps(out))
"""

ESCAPES_CLOSED = {
    "capeff": "0000000000000000",
    "remount_rw": False,
    "umount_home": False,
    "nested_umount_home": False,
    "chroot": False,
    "raw_socket": False,
    "etc_write": False,
}


class Host(NamedTuple):
    """What the test sets up outside the sandbox for the probe to reach."""

    args: dict[str, Any]
    cleanup: list[Path]


def _serve_unix(sock: socket.socket, stop: threading.Event) -> None:
    sock.settimeout(0.1)
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except OSError:
            continue
        try:
            conn.sendall(b"hello\n")
        finally:
            conn.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """Listeners on the host: Unix sockets under /tmp, /run and a folder of
    the test outside the root; an abstract socket; TCP on 127.0.0.1. Markers
    under /run and /dev/shm. Sockets are 0777 so that ``nobody`` could
    connect if nothing else stopped it."""
    tag = secrets.token_hex(4)
    outside = Path(tempfile.mkdtemp(prefix="holon-sbx-out-", dir="/var/tmp"))
    os.chmod(outside, 0o755)
    paths = {"tmp": Path(f"/tmp/holon-sbx-{tag}.sock"), "folder": outside / "x.sock"}
    if os.access("/run", os.W_OK):
        paths["run"] = Path(f"/run/holon-sbx-{tag}.sock")
    stop = threading.Event()
    socks: list[socket.socket] = []
    for p in paths.values():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(p))
        os.chmod(p, 0o777)
        s.listen(8)
        socks.append(s)
    ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ab.bind(f"\0holon-sbx-{tag}")
    ab.listen(8)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    socks += [ab, tcp]
    dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # no listener thread: it queues
    dg.bind(str(outside / "d.sock"))
    os.chmod(outside / "d.sock", 0o777)
    threads = [threading.Thread(target=_serve_unix, args=(s, stop), daemon=True) for s in socks]
    for t in threads:
        t.start()
    markers = {"shm": Path(f"/dev/shm/holon-sbx-{tag}.marker")}
    if os.access("/run", os.W_OK):
        markers["run"] = Path(f"/run/holon-sbx-{tag}.marker")
    for m in markers.values():
        m.write_text("host\n")
        os.chmod(m, 0o644)
    args = {
        "tag": tag,
        "unix": {k: str(v) for k, v in paths.items()},
        "abstract": f"holon-sbx-{tag}",
        "tcp": tcp.getsockname()[1],
        "dgram": str(outside / "d.sock"),
        "markers": {k: str(v) for k, v in markers.items()},
    }
    try:
        yield Host(args, [*paths.values(), *markers.values()])
    finally:
        stop.set()
        for t in threads:
            t.join(2)
        for s in [*socks, dg]:
            s.close()
        for p in [*paths.values(), *markers.values()]:
            p.unlink(missing_ok=True)
        shutil.rmtree(outside, ignore_errors=True)
        Path(f"/etc/holon-escape-{tag}").unlink(missing_ok=True)


def _result(text: str) -> dict[str, Any]:
    line = next((ln for ln in text.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, text
    out: dict[str, Any] = json.loads(line[len("PROBE ") :])
    return out


def _escapes(got: dict[str, Any], network_off: bool) -> list[str]:
    """Every way out that worked (empty: the sandbox held)."""
    bad = [k for k, v in ESCAPES_CLOSED.items() if got[k] != v]
    if network_off:
        bad += [f"unix:{k}" for k, v in got["unix"].items() if v]
        bad += ["abstract"] * got["abstract"] + ["tcp"] * got["tcp"]
        bad += ["dgram"] * got["dgram"] + ["dgram_pair"] * got["dgram_pair"]
        bad += ["vsock_host"] * got["vsock_host"]
        bad += [f"visible:{k}" for k, v in got["visible"].items() if v]
    return bad


def _tool_run(ctx: ToolContext, host: Host, home: Path) -> dict[str, Any]:
    script = ctx.execution_root / "probe.py"
    script.write_text(PROBE)
    args = json.dumps({**host.args, "home": str(home)})
    cmd = f"{PY3} probe.py '{args}'"
    call = ToolCall(id="c", name="ExecCommand", arguments={"cmd": cmd, "max_output_tokens": 4000})
    r: ToolResult = execute(registry()["ExecCommand"], ctx, call)
    assert r.ok and r.data["exit_status"] == 0, r.content
    return _result(str(r.data["stdout_preview"]))


# ------------------------------------------------------------- as root


@needs_bwrap
@pytest.mark.parametrize(
    ("execution", "network_off"),
    [
        ({}, False),  # the default: auto, network on
        ({"network": "off"}, True),  # auto, network off
        ({"sandbox": "bwrap"}, True),  # explicit bwrap: network off unless on
        ({"sandbox": "bwrap", "network": "on"}, False),
    ],
)
def test_the_sandbox_holds_through_the_tool_path(
    ctx: ToolContext, host: Host, execution: dict[str, str], network_off: bool
) -> None:
    c = dataclasses.replace(ctx, config={"execution": execution} if execution else {})
    home = HomeLayout.current().root
    got = _tool_run(c, host, home)
    assert _escapes(got, network_off) == [], got
    if not network_off:  # what network on leaves: TCP and the test's own folder
        assert got["tcp"] and got["unix"]["folder"]
        assert not got["unix"]["tmp"]  # /tmp is private whatever the network


def test_without_a_sandbox_the_probe_sees_every_way_out(ctx: ToolContext, host: Host) -> None:
    """The control: unsandboxed, the same probe reaches every listener (so a
    sandbox that let one through would fail the tests above)."""
    c = dataclasses.replace(ctx, config={"execution": {"sandbox": "none"}})
    if not os.access(PY3, os.X_OK):
        pytest.skip(f"the probe needs {PY3}")
    got = _tool_run(c, host, HomeLayout.current().root)
    assert all(got["unix"].values()) and got["abstract"] and got["tcp"], got
    assert got["dgram"] and got["dgram_pair"], got
    assert all(got["visible"].values()), got
    if os.geteuid() == 0:
        assert got["capeff"] != "0000000000000000"


# ----------------------------------------------------------- as nobody


def _as_nobody() -> str | None:
    if os.geteuid() != 0:
        return "runs as root only (it switches to nobody); this run is unprivileged already"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    return WHY_NOT


@pytest.fixture
def nobody_dirs() -> Iterator[tuple[Path, Path]]:
    """An execution root and a home owned by nobody, where nobody can reach them."""
    base = Path(tempfile.mkdtemp(prefix="holon-sbx-nobody-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    root, home = base / "root", base / "home"
    for d in (root, home, home / "agents"):
        d.mkdir()
    (home / "config.yaml").write_text("control_token: secret\n")
    for p in (root, home, home / "agents", home / "config.yaml"):
        os.chown(p, 65534, 65534)
    (root / "probe.py").write_text(PROBE)
    os.chmod(root / "probe.py", 0o644)
    try:
        yield root, home
    finally:
        shutil.rmtree(base, ignore_errors=True)


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@pytest.mark.skipif(_as_nobody() is not None, reason=_as_nobody() or "")
@pytest.mark.parametrize("network", ["off", "on"])
def test_the_sandbox_holds_for_an_unprivileged_user(
    host: Host, nobody_dirs: tuple[Path, Path], network: str
) -> None:
    root, home = nobody_dirs
    # the form an unprivileged holon's probe picks (the system python: nobody
    # cannot reach this venv's)
    pick = subprocess.run(
        [
            *NOBODY,
            PY3,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]);"
            "from holon_cli.runtime.tasks import sandbox_probe as p, seccomp as s;"
            "print(p._run_probe(sys.argv[2], s.unix_socket_filter()).form)",
            str(REPO),
            str(BWRAP),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    form = pick.stdout.strip()
    assert pick.returncode == 0 and form in dict(sandbox_probe.FORMS), pick.stderr
    pol = sandbox.Policy("bwrap", network == "on", "auto", form=form, exe=BWRAP)
    args = json.dumps({**host.args, "home": str(home)})
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(root)}
    w = sandbox.wrap([PY3, "probe.py", args], pol, root=root, cwd=root, hidden=[home], env=env)
    argv, fds = w.spawnable()  # what a caller that spawns the command itself uses
    assert (w.seccomp is not None) == (network == "off") and len(fds) == (network == "off")
    try:
        res = subprocess.run(
            [*NOBODY, *argv], pass_fds=fds, env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        for fd in fds:
            os.close(fd)
    assert res.returncode == 0, res.stderr
    got = _result(res.stdout)
    assert _escapes(got, network == "off") == [], got


# ----------------------------------------------------- auto and its probe


def test_auto_without_bubblewrap_runs_unconfined_and_says_why(
    ctx: ToolContext, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    (empty / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(empty))
    pol = sandbox.policy({}, None)
    assert (pol.setting, pol.backend) == ("auto", "none")
    assert "bubblewrap is not installed" in str(pol.reason)
    proj = sandbox.projection({}, None)
    assert proj["sandbox"] == "none" and proj["capabilities"] == "kept"
    assert "not installed" in str(proj["sandbox_reason"])
    r = execute(
        registry()["ExecCommand"],
        dataclasses.replace(ctx, config={}),
        ToolCall(id="c", name="ExecCommand", arguments={"cmd": "echo ran > ran.txt"}),
    )
    assert r.ok and (root / "ran.txt").read_text() == "ran\n"  # unconfined, not refused


def test_the_probe_runs_once_and_is_cached_in_the_home(
    holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake bwrap counts its runs: the first policy probes, the next ones
    (this process, then a new one reading run/sandbox-probe.json) do not; a
    changed bwrap probes again."""
    fake = tmp_path / "bin"
    fake.mkdir()
    count = tmp_path / "runs"
    (fake / "bwrap").write_text(f"#!/bin/sh\necho run >> {count}\nexit 0\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    (holon_home / "run").mkdir(parents=True)
    sandbox.forget()
    for _ in range(3):
        assert sandbox.policy({}, None).backend == "bwrap"
    assert count.read_text().count("run") == 1
    cache = holon_home / "run" / sandbox_probe.CACHE_NAME
    assert (os.stat(cache).st_mode & 0o777) == 0o600
    sandbox.forget()  # a new process: the file answers
    assert sandbox.policy({}, None).form == "userns"
    assert count.read_text().count("run") == 1
    # status reads the cache only
    assert sandbox.status({}, None)["sandbox"] == "bwrap"
    (fake / "bwrap").write_text(f"#!/bin/sh\necho run >> {count}\necho 'bwrap: no' >&2\nexit 1\n")
    sandbox.forget()
    pol = sandbox.policy({}, None)  # another bwrap (size, mtime): probed again
    assert pol.backend == "none" and "bwrap: no" in str(pol.reason)
    assert count.read_text().count("run") == 1 + len(sandbox_probe.FORMS)
    explicit = sandbox.policy({"execution": {"sandbox": "bwrap"}}, None)
    assert explicit.backend == "bwrap" and not explicit.usable
    with pytest.raises(sandbox.SandboxUnavailable) as exc:
        sandbox.require(explicit)
    assert exc.value.exit_code == 4 and "bwrap: no" in exc.value.message


def test_status_never_probes(
    holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    count = tmp_path / "runs"
    (fake / "bwrap").write_text(f"#!/bin/sh\necho run >> {count}\nexit 0\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    sandbox.forget()
    res = run("status", "--json")
    assert res.returncode == 0, res.stderr
    sb = json.loads(res.stdout)["data"]["sandbox"]
    assert sb["sandbox"] == "unknown" and "not probed yet" in sb["reason"]
    assert not count.exists()
    run("home", "check")  # probes (and caches) it
    assert count.read_text().count("run") == 1
    sandbox.forget()
    sb = json.loads(run("status", "--json").stdout)["data"]["sandbox"]
    assert sb == {"setting": "auto", "network": "on", "sandbox": "bwrap", "reason": None}
    text = run("status").stdout
    assert "sandbox" in text and "bwrap (auto, network on)" in text


def test_home_check_notes_an_auto_without_bubblewrap(
    holon_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    run("enqueue", "hi")
    res = run("home", "check", "--json")
    d = json.loads(res.stdout)["data"]
    assert res.returncode == 0 and d["ok"] is True  # a note, not a problem
    assert any("unsandboxed" in n["message"] for n in d["notes"]), d["notes"]
    sb = json.loads(run("status", "--json").stdout)["data"]["sandbox"]
    assert sb["sandbox"] == "none" and "not installed" in sb["reason"]
    # an explicit bwrap that cannot run is a problem: every command is refused
    (holon_home / "config.yaml").write_text("execution:\n  sandbox: bwrap\n")
    res = run("home", "check", "--json")
    problems = json.loads(res.stdout)["error"]["details"]["problems"]
    assert res.returncode == 1 and any("refused" in p["message"] for p in problems)


def test_the_prompt_and_debug_prompt_say_what_auto_came_to(holon_home: Path) -> None:
    res = run("debug", "prompt", "--json")
    d = json.loads(res.stdout)["data"]
    pol = d["execution_policy"]
    expected = "bwrap" if WHY_NOT is None else "none"
    assert pol["sandbox_setting"] == "auto" and pol["sandbox"] == expected
    assert pol["capabilities"] == ("dropped" if expected == "bwrap" else "kept")
    binding = next(s["text"] for s in d["sections"] if s["title"] == "execution binding")
    assert f"capabilities {pol['capabilities']}" in binding


def test_probe_is_a_subprocess_free_spawn() -> None:
    """``holon run`` builds its prompt with the resolved policy: the probe
    must not load ``subprocess`` (test_startup_imports checks the run)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from holon_cli.runtime.tasks import sandbox_probe, seccomp;"
        "sandbox_probe._run_probe(sys.argv[2] if len(sys.argv) > 2 else '/bin/false', "
        "seccomp.unix_socket_filter());"
        "print('subprocess' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(REPO), *([BWRAP] if BWRAP else [])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "False", out.stderr


# ---------------------------------------------------- git worktrees inside


@needs_bwrap
def test_a_linked_worktree_commits_but_cannot_plant_a_hook(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Isolated mode: the worktree lives in the home, its repository outside
    (here under /dev/shm or /tmp, hidden by the sandbox): a commit works, a
    hook or a config line written into the repository (run later outside the
    sandbox) does not."""
    from gitrepos import git, isolate_git, make_repo

    from holon_cli.runtime.workspace import plane

    isolate_git(tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "shop")
    got = plane.use_workspace(ctx.store, path=str(repo), mode="isolated")
    wt = Path(got["execution_root"])
    c = dataclasses.replace(ctx, execution_root=wt, cwd=wt, workspace_anchor=repo, config={})
    cmd = (
        "git -c user.email=a@b -c user.name=n commit -q --allow-empty -m inside && echo committed;"
        f" echo '#!/bin/sh' > {repo}/.git/hooks/post-commit && echo hook-planted;"
        " git config core.fsmonitor 'touch /tmp/pwned' && echo config-written; true"
    )
    r = execute(
        registry()["ExecCommand"], c, ToolCall(id="c", name="ExecCommand", arguments={"cmd": cmd})
    )
    text = str(r.data["stdout_preview"]) + str(r.data["stderr_preview"])
    assert "committed" in text and "hook-planted" not in text and "config-written" not in text, text
    assert (
        git(
            "log", "--format=%s", "-1", got["worktree_session"]["worktree_branch"], cwd=repo
        ).strip()
        == "inside"
    )
    assert not (repo / ".git" / "hooks" / "post-commit").exists()


def test_the_git_binds_follow_the_anchor_not_the_file_in_the_root(tmp_path: Path) -> None:
    """The ``.git`` file in the root is the command's to rewrite: pointing it
    at another repository binds nothing of that repository."""

    def repo(name: str) -> Path:
        r = tmp_path / name
        (r / ".git" / "worktrees" / "wt").mkdir(parents=True)
        for sub in ("objects", "refs", "logs", "hooks"):
            (r / ".git" / sub).mkdir()
        return r

    mine, other = repo("mine"), repo("other")
    root = tmp_path / "home" / "worktrees" / "a" / "wt"
    root.mkdir(parents=True)
    (root / ".git").write_text(f"gitdir: {mine}/.git/worktrees/wt\n")
    binds = sandbox._git_binds(root, mine, [tmp_path / "home"])
    writable = {binds[i + 1] for i, a in enumerate(binds) if a == "--bind"}
    common = str((mine / ".git").resolve())
    assert writable == {
        f"{common}/objects",
        f"{common}/refs",
        f"{common}/logs",
        f"{common}/worktrees/wt",
    }
    assert binds[:3] == ["--ro-bind", common, common]  # hooks and config: read-only
    (root / ".git").write_text(f"gitdir: {other}/.git/worktrees/wt\n")
    assert sandbox._git_binds(root, mine, []) == []  # another repository: nothing
    assert sandbox._git_binds(root, other, [other]) == []  # inside a hidden folder: nothing
    assert sandbox._git_binds(root, None, []) == []
    (root / ".git").unlink()
    (root / ".git").mkdir()
    assert sandbox._git_binds(root, root, []) == []  # a plain checkout: all inside the root
