"""The waiting plane: timers, the external trigger capability, wake hints,
waiting intents and continuation resolution.

Reached from ``tick``, ``turn`` (and later ``serve``) through the same
functions, so a cron line and a daemon reach the same states:

- :mod:`.timers`        ``holon timer``; due fires become ``timer_tick`` messages
- :mod:`.triggers`      the per-agent capability (``holon trigger``) and the
                        callback ingress :func:`.triggers.deliver`
- :mod:`.hints`         ``pending_wake_hint`` and its conversion to ``system_tick``
- :mod:`.intents`       waiting intents (``RecordExternalWait``/``CancelExternalWait``)
- :mod:`.continuation`  the per-message continuation decision before a turn
- :mod:`.scheduler`     the waiting plane's part of one ``tick`` pass and the
                        turn hooks
"""
