"""Model transports behind one small interface (see ``base``), plus the
scripted replay provider and the retry/fallback chain.

- ``base``: the contract (the request, failure kinds, the ``Transport``
  protocol); the neutral values it speaks in (tool specs, conversation,
  prompt frame, the response block model) are ``holon_cli.model.provider``
- ``registry``: model ref -> transport through one table; model selection precedence
- ``chain``: retry, backoff, fallback; the provider-attempt timeline
- ``openai_responses`` / ``openai_codex`` / ``openai_chat`` / ``anthropic``:
  one wire API each (lowering + parsing), over ``http_common``; the Responses
  event-stream parser lives in ``openai_responses`` (codex only shapes the body)
- ``scripted``: the offline ``scripted:<path>`` model
- ``wire``: pure helpers shared by the wire lowerings

Nothing is imported here: the transports (and their HTTP client) load only when a model
ref that needs them is resolved.
"""
