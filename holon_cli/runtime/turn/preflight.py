"""Resolve and validate the model chain before a turn dequeues anything.

A message must not be consumed by a turn that could never reach a model: an
unknown provider, a missing API key, a ``scripted:`` file that is missing or
not a valid script. Every ref of the chain is resolved once (no network);
when none can serve, the turn fails here and the queue is untouched. When at
least one can, the resolved transports (and the failures of the others) are
reused by every round of the turn, so fallback still records the refs that
could not be served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from holon_cli.errors import ProviderError

if TYPE_CHECKING:
    from holon_cli.kinds import ProviderFailureKind


def resolve_chain(
    models: list[str], *, consequence: str = "nothing was dequeued"
) -> Callable[[str], Any]:
    """Returns the ``resolve`` function for ``call_with_fallback``. Raises
    :class:`ProviderError` (exit 5) when no ref of ``models`` can be served."""
    from holon_cli.providers.base import ProviderFailure
    from holon_cli.providers.registry import resolve_transport

    resolved: dict[str, Any] = {}
    failures: dict[str, ProviderFailure] = {}
    for ref in models:
        try:
            transport = resolve_transport(ref)
            _validate(transport)
        except ProviderFailure as f:
            f.model_ref = f.model_ref or ref
            failures[ref] = f
        else:
            resolved[ref] = transport
    if not resolved and failures:
        first = failures[models[0]]
        others = [f"{r}: {f.message}" for r, f in failures.items() if r != models[0]]
        message = first.message + (f" (fallbacks: {'; '.join(others)})" if others else "")
        raise ProviderError(
            f"{message}; {consequence}",
            kind=cast("ProviderFailureKind", first.kind),
            hint=first.hint or "fix the model configuration (--model, HOLON_MODEL or config.yaml)",
            details={"model_refs": list(models)},
        )

    def resolve(ref: str) -> Any:
        if ref in resolved:
            return resolved[ref]
        if ref in failures:
            raise failures[ref]
        return resolve_transport(ref)

    return resolve


def _validate(transport: Any) -> None:
    """Checks a transport can do at construction time only (no network): its
    optional ``preflight()`` (the scripted model loads its script there)."""
    check = getattr(transport, "preflight", None)
    if check is not None:
        check()
