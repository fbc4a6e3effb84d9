"""The memory plane: what an agent can recall beyond its prompt.

- :mod:`.sources`  the documents the search index is derived from (the
  agent's memory files, briefs, work items with plan and completion report,
  archived context episodes), each with the ``workspace_id`` its record
  carries;
- :mod:`.search`   the ``MemorySearch`` / ``MemoryGet`` semantics shared by
  the tools and ``holon memory``;
- :mod:`.sync`     keeping the index in step with those sources (the plan
  check before every search in :mod:`.plans`; the background builder in
  :mod:`.background` and :mod:`.builder`).

The index itself (SQLite FTS5, CJK bigrams) is :mod:`holon_cli.store.memory_index`.
"""
