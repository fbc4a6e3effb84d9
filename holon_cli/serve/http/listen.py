"""Listen addresses of ``holon serve``: parsing ``HOST:PORT``, loopback checks,
and binding the TCP socket before the server starts (so a busy port is a clear
error, and the bound port is known when port 0 was asked for).

Imports nothing heavy: ``holon serve`` and ``holon daemon`` check their
``--listen`` value with it before loading starlette or uvicorn.
"""

from __future__ import annotations

import ipaddress
import socket

from holon_cli.errors import RejectedError, UsageError


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6). Raises UsageError."""
    hint = "use HOST:PORT, e.g. 127.0.0.1:7878 (port 0 picks a free port)"
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"invalid listen address {value!r}", hint=hint)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def format_addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_tcp(host: str, port: int) -> socket.socket:
    """The listening TCP socket. Created with ``IPPROTO_TCP`` (not 0): asyncio
    sets ``TCP_NODELAY`` only on sockets whose ``proto`` says TCP, and
    accepted sockets copy the listener's; without it Nagle's algorithm held
    each keep-alive response's second write for the client's delayed ACK
    (44 ms a request). The listener's own ``TCP_NODELAY`` is inherited by
    accepted connections on Linux as well."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RejectedError(
            f"cannot listen on {format_addr(host, port)}: {exc.strerror or exc}",
            hint="pick another --listen address, or stop what is using it (`holon daemon status`)",
        ) from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


# the longest AF_UNIX path Linux accepts (sun_path is 108 bytes with its NUL)
UNIX_PATH_MAX = 107


def unix_socket_error(path: str, exc: OSError) -> RejectedError:
    """Why the socket cannot be created there, with the advice that fits the
    cause: a path too long, a folder that is read-only or not ours, a file in
    the way; never "shorter path" for a read-only home."""
    import errno
    import os

    folder = os.path.dirname(os.path.abspath(path))
    why = exc.strerror or str(exc)
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        hint = (
            f"the path is {len(os.fsencode(path))} bytes; a Unix socket path holds at most "
            f"{UNIX_PATH_MAX}: pass a shorter --socket path"
        )
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = (
            f"{folder} is not writable ({why}); pass --socket with a path in a writable "
            "folder (e.g. $XDG_RUNTIME_DIR/holon.sock), or make the home writable"
        )
    elif exc.errno in (errno.ENOTDIR, errno.ENOENT):
        hint = f"{folder} is not a folder that can hold the socket; pass another --socket path"
    elif exc.errno == errno.EADDRINUSE:
        hint = f"something else is at {path}; remove it or pass another --socket path"
    elif exc.errno == errno.ENOSPC:
        hint = f"the file system of {folder} is full; free space or pass another --socket path"
    else:
        hint = "pass another --socket path"
    return RejectedError(f"cannot create the socket {path}: {why}", hint=hint)


def _clear_stale_socket(path: str) -> None:
    """Remove ``path`` only when it is a socket nobody listens on (left by a
    dead serve); anything else there is refused and left alone."""
    import errno
    import os
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a socket"
        raise RejectedError(
            f"--socket {path} exists and is {what}; holon does not delete it",
            hint="pass another --socket path, or move that file away yourself",
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise RejectedError(
                f"cannot check the socket {path}: {exc.strerror or exc}",
                hint="pass another --socket path",
            ) from None
        os.unlink(path)  # a socket left by a dead serve: ours to clean
    else:
        raise RejectedError(
            f"the socket {path} is owned by a live process",
            hint="stop it first (`holon daemon stop`), or pass another --socket",
        )
    finally:
        probe.close()


def bind_unix(path: str) -> socket.socket:
    """Bind and listen on a 0600 Unix socket at ``path`` (see _clear_stale_socket)."""
    import os

    _clear_stale_socket(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    except OSError as exc:
        raise unix_socket_error(path, exc) from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError as exc:
        sock.close()
        raise unix_socket_error(path, exc) from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    sock.set_inheritable(False)
    return sock
