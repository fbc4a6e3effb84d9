"""The MCP client plane: agents reach the tools of MCP servers.

Modules (only :mod:`.sdk`, :mod:`.stdio` and :mod:`.host` import the ``mcp``
SDK, and only when a server is used; a home without ``mcp_servers`` imports
none of this package but :mod:`.config`):

  config     ``mcp_servers`` of an agent as :class:`~.config.ServerSpec` values,
             the model-facing tool names, the config key of a server
  records    the home's per-server record: the cached tool list (keyed by the
             server's config, so a cron ``holon turn`` lists nothing), the era
             found, the state of the last use (``holon mcp list``, ``status``)
  launch     what a stdio server is started as: the command environment
             policy plus its own ``env``, the sandbox, the lifeline watchdog
  watchdog   the standard-library process between holon and a stdio server:
             it ends the server's process group when holon dies (SIGKILL too)
  sdk        the one seam over the official SDK: connect (probe
             ``server/discover``, fall back to ``initialize``), list, call
  stdio      the stdio transport (our spawn, bounded lines, stderr to a log)
  host       one event loop thread per process holding the live connections:
             per agent, ended with ``holon turn``, kept warm and restarted
             with backoff under ``serve``
  calls      the synchronous steps the tools, the CLI and the turn call:
             list, check, refresh, call, the required-server preflight
  requests   operator requests (elicitation) that survive a restart: open,
             list, answer, decline; the answer's result becomes an
             ``mcp_result`` message
  result     a call's result as the model sees it: bounded, fenced, the rest
             saved as an artifact
  tracing    the ``_meta`` hook a tracing plane fills (``traceparent``)
"""
