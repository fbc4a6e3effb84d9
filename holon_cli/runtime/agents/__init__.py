"""The agents plane: the home and each agent's lifecycle, and what an agent is
made from.

- :mod:`.lifecycle`   home init, create (from a template, fail-closed),
                      resolve, list, stop/start
- :mod:`.removal`     ``holon agent rm``
- :mod:`.templates`   agent templates (built-in, local, remote)
- :mod:`.skills`      skill refs and installation
- :mod:`.remote_git`  fetching a template or skill from a git URL
- :mod:`.models`      the agent's model selection, checked before a turn
"""
