"""``holon serve`` and ``holon daemon``: the long-lived owner loop.

Serve adds no runtime logic: it decides *when* to call the steps a cron line
would call (``tick_agent``, ``run_turn``), through the same locks. Files stay
the truth; a manual ``holon turn`` or a cron line may run beside it.

Modules: ``loop`` (watchfiles-driven scheduler over every agent of the home).
Only this package imports uvicorn and starlette.
"""
