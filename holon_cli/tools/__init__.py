"""Model-facing tools: typed argument dataclasses (their JSON schemas are
generated from the type hints), thin handlers onto ``runtime/``, and the
shared error envelope."""
