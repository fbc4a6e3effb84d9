"""OpenAI Codex transport (``openai-codex/<model>``): the Responses API with
``stream: true``, consumed as server-sent events.

Owns only the codex request shape: the Responses lowering without
``max_output_tokens`` (which the Codex backend rejects), with
``reasoning: null`` and ``include: []``. The event-feed parser is the
Responses transport's own (``openai_responses.parse_responses_stream``), so
imports run one way: codex -> responses.
"""

from __future__ import annotations

from typing import Any

from holon_cli.providers.base import ProviderRequest
from holon_cli.providers.openai_responses import OpenAIResponsesTransport, build_body
from holon_cli.providers.responses_body import Body
from holon_cli.providers.wire import PROMPT_SUPPORT


class OpenAICodexTransport(OpenAIResponsesTransport):
    """``POST {base_url}/responses`` with ``stream: true``; parses the event feed."""

    incremental_capable = False  # the Codex backend stores nothing
    prompt_capabilities = PROMPT_SUPPORT["openai_codex"].capabilities

    def __init__(self, *, model: str, provider: str = "openai-codex", **kwargs: Any) -> None:
        kwargs.pop("max_output_tokens", None)  # the Codex backend rejects it
        kwargs["stream"] = True
        super().__init__(model=model, provider=provider, **kwargs)

    def build_body(self, request: ProviderRequest) -> Body:
        return build_body(request, self.model, codex=True)
