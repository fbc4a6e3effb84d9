"""Content digests for ids and descriptors, without loading OpenSSL."""

from __future__ import annotations


def sha256_hex(data: bytes) -> str:
    """SHA-256 hex digest through CPython's built-in implementation when it
    has one: ``hashlib`` loads OpenSSL, which takes longer than all of
    ``holon status`` (the digest is the same; tests/runtime check it)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())
