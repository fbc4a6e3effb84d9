"""The one exception tree of holon-cli.

Every expected failure is a :class:`HolonError` with a stable machine-readable
``kind``, a message that says what happened, a ``hint`` that says what to do
next, and the exit code of the CLI contract. Only the CLI entry point turns
these into exit codes; runtime code raises, never exits or prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from holon_cli.kinds import ErrorKind

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REJECTED = 4
EXIT_PROVIDER = 5
EXIT_BUSY = 75
EXIT_INTERRUPTED = 130

# ``--all`` commands exit with the worst per-agent outcome, least to most
# severe: ok, busy (another turn holds the agent: retry later), not found (an
# agent removed meanwhile), rejected (stopped meanwhile), provider failure,
# configuration/usage, runtime damage (a corrupt record needs a human)
EXIT_SEVERITY = (
    EXIT_OK,
    EXIT_BUSY,
    EXIT_NOT_FOUND,
    EXIT_REJECTED,
    EXIT_PROVIDER,
    EXIT_USAGE,
    EXIT_RUNTIME,
)


def worst_exit_code(codes: list[int]) -> int:
    """The most severe of ``codes`` by :data:`EXIT_SEVERITY` (0 when empty)."""
    rank = {c: i for i, c in enumerate(EXIT_SEVERITY)}
    return max(codes, key=lambda c: rank.get(c, len(EXIT_SEVERITY)), default=EXIT_OK)


# where an error is read: the command line, the HTTP surface, a model's tool call
Surface = Literal["cli", "http", "tool"]


class Said(NamedTuple):
    """One message or hint in each surface's words: ``cli`` (the default, and
    what ``message``/``hint`` hold), ``http`` (body fields, routes) and
    ``tool`` (the model's tool names and arguments); ``None`` says it as
    the command line does. For a runtime step more than one surface calls."""

    cli: str
    http: str | None = None
    tool: str | None = None

    def on(self, surface: Surface) -> str:
        got: str | None = getattr(self, surface)
        return self.cli if got is None else got

    def fmt(self, template: str, **parts: Said | str) -> Said:
        """``template`` with ``{name}`` filled in each surface's words."""

        def one(surface: Surface) -> str:
            return template.format(
                **{k: v.on(surface) if isinstance(v, Said) else v for k, v in parts.items()}
            )

        return Said(one("cli"), one("http"), one("tool"))


class HolonError(Exception):
    """Base class. ``kind`` is stable; ``exit_code`` follows the contract.

    ``message`` and ``hint`` speak the command line's words (its flags and
    commands). A runtime step that the HTTP surface or a model's tool also
    calls passes a :class:`Said` instead of a string, naming what to change
    in each surface's words (``--max-chars`` on the command line is
    ``max_chars`` to the model); the HTTP error body and the tool error
    envelope read them through :meth:`said_on`."""

    kind: ErrorKind = "runtime_error"
    exit_code = EXIT_RUNTIME

    def __init__(
        self,
        message: str | Said,
        *,
        hint: str | Said | None = None,
        kind: ErrorKind | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self._message = message if isinstance(message, Said) else Said(message)
        self._hint = hint if isinstance(hint, Said) or hint is None else Said(hint)
        super().__init__(self._message.cli)
        self.message = self._message.cli
        self.hint = None if self._hint is None else self._hint.cli
        if kind is not None:
            self.kind = kind
        self.details = details or {}

    def said_on(self, surface: Surface) -> tuple[str, str | None]:
        """``(message, hint)`` in ``surface``'s words (the HTTP error body and
        the tool error envelope read it; the command line reads ``message``
        and ``hint``). A message or hint changed after raising (a caller
        adding context) is said as changed on every surface."""
        message = self._message.on(surface) if self.message == self._message.cli else self.message
        if self._hint is None or self.hint != self._hint.cli:
            return message, self.hint
        return message, self._hint.on(surface)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.details:
            out["details"] = self.details
        return out


def as_holon_error(exc: Exception) -> HolonError:
    """An unexpected exception as a reportable error (for per-agent reports of
    ``--all`` commands: one damaged agent must not stop the others)."""
    if isinstance(exc, HolonError):
        return exc
    return HolonError(
        f"{type(exc).__name__}: {exc}",
        kind="internal_error",
        hint="run `holon home check` to find damaged records",
    )


class UsageError(HolonError):
    kind: ErrorKind = "usage_error"
    exit_code = EXIT_USAGE


class NotFoundError(HolonError):
    kind: ErrorKind = "not_found"
    exit_code = EXIT_NOT_FOUND


class RejectedError(HolonError):
    """Rejected by policy or state: stopped agent, illegal transition, bad token."""

    kind: ErrorKind = "rejected"
    exit_code = EXIT_REJECTED


class ProviderError(HolonError):
    kind: ErrorKind = "provider_failure"
    exit_code = EXIT_PROVIDER


class McpUnavailableError(HolonError):
    """A ``required`` MCP server could not start: the turn fails before its
    provider request (exit 5, as a provider failure), the message stays queued."""

    kind: ErrorKind = "mcp_unavailable"
    exit_code = EXIT_PROVIDER


class BusyError(HolonError):
    kind: ErrorKind = "busy"
    exit_code = EXIT_BUSY


class CorruptStateError(HolonError):
    """A ledger or snapshot that cannot be read (not a torn tail: that is normal)."""

    kind: ErrorKind = "corrupt_state"
    exit_code = EXIT_RUNTIME


class ConfigError(HolonError):
    kind: ErrorKind = "config_error"
    exit_code = EXIT_USAGE


class InterruptedError_(HolonError):
    kind: ErrorKind = "interrupted"
    exit_code = EXIT_INTERRUPTED
