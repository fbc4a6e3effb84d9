"""The HTTP surface of ``holon serve``.

- :mod:`.app`       the Starlette app: route table and guards
- :mod:`.routes`    control and read routes
- :mod:`.public`    public ingress routes (enqueue, webhooks, wake callbacks)
- :mod:`.common`    what the route modules share
- :mod:`.errors`    the one error shape
- :mod:`.ingress`   the public ingress policy and rate limits
- :mod:`.webhooks`  webhook signatures and replay dedupe
- :mod:`.listen`    listen addresses and sockets (imports nothing heavy)
- :mod:`.server`    the uvicorn server and its connection caps
"""
