"""Content digests for ids and descriptors, without loading OpenSSL."""

from __future__ import annotations


def sha256_hex(data: bytes) -> str:
    """SHA-256 hex digest through CPython's built-in implementation when it
    has one (:func:`holon_cli.cpython_seam.builtin_sha256`): ``hashlib``
    loads OpenSSL, which takes longer than all of ``holon status`` (the
    digest is the same; tests/test_digest.py checks it)."""
    from holon_cli.cpython_seam import builtin_sha256

    return str(builtin_sha256()(data).hexdigest())
