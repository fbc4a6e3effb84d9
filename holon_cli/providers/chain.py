"""Retry, backoff and fallback across model candidates: the spec's phase-1
provider retry contract, and the provider-attempt timeline it produces.

Rules (spec "Provider Transport Contract"):
- each candidate gets up to ``1 + max_retries`` attempts for retryable kinds
  (timeout, connection, 429, eligible 5xx, interrupted streams), waiting
  ``retry_after_s`` when the server gave one (capped), else exponential
  backoff with full jitter (a uniform draw below the exponential bound, as
  the official SDKs spread their retries; the draw is injectable);
- a fail-fast kind (auth, client error, invalid response, unsupported
  transport, missing credentials, ...) aborts only the current candidate;
  the next candidate is tried;
- ``context_length_exceeded`` stops the whole chain: a turn-level terminal
  failure, no fallback;
- every attempt, including a candidate that could not even be resolved, is a
  ``ProviderAttemptRecord`` in the timeline; timings measure the attempt
  itself and backoff is recorded separately as ``backoff_ms``.

Transports stay single-attempt; this module never talks HTTP itself.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, cast

from holon_cli import clock as holon_clock
from holon_cli.errors import ConfigError, HolonError, ProviderError
from holon_cli.model.provider import ModelResponse, TokenUsage
from holon_cli.providers.base import (
    CONTEXT_OVERFLOW_HINT,
    FAIL_FAST_KINDS,
    RETRYABLE_KINDS,
    ProviderFailure,
    ProviderRequest,
    Transport,
)

if TYPE_CHECKING:
    from holon_cli.model.config import HolonConfig
    from holon_cli.model.failure import FailureArtifact, RetryPolicy
    from holon_cli.model.turn import (
        AttemptDisposition,
        AttemptOutcome,
        ProviderAttemptRecord,
        ProviderAttemptTimeline,
    )

MAX_RETRIES = 2
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 30.0
TERMINAL_KINDS = {"context_length_exceeded"}

_CATEGORY = {
    "invalid_response": "protocol",
    "unsupported_transport": "protocol",
    "incomplete": "protocol",
    "script_exhausted": "runtime",
    "script_error": "runtime",
    "missing_credentials": "runtime",
}

_DEFAULT_HINTS = {
    "rate_limited": (
        "the provider is rate limiting; wait and retry, or configure HOLON_FALLBACK_MODELS"
    ),
    "server_error": (
        "the provider is having trouble; retry later or configure HOLON_FALLBACK_MODELS"
    ),
    "timeout": (
        "the provider did not answer in time; retry, "
        "or raise runtime.provider_timeout_s in config.yaml"
    ),
    "connection": "check the network and the provider base URL",
    "stream_interrupted": "the response stream was cut off; retry the turn",
    "context_length_exceeded": CONTEXT_OVERFLOW_HINT,
    "invalid_response": (
        "the endpoint did not answer in the expected API shape; "
        "check the base URL and transport in config.yaml"
    ),
    "script_exhausted": (
        "add steps to the script, set `loop: true`, or delete the agent's scripted cursor file"
    ),
}


def retry_policy() -> RetryPolicy:
    """The active retry policy, for ``provider_doctor``-style surfaces."""
    return {
        "max_retries": MAX_RETRIES,
        "max_attempts_per_candidate": 1 + MAX_RETRIES,
        "retryable": sorted(RETRYABLE_KINDS),
        "fail_fast": sorted(FAIL_FAST_KINDS - TERMINAL_KINDS),
        "turn_terminal": sorted(TERMINAL_KINDS),
        "backoff": {
            "base_s": BACKOFF_BASE_S,
            "cap_s": BACKOFF_CAP_S,
            "retry_after_cap_s": RETRY_AFTER_CAP_S,
            "jitter": "full",
        },
    }


def _draw(rand: Callable[[], float] | None) -> float:
    """A uniform draw in [0, 1) for full jitter: ``rand`` when given (tests), else
    :func:`random.random` (imported here: the hot start-up paths never retry)."""
    if rand is None:
        import random

        rand = random.random
    return min(max(rand(), 0.0), 1.0)


def failure_category(kind: str) -> str:
    return _CATEGORY.get(kind, "transport")


def _sum_usage(usages: list[TokenUsage]) -> TokenUsage | None:
    if not usages:
        return None
    total = TokenUsage()
    for u in usages:
        total = total + u
    return total


class ChainResult(NamedTuple):
    """A successful provider round: the response and the attempt timeline."""

    response: ModelResponse
    timeline: ProviderAttemptTimeline
    model_ref: str
    provider: str
    # usage aggregated over every attempt that reported it (failed ones included)
    usage: TokenUsage | None

    @property
    def attempts(self) -> list[ProviderAttemptRecord]:
        return list(self.timeline["attempts"])


class ChainFailure(ProviderError):
    """Every candidate failed, or a turn-terminal failure stopped the chain.

    A :class:`holon_cli.errors.ProviderError` (CLI exit code 5) that carries
    the last :class:`ProviderFailure`, the attempt timeline and the
    aggregated token usage.
    """

    def __init__(
        self,
        failure: ProviderFailure,
        timeline: ProviderAttemptTimeline,
        usage: TokenUsage | None,
        candidates: list[str],
        *,
        terminal: bool = False,
    ) -> None:
        self.failure = failure
        self.timeline = timeline
        self.usage = usage
        self.candidates = list(candidates)
        self.terminal = terminal
        super().__init__(
            self._summary(),
            hint=failure.hint or _DEFAULT_HINTS.get(failure.kind),
            details={
                "failure_kind": failure.kind,
                "model_ref": failure.model_ref or "",
                "terminal": terminal,
            },
        )

    @property
    def failure_kind(self) -> str:
        return self.failure.kind

    @property
    def last(self) -> ProviderFailure:
        """Alias of :attr:`failure` (the last attempt's failure)."""
        return self.failure

    def _outcomes(self) -> list[str]:
        """``ref: kind (HTTP n), retries exhausted after 3 attempts`` per candidate tried."""
        out: dict[str, list[ProviderAttemptRecord]] = {}
        for rec in self.timeline.get("attempts", []):
            out.setdefault(rec["model_ref"], []).append(rec)
        parts = []
        for ref, recs in out.items():
            last = recs[-1]
            status = (last.get("transport_diagnostics") or {}).get("status")
            piece = f"{ref}: {last.get('failure_kind', 'failed')}" + (
                f" (HTTP {status})" if status and status >= 300 else ""
            )
            if last["outcome"] == "retries_exhausted":
                piece += f", retries exhausted after {len(recs)} attempts"
            parts.append(piece)
        return parts

    def _summary(self) -> str:
        f = self.failure
        where = f.model_ref or f.provider or "model"
        shown = f.status and f.status >= 300 and f"HTTP {f.status}" not in f.message
        status = f" (HTTP {f.status})" if shown else ""
        head = f"{where}: {f.kind}{status}: {f.message}"
        if self.terminal:
            return f"model call stopped the turn: {head}"
        outcomes = self._outcomes()
        if len(outcomes) > 1:
            return (
                f"all {len(outcomes)} model candidates failed ({'; '.join(outcomes)}); last: {head}"
            )
        if outcomes and "retries exhausted" in outcomes[0]:
            return f"model call failed, {outcomes[0].split(', ', 1)[1]}: {head}"
        return f"model call failed: {head}"

    def failure_artifact(self) -> FailureArtifact:
        """The spec's ``FailureArtifact`` for operator surfaces."""
        f = self.failure
        meta: dict[str, str] = {
            "failure_kind": f.kind,
            "stage": f.stage,
            "attempts": str(len(self.timeline.get("attempts", []))),
            "candidates": ",".join(self.candidates),
            "retryable": "true" if f.retryable else "false",
            "turn_terminal": "true" if self.terminal else "false",
        }
        if f.url:
            meta["url"] = f.url
        if f.retry_after_s is not None:
            meta["retry_after_s"] = f"{f.retry_after_s:g}"
        if self.hint:
            meta["hint"] = self.hint
        art: FailureArtifact = {
            "summary": self.message,
            "category": failure_category(f.kind),
        }
        if f.provider:
            art["provider"] = f.provider
        if f.model_ref:
            art["model_ref"] = f.model_ref
        if f.status is not None:
            art["status"] = f.status
        if f.source_chain:
            art["source_chain"] = list(f.source_chain)
        art["metadata"] = {k: v[:500] for k, v in meta.items()}
        return art


def _provider_of(ref: str) -> str:
    if ref.startswith("scripted:"):
        return "scripted"
    return ref.partition("/")[0] or ref


def _record(
    *,
    ref: str,
    provider: str,
    attempt: int,
    max_attempts: int,
    started_at: str,
    completed_at: str,
    duration_ms: int,
    outcome: AttemptOutcome,
    advanced: bool,
    failure: ProviderFailure | None = None,
    disposition: AttemptDisposition | None = None,
    backoff_ms: int | None = None,
    usage: TokenUsage | None = None,
) -> ProviderAttemptRecord:
    # filled in the JSON's key order: the failure fields precede ``outcome``
    rec = cast(
        "ProviderAttemptRecord",
        {
            "provider": provider,
            "model_ref": ref,
            "attempt": attempt,
            "max_attempts": max_attempts,
            "started_at": started_at,
            "completed_at": completed_at,
            "duration_ms": duration_ms,
        },
    )
    if failure is not None:
        rec["failure_kind"] = failure.kind
        rec["disposition"] = disposition
    rec["outcome"] = outcome
    rec["advanced_to_fallback"] = advanced
    if backoff_ms is not None:
        rec["backoff_ms"] = backoff_ms
    if usage is not None:
        rec["token_usage"] = usage.to_dict()
    if failure is not None:
        diag = failure.diagnostics()
        diag.setdefault("provider", provider)
        diag.setdefault("model_ref", ref)
        rec["transport_diagnostics"] = diag
    return rec


def _as_failure(exc: Exception, ref: str, provider: str) -> ProviderFailure:
    """A transport bug must not take the daemon down: treat it as a fail-fast provider error."""
    return ProviderFailure(
        "provider_error",
        f"unexpected error in the {provider} transport: {type(exc).__name__}: {exc}",
        stage="decode",
        provider=provider,
        model_ref=ref,
        source_chain=[f"{type(exc).__name__}: {exc}"],
    )


class _RetryPolicy(NamedTuple):
    """How long to wait between attempts of one candidate."""

    max_attempts: int
    backoff_base_s: float
    backoff_cap_s: float
    retry_after_cap_s: float
    rand: Callable[[], float] | None

    def delay(self, failure: ProviderFailure, attempt: int) -> float:
        """The server's ``retry_after_s`` (capped), else full-jitter exponential backoff."""
        if failure.retry_after_s is not None:
            return min(max(failure.retry_after_s, 0.0), self.retry_after_cap_s)
        bound: float = min(self.backoff_cap_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return bound * _draw(self.rand)


class _ChainRound:
    """One provider round as steps: resolve a candidate, attempt it (retrying
    with backoff), record every attempt, then succeed, fall back or fail."""

    def __init__(
        self,
        candidates: list[str],
        request: ProviderRequest,
        policy: _RetryPolicy,
        *,
        resolver: Callable[[str], Transport],
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        before_attempt: Callable[[str, Transport], None] | None,
    ) -> None:
        self.candidates = candidates
        self.request = request
        self.policy = policy
        self.resolver = resolver
        self.sleep = sleep
        self.clock = clock
        self.before_attempt = before_attempt
        self.attempts: list[ProviderAttemptRecord] = []
        self.usages: list[TokenUsage] = []
        self.timeline: ProviderAttemptTimeline = {
            "attempts": self.attempts,
            "requested_model_ref": candidates[0],
        }
        self.last: ProviderFailure | None = None

    def run(self) -> ChainResult:
        for ci, ref in enumerate(self.candidates):
            has_next = ci < len(self.candidates) - 1
            self.timeline["active_model_ref"] = ref
            transport = self._resolve(ref, has_next)
            if transport is None:
                continue
            provider = getattr(transport, "provider", None) or _provider_of(ref)
            result = self._try_candidate(ref, provider, transport, has_next)
            if result is not None:
                return result
        assert self.last is not None
        self._finish_timeline(None)
        raise ChainFailure(self.last, self.timeline, _sum_usage(self.usages), self.candidates)

    def _finish_timeline(self, winner: str | None) -> None:
        if winner:
            self.timeline["winning_model_ref"] = winner
        agg = _sum_usage(self.usages)
        if agg is not None:
            self.timeline["aggregated_token_usage"] = agg.to_dict()

    def _resolve(self, ref: str, has_next: bool) -> Transport | None:
        """The candidate's transport, or None (recorded as a fail-fast attempt)."""
        provider = _provider_of(ref)
        t0 = self.clock()
        started_at = holon_clock.now_iso()
        try:
            return self.resolver(ref)
        except ProviderFailure as f:
            f.provider = f.provider or provider
            f.model_ref = f.model_ref or ref
            self.last = f
            self.attempts.append(
                _record(
                    ref=ref,
                    provider=provider,
                    attempt=1,
                    max_attempts=self.policy.max_attempts,
                    started_at=started_at,
                    completed_at=holon_clock.now_iso(),
                    duration_ms=int(round((self.clock() - t0) * 1000)),
                    outcome="fail_fast_aborted",
                    advanced=has_next,
                    failure=f,
                    disposition="fail_fast",
                )
            )
            return None

    def _try_candidate(
        self, ref: str, provider: str, transport: Transport, has_next: bool
    ) -> ChainResult | None:
        """Attempt one candidate up to ``max_attempts`` times; None means fall back."""
        for attempt in range(1, self.policy.max_attempts + 1):
            if self.before_attempt is not None:
                self.before_attempt(ref, transport)
            t0 = self.clock()
            started_at = holon_clock.now_iso()
            try:
                response = transport.complete(self.request)
            except ProviderFailure as f:
                failure = f
            except HolonError:
                raise
            except Exception as exc:  # noqa: BLE001 - see _as_failure
                failure = _as_failure(exc, ref, provider)
            else:
                return self._succeeded(ref, provider, attempt, response, t0, started_at)
            if not self._failed(ref, provider, attempt, failure, t0, started_at, has_next):
                return None
        return None

    def _succeeded(
        self,
        ref: str,
        provider: str,
        attempt: int,
        response: ModelResponse,
        t0: float,
        started_at: str,
    ) -> ChainResult:
        if response.usage is not None:
            self.usages.append(response.usage)
        self.attempts.append(
            _record(
                ref=ref,
                provider=provider,
                attempt=attempt,
                max_attempts=self.policy.max_attempts,
                started_at=started_at,
                completed_at=holon_clock.now_iso(),
                duration_ms=int(round((self.clock() - t0) * 1000)),
                outcome="succeeded",
                advanced=False,
                usage=response.usage,
            )
        )
        self._finish_timeline(ref)
        return ChainResult(response, self.timeline, ref, provider, _sum_usage(self.usages))

    def _failed(
        self,
        ref: str,
        provider: str,
        attempt: int,
        failure: ProviderFailure,
        t0: float,
        started_at: str,
        has_next: bool,
    ) -> bool:
        """Record a failed attempt; True when the same candidate is retried.

        Raises :class:`ChainFailure` for a turn-terminal kind (no fallback)."""
        duration_ms = int(round((self.clock() - t0) * 1000))
        completed_at = holon_clock.now_iso()
        failure.provider = failure.provider or provider
        failure.model_ref = failure.model_ref or ref
        if failure.usage is not None:
            self.usages.append(failure.usage)
        self.last = failure
        failed_record = functools.partial(
            _record,
            ref=ref,
            provider=provider,
            attempt=attempt,
            max_attempts=self.policy.max_attempts,
            started_at=started_at,
            completed_at=completed_at,
            duration_ms=duration_ms,
            failure=failure,
            usage=failure.usage,
        )
        if failure.kind in TERMINAL_KINDS:
            self.attempts.append(
                failed_record(
                    outcome="fail_fast_aborted", advanced=False, disposition="turn_terminal"
                )
            )
            self._finish_timeline(None)
            usage = _sum_usage(self.usages)
            raise ChainFailure(failure, self.timeline, usage, self.candidates, terminal=True)
        if failure.retryable and attempt < self.policy.max_attempts:
            delay = self.policy.delay(failure, attempt)
            self.attempts.append(
                failed_record(
                    outcome="retrying",
                    advanced=False,
                    disposition="retryable",
                    backoff_ms=int(round(delay * 1000)),
                )
            )
            if delay > 0:
                self.sleep(delay)
            return True
        if failure.retryable:
            rec = failed_record(
                outcome="retries_exhausted", advanced=has_next, disposition="retryable"
            )
        else:
            rec = failed_record(
                outcome="fail_fast_aborted", advanced=has_next, disposition="fail_fast"
            )
        self.attempts.append(rec)
        return False


def call_with_fallback(
    candidates: list[str],
    request: ProviderRequest,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] | None = None,
    max_retries: int = MAX_RETRIES,
    backoff_base_s: float = BACKOFF_BASE_S,
    backoff_cap_s: float = BACKOFF_CAP_S,
    retry_after_cap_s: float = RETRY_AFTER_CAP_S,
    resolve: Callable[[str], Transport] | None = None,
    config: HolonConfig | None = None,
    env: Mapping[str, str] | None = None,
    before_attempt: Callable[[str, Transport], None] | None = None,
) -> ChainResult:
    """One provider round over ``candidates`` (primary first). Raises :class:`ChainFailure`.

    ``before_attempt(model_ref, transport)`` runs before every request is
    sent (retries and fallbacks included); whatever it raises ends the round
    unsent (the turn's budget check, which may also cap the request's
    ``max_output_tokens``)."""
    if not candidates:
        from holon_cli.providers.registry import NO_MODEL_HINT

        raise ConfigError("no model configured", hint=NO_MODEL_HINT)

    def default_resolve(ref: str) -> Transport:
        from holon_cli.providers.registry import resolve_transport

        return resolve_transport(ref, config=config, env=env)

    policy = _RetryPolicy(
        max_attempts=1 + max(max_retries, 0),
        backoff_base_s=backoff_base_s,
        backoff_cap_s=backoff_cap_s,
        retry_after_cap_s=retry_after_cap_s,
        rand=rand,
    )
    return _ChainRound(
        candidates,
        request,
        policy,
        resolver=resolve or default_resolve,
        sleep=sleep,
        clock=clock,
        before_attempt=before_attempt,
    ).run()
