"""The value one turn returns to its caller (CLI, ``holon run``, serve)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def zero_usage() -> dict[str, int]:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


@dataclass
class TurnResult:
    agent_id: str
    ran: bool
    turn_id: str | None = None
    message_id: str | None = None
    status: str = "idle"  # idle | completed | aborted
    closure: dict[str, Any] | None = None
    final_text: str = ""
    model_rounds: int = 0
    token_usage: dict[str, int] = field(default_factory=zero_usage)
    provider_attempt_timeline: list[dict[str, Any]] = field(default_factory=list)
    failure_artifact: dict[str, Any] | None = None
    failure_kind: str | None = None
    slept: bool = False
    duration_ms: int = 0
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
