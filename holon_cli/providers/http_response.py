"""Reading an HTTP/1.1 response for :mod:`holon_cli.providers.http_client`:
the head (interim ``1xx`` answers skipped, headers lower-cased), the body's
framing (``Content-Length``, the chunked coding, or the connection closing),
the ``gzip``/``deflate`` content codings, and lines of text for event
streams. Strict where leniency would misframe: ASCII digits only in a status
or a length, hex digits only in a chunk size, one consistent length.

A :class:`Response` hands its connection back to the pool only when its
body was read to the end and the server keeps the connection alive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holon_cli.providers.http_client import Pool, _Conn

MAX_LINE = 65536
NO_ANSWER = "the server closed the connection without answering"
MAX_HEADERS = 200
READ_SIZE = 65536


class HttpError(Exception):
    """A request could not be completed (any transport-level failure)."""


class ReadTimeout(HttpError):
    """The server sent nothing for longer than the timeout."""


class RemoteProtocolError(HttpError):
    """The server closed the connection early or sent something that is not HTTP/1.x."""


def _read_line(reader: Any) -> bytes:
    line: bytes = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise RemoteProtocolError("the server sent a line longer than 64 KiB")
    return line


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts ``²`` and other digits
    ``int`` refuses, which would escape as a ``ValueError``."""
    return text.isascii() and text.isdigit()


def _chunk_size(line: bytes) -> int:
    """The size on a chunk-size line (extensions after ``;`` ignored): hex
    digits only, as ``int(x, 16)`` alone would also take ``-5``, ``0x5`` and ``5_0``."""
    text = line.split(b";", 1)[0].strip()
    if not text or text.strip(b"0123456789abcdefABCDEF"):
        raise RemoteProtocolError(f"bad chunk size {line[:40]!r}")
    return int(text, 16)


def read_head(reader: Any) -> tuple[str, int, str, dict[str, str]]:
    """HTTP version, status code, reason and headers (names lower-cased; repeats joined with
    ``, ``) of the next final response; interim ``1xx`` responses are skipped."""
    while True:
        line = _read_line(reader)
        if not line:
            raise RemoteProtocolError(NO_ANSWER)
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _digits(parts[1]):
            raise RemoteProtocolError(f"not an HTTP/1.x status line: {line[:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        last = ""
        for _ in range(MAX_HEADERS + 1):
            raw = _read_line(reader)
            if raw in (b"\r\n", b"\n"):
                break
            if not raw:
                raise RemoteProtocolError("the connection closed inside the response headers")
            text = raw.decode("latin-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and last:  # obsolete line folding
                headers[last] += " " + text.strip()
                continue
            name, sep, value = text.partition(":")
            if not sep or not name or name != name.strip():
                raise RemoteProtocolError(f"malformed header line {text[:80]!r}")
            last = name.lower()
            value = value.strip()
            headers[last] = f"{headers[last]}, {value}" if last in headers else value
        else:
            raise RemoteProtocolError(f"more than {MAX_HEADERS} response headers")
        if 100 <= status < 200 and status != 101:
            continue
        return parts[0], status, (parts[2] if len(parts) > 2 else ""), headers


class Response:
    """A response whose body is read on demand (``read``, ``iter_bytes``,
    ``iter_lines``). ``headers`` maps lower-cased names to values."""

    def __init__(
        self,
        conn: _Conn,
        head: tuple[str, int, str, dict[str, str]],
        pool: Pool,
        method: str = "POST",
    ) -> None:
        self.http_version, status, self.reason, headers = head
        self.status_code = status
        self.headers = headers
        self._conn: _Conn | None = conn
        self._pool = pool
        self._keep = _keep_alive(self.http_version, headers)
        te = headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._remaining: int | None = None
        self._chunked = False
        if status in (204, 304) or method == "HEAD":
            self._remaining = 0
        elif "chunked" in te:
            self._chunked = True
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not _digits(next(iter(values))):
                raise RemoteProtocolError(f"invalid content-length {length!r}")
            self._remaining = int(values.pop())
        else:  # the body runs until the server closes
            self._keep = False
        self._decoder = _decoder(headers.get("content-encoding", ""))
        self._done = False

    # --------------------------------------------------------- raw body

    def _raw(self) -> Iterator[bytes]:
        conn = self._conn
        if conn is None or self._done:
            return
        reader = conn.reader
        if self._chunked:
            while True:
                size_line = _read_line(reader)
                if not size_line:
                    raise RemoteProtocolError("the connection closed inside a chunked body")
                size = _chunk_size(size_line)
                if size == 0:
                    while _read_line(reader) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                while size:
                    data = reader.read1(min(size, READ_SIZE))
                    if not data:
                        raise RemoteProtocolError("the connection closed inside a chunk")
                    size -= len(data)
                    yield data
                if _read_line(reader) not in (b"\r\n", b"\n"):
                    raise RemoteProtocolError("a chunk was not followed by CRLF")
        elif self._remaining is not None:
            while self._remaining:
                data = reader.read1(min(self._remaining, READ_SIZE))
                if not data:
                    raise RemoteProtocolError(
                        f"the connection closed with {self._remaining} body bytes still due"
                    )
                self._remaining -= len(data)
                yield data
        else:
            while data := reader.read1(READ_SIZE):
                yield data
        self._done = True
        self.close()  # read to the end: back to the pool if the server keeps it

    def iter_bytes(self) -> Iterator[bytes]:
        """The decoded body, as it arrives."""
        try:
            for data in self._raw():
                out = self._decoder(data) if self._decoder else data
                if out:
                    yield out
            if self._decoder:
                tail = self._decoder(None)
                if tail:
                    yield tail
        except TimeoutError as exc:
            self.close()
            raise ReadTimeout("timed out reading the response") from exc
        except OSError as exc:
            self.close()
            raise RemoteProtocolError(f"reading the response failed: {exc}") from exc
        except HttpError:
            self.close()
            raise

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    def iter_lines(self) -> Iterator[str]:
        """The body as text lines without their terminators (``\\r\\n``,
        ``\\n`` or ``\\r``, as event streams end lines), decoded as UTF-8
        with replacement; a last line without a terminator is yielded too."""
        import codecs

        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        rest: list[str] = []  # the unterminated line so far, in pieces
        for data in self.iter_bytes():
            text = decode(data)
            if "\n" not in text and "\r" not in text:  # a long line arriving in pieces
                rest.append(text)
                continue
            lines, tail = _split_lines("".join(rest) + text)
            rest = [tail]
            yield from lines
        last = "".join(rest) + decode(b"", final=True)
        if last:
            yield from _split_lines(last + "\n")[0]

    # ------------------------------------------------------ connection

    def close(self) -> None:
        """Done with the response: an unread body means the connection cannot be reused."""
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._done and self._keep:
                self._pool.put(conn)
            else:
                conn.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _split_lines(text: str) -> tuple[list[str], str]:
    """The complete lines in ``text`` and the unterminated rest. A trailing CR
    stays in the rest: it may be the first half of a CRLF."""
    cut = len(text) - 1 if text.endswith("\r") else len(text)
    lines = text[:cut].replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines, lines.pop() + text[cut:]


def _keep_alive(version: str, headers: dict[str, str]) -> bool:
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    if "close" in tokens:
        return False
    return version != "HTTP/1.0" or "keep-alive" in tokens


def _decoder(coding: str) -> Callable[[bytes | None], bytes] | None:
    """A streaming decoder for the ``gzip``/``deflate`` content codings
    (``None`` flushes); ``None`` for identity or anything else."""
    codings = [c.strip().lower() for c in coding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise RemoteProtocolError(f"unsupported content-encoding {coding!r}")
    import zlib

    return _Inflate(zlib, deflate=codings[0] == "deflate")


class _Inflate:
    """Streaming gzip/deflate decoding (deflate arrives zlib-wrapped or raw)."""

    def __init__(self, zlib: Any, *, deflate: bool) -> None:
        self._zlib = zlib
        self._d = zlib.decompressobj(zlib.MAX_WBITS if deflate else 16 + zlib.MAX_WBITS)
        # deflate: the bytes so far, until the 2-byte zlib header has been checked
        self._head: bytes | None = b"" if deflate else None

    def __call__(self, data: bytes | None) -> bytes:
        try:
            if data is None:
                return bytes(self._d.flush())
            if self._head is not None:
                return self._sniff(data)
            return bytes(self._d.decompress(data))
        except self._zlib.error as exc:
            raise RemoteProtocolError(f"the body could not be decompressed: {exc}") from None

    def _sniff(self, data: bytes) -> bytes:
        """Try the zlib wrapper; if its header check fails the body is raw
        deflate, decoded from its start. The check needs 2 bytes, and a first
        read may hold only 1: sniffing lasts until 2 bytes have been seen."""
        head = self._head = (self._head or b"") + data
        try:
            out = bytes(self._d.decompress(data))
        except self._zlib.error:
            self._head = None
            self._d = self._zlib.decompressobj(-self._zlib.MAX_WBITS)
            return bytes(self._d.decompress(head))
        if len(head) >= 2:
            self._head = None
        return out
