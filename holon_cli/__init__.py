"""holon-cli: a headless, event-driven runtime for long-lived LLM agents.

Layers (imports only go downward): ``model`` (pure values) -> ``store`` (the
only code touching the home) -> ``runtime`` (one module per runtime step) ->
``providers``/``tools`` -> ``cli`` (click + rendering only).
"""

__version__ = "0.1.0"
