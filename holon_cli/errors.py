"""The one exception tree of holon-cli.

Every expected failure is a :class:`HolonError` with a stable machine-readable
``kind``, a message that says what happened, a ``hint`` that says what to do
next, and the exit code of the CLI contract. Only the CLI entry point turns
these into exit codes; runtime code raises, never exits or prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


class HolonError(Exception):
    """Base class. ``kind`` is stable; ``exit_code`` follows the contract."""

    kind: ErrorKind = "runtime_error"
    exit_code = EXIT_RUNTIME

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        kind: ErrorKind | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if kind is not None:
            self.kind = kind
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
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
    kind = "usage_error"
    exit_code = EXIT_USAGE


class NotFoundError(HolonError):
    kind = "not_found"
    exit_code = EXIT_NOT_FOUND


class RejectedError(HolonError):
    """Rejected by policy or state: stopped agent, illegal transition, bad token."""

    kind = "rejected"
    exit_code = EXIT_REJECTED


class ProviderError(HolonError):
    kind = "provider_failure"
    exit_code = EXIT_PROVIDER


class McpUnavailableError(HolonError):
    """A ``required`` MCP server could not start: the turn fails before its
    provider request (exit 5, as a provider failure), the message stays queued."""

    kind = "mcp_unavailable"
    exit_code = EXIT_PROVIDER


class BusyError(HolonError):
    kind = "busy"
    exit_code = EXIT_BUSY


class CorruptStateError(HolonError):
    """A ledger or snapshot that cannot be read (not a torn tail: that is normal)."""

    kind = "corrupt_state"
    exit_code = EXIT_RUNTIME


class ConfigError(HolonError):
    kind = "config_error"
    exit_code = EXIT_USAGE


class InterruptedError_(HolonError):
    kind = "interrupted"
    exit_code = EXIT_INTERRUPTED
