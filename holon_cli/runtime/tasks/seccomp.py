"""The seccomp filter a sandboxed command runs under when ``execution.network``
is ``off``: no Unix socket can be created, so no socket file of the host
(``docker.sock``, a Postgres socket, a ``serve --socket``) can be reached,
wherever it lies on the read-only filesystem.

A classic BPF program (``struct sock_filter`` array) that ``bwrap --seccomp
FD`` loads right before it ``exec``s the command; the filter cannot be
removed and every descendant inherits it. It refuses:

- ``socket(AF_UNIX, ...)`` with ``EACCES``, and every family but
  ``AF_INET``, ``AF_INET6`` and ``AF_NETLINK`` (which stay inside the
  sandbox's network namespace) with ``EAFNOSUPPORT``: ``AF_VSOCK`` reaches a
  virtual machine's host whatever the namespace; ``socketpair`` stays allowed for
  stream and seqpacket pairs (a connected pair reaches nothing outside the
  process tree; asyncio's self-pipe, ``multiprocessing`` and Node's child
  pipes use them), not for datagram ones (``sendto`` on a datagram socket
  reaches any socket path);
- ``io_uring_setup`` with ``EPERM`` (``IORING_OP_SOCKET`` would create a
  socket without the ``socket`` system call);
- any system call of another ABI (i386 ``socketcall`` through ``int 0x80``,
  x32) with ``EPERM``: 32-bit programs cannot run under this filter.

A path-based rule ("Unix sockets inside the execution root only") is not
possible with seccomp (it sees the pointer, not the path), so network off
means no Unix socket at all. Only x86_64 and aarch64 are known here;
:func:`unix_socket_filter` returns ``None`` elsewhere and the sandbox refuses
``network: off`` on such a machine instead of claiming what it cannot hold.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Any

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, SOCK_SEQPACKET = 1, 5
SOCK_TYPE_MASK = 0xF  # the type without SOCK_NONBLOCK / SOCK_CLOEXEC
_ARCH = {
    # machine: (AUDIT_ARCH_*, __NR_socket, __NR_socketpair, __NR_io_uring_setup, x32 bit)
    "x86_64": (0xC000003E, 41, 53, 425, 0x40000000),
    "aarch64": (0xC00000B7, 198, 199, 425, 0),
}

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_AND_K = 0x54
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24


def _assemble(prog: list[tuple[Any, ...]]) -> bytes:
    """``(label,)`` marks a place; ``(code, k)`` or ``(code, k, jt, jf)`` with
    jump targets as labels (``None``: the next instruction)."""
    at: dict[str, int] = {}
    ins: list[tuple[int, int, str | None, str | None]] = []
    for item in prog:
        if len(item) == 1:
            at[item[0]] = len(ins)
        else:
            code, k, jt, jf = (*item, None, None)[:4]
            ins.append((code, k, jt, jf))
    out = []
    for i, (code, k, jt, jf) in enumerate(ins):
        rel = [0 if t is None else at[t] - i - 1 for t in (jt, jf)]
        out.append(struct.pack("=HBBI", code, rel[0], rel[1], k))
    return b"".join(out)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or ``None`` when the
    architecture is not one this module knows."""
    arch = _ARCH.get(machine or os.uname().machine)
    if arch is None:
        return None
    audit, nr_socket, nr_pair, nr_uring, x32 = arch
    eacces, eperm = _ERRNO | errno.EACCES, _ERRNO | errno.EPERM
    eafnosupport = _ERRNO | errno.EAFNOSUPPORT
    prog: list[tuple[Any, ...]] = [
        (_LD_W_ABS, _OFF_ARCH),
        (_JEQ_K, audit, "nr", "eperm"),  # another ABI: refused
        ("nr",),
        (_LD_W_ABS, _OFF_NR),
    ]
    if x32:
        prog += [(_JGE_K, x32, "eperm", None)]
    prog += [
        (_JEQ_K, nr_socket, "socket", None),
        (_JEQ_K, nr_pair, "pair", None),
        (_JEQ_K, nr_uring, "eperm", "allow"),
        ("socket",),
        (_LD_W_ABS, _OFF_ARG0),  # the domain (an int: the low 32 bits)
        (_JEQ_K, AF_INET, "allow", None),  # the sandbox's own network namespace
        (_JEQ_K, AF_INET6, "allow", None),
        (_JEQ_K, AF_NETLINK, "allow", None),  # ip, getaddrinfo: that namespace too
        (_JEQ_K, AF_UNIX, "eacces", "eafnosupport"),  # vsock, bluetooth, ...: the host
        ("pair",),  # a connected pair, but a datagram one can sendto() any path
        (_LD_W_ABS, _OFF_ARG0),
        (_JEQ_K, AF_UNIX, None, "allow"),
        (_LD_W_ABS, _OFF_ARG1),
        (_AND_K, SOCK_TYPE_MASK),
        (_JEQ_K, SOCK_STREAM, "allow", None),
        (_JEQ_K, SOCK_SEQPACKET, "allow", "eacces"),
        ("allow",),
        (_RET_K, _ALLOW),
        ("eacces",),
        (_RET_K, eacces),
        ("eafnosupport",),
        (_RET_K, eafnosupport),
        ("eperm",),
        (_RET_K, eperm),
    ]
    return _assemble(prog)
