"""What a failed turn leaves for operators: the failure artifact, the
agent's last failure, an attempt's transport diagnostics, and the provider
chain's retry policy that decides which failures are tried again. Plain
TypedDicts: this module imports nothing, so a record that names them is
checked without loading more."""

from __future__ import annotations

from typing import TypedDict


class FailureArtifact(TypedDict, total=False):
    """The spec's ``FailureArtifact``: why a turn failed, for operator surfaces
    (a failed model call: ``ChainFailure.failure_artifact``; a context budget
    below the frame's fixed part: ``ContextFit.fail_budget``). Every key is
    optional to a reader: records of earlier builds are read as written."""

    summary: str
    category: str
    provider: str
    model_ref: str
    status: int
    source_chain: list[str]
    metadata: dict[str, str]
    # a context budget too small
    budget_tokens: int
    fixed_tokens: int
    hint: str


class TransportDiagnostics(TypedDict, total=False):
    """Where a provider attempt failed (``ProviderFailure.diagnostics``): the
    stage, and what of provider, model ref, URL, HTTP status and the chain
    of sources is known."""

    stage: str
    provider: str
    model_ref: str
    url: str
    status: int
    source_chain: list[str]


class LastFailure(TypedDict, total=False):
    """An agent's last failed turn (``state.last_failure``; not an operator's
    abort): ``holon status`` and ``holon daemon status`` read it."""

    occurred_at: str
    at: str  # = occurred_at
    summary: str
    phase: str
    detail_hint: str
    turn_id: str | None
    category: str | None
    failure_kind: str | None


class Backoff(TypedDict):
    base_s: float
    cap_s: float
    retry_after_cap_s: float
    jitter: str


class RetryPolicy(TypedDict):
    """The provider chain's retry policy (``holon debug providers``)."""

    max_retries: int
    max_attempts_per_candidate: int
    retryable: list[str]
    fail_fast: list[str]
    turn_terminal: list[str]
    backoff: Backoff
