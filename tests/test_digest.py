"""holon_cli.digest: the same SHA-256 as hashlib, without loading OpenSSL."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from holon_cli.digest import sha256_hex


@given(st.binary(max_size=4096))
def test_sha256_hex_is_hashlibs_sha256(data: bytes) -> None:
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
