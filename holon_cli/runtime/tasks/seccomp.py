"""The seccomp filter a sandboxed command runs under when ``execution.network``
is ``off``: no Unix socket can be created, so no socket file of the host
(``docker.sock``, a Postgres socket, a ``serve --socket``) can be reached,
wherever it lies on the read-only filesystem.

A classic BPF program (``struct sock_filter`` array) that ``bwrap --seccomp
FD`` loads right before it ``exec``s the command; the filter cannot be
removed and every descendant inherits it. It refuses:

- ``socket(AF_UNIX, ...)`` with ``EACCES`` (``socketpair`` stays allowed: an
  unnamed connected pair reaches nothing outside the process tree; asyncio's
  self-pipe and Node's child pipes use it);
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

AF_UNIX = 1
_ARCH = {
    # machine: (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, x32 bit or 0)
    "x86_64": (0xC000003E, 41, 425, 0x40000000),
    "aarch64": (0xC00000B7, 198, 425, 0),
}

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or ``None`` when the
    architecture is not one this module knows."""
    arch = _ARCH.get(machine or os.uname().machine)
    if arch is None:
        return None
    audit, nr_socket, nr_uring, x32 = arch
    eacces, eperm = _ERRNO | errno.EACCES, _ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, audit, 1, 0),
        _ins(_RET_K, eperm),  # another ABI
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if x32:
        prog += [_ins(_JGE_K, x32, 0, 1), _ins(_RET_K, eperm)]
    prog += [
        _ins(_JEQ_K, nr_socket, 2, 0),
        _ins(_JEQ_K, nr_uring, 5, 0),
        _ins(_RET_K, _ALLOW),
        _ins(_LD_W_ABS, _OFF_ARG0),  # the domain (an int: the low 32 bits)
        _ins(_JEQ_K, AF_UNIX, 0, 1),
        _ins(_RET_K, eacces),
        _ins(_RET_K, _ALLOW),
        _ins(_RET_K, eperm),  # io_uring_setup
    ]
    return b"".join(prog)
