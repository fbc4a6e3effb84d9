"""Model references: ``<provider>/<model>`` or ``scripted:<path>``."""

from __future__ import annotations

from typing import NamedTuple

from holon_cli.errors import UsageError

BUILTIN_PROVIDERS = ("openai", "anthropic", "openai-codex")


class ModelRef(NamedTuple):
    provider: str  # "openai", "anthropic", "openai-codex", a config name, or "scripted"
    model: str  # model name, or the script path for scripted

    def __str__(self) -> str:
        if self.provider == "scripted":
            return f"scripted:{self.model}"
        return f"{self.provider}/{self.model}"


def check_model_ref(text: str) -> ModelRef:
    s = text.strip()
    if s.startswith("scripted:"):
        path = s[len("scripted:") :]
        if not path:
            raise UsageError(
                "model ref 'scripted:' needs a script path",
                hint="e.g. scripted:examples/hello.yaml",
            )
        return ModelRef("scripted", path)
    provider, sep, model = s.partition("/")
    if not sep or not provider or not model:
        raise UsageError(
            f"invalid model ref {text!r}",
            hint="use <provider>/<model> (openai/gpt-4.1, anthropic/claude-sonnet-4-5, "
            "openai-codex/gpt-5-codex, <config provider>/<model>) or scripted:<path>",
        )
    return ModelRef(provider, model)
