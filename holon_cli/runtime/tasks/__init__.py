"""The task plane (command tasks): see :mod:`holon_cli.runtime.tasks.plane`.

Submodules: ``procs`` (process identity, env rule, tree stop), ``output``
(bounded previews), ``supervisor`` (the per-command supervisor process; its
output in ``capture``, its input in ``feed``, starting the command in
``spawn``), ``forked`` (starting a foreground call's supervisor by fork), ``handoff``
(the state a forked supervisor passes to its fresh interpreter at
promotion), ``plane`` (the facade over ``records``, ``launch``, ``control``,
``recovery``)."""
