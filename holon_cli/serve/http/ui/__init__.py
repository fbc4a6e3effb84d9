"""The web console: ``/ui/``, served by ``holon serve`` (both engines) on the
same origin and under the same guards as the control routes.

- :mod:`.pages`    the page handlers (home, agent, search, login) and the
                   guard each route passes
- :mod:`.live`     the live streams (SSE): conversation rows and panels
- :mod:`.views`    what the pages show, read from the runtime
- :mod:`.render`   Jinja2 and Markdown, static files, security headers
- :mod:`.session`  the login cookie the control routes accept
- :mod:`.actions`  which control routes (so which buttons) this serve has
- ``templates/``, ``static/`` (``console.js``: the one script, ours;
  ``console.css``)

The console adds no authority: it reads what ``holon status``, ``workitem
list``, ``task list``, ``timer list`` and ``memory search`` read, and every
action is a ``fetch`` of an existing control route from the page.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.routing import BaseRoute


def routes(check: Callable[[Request, str], None]) -> list[BaseRoute]:
    """The console's routes, each behind ``check(request, access)`` (the
    app's guards: ``control``, ``browser``, ``open``)."""
    from holon_cli.serve.http.ui import pages

    return pages.routes(check)
