"""Model transports behind one small interface (see ``base``), plus the
scripted replay provider and the retry/fallback chain.

- ``base``: the contract (requests, block model, failure kinds)
- ``registry``: model ref -> transport; model selection precedence
- ``chain``: retry, backoff, fallback; the provider-attempt timeline
- ``openai_responses`` / ``openai_codex`` / ``openai_chat`` / ``anthropic``:
  one wire API each (lowering + parsing), over ``http_common``
- ``scripted``: the offline ``scripted:<path>`` model
- ``wire``: pure helpers shared by the wire lowerings

Nothing is imported here: the transports (and httpx) load only when a model
ref that needs them is resolved.
"""
