"""The network between the browser and a stand-in, as it really fails: the
``drop_after_acting`` fault (a path, e.g. ``/api/e-filing``).

A request to that path reaches the portal, which acts on it (records the filing, takes the
payment), and then the connection closes without a byte of the answer -- as when a link or a
proxy dies mid-answer. Unlike ``drop_after_submit`` (:func:`.state.drop_connection`, which
breaks the line mid-answer so that the browser cannot retry), this is the bare close a real
network gives: on a reused keep-alive connection Chromium then sends the same POST again by
itself, unasked (issue 53). Every arrival at the path is counted (``arrivals``), so a test
sees how many times the portal was reached, whatever the portal's ledger keeps.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Receive, Scope, Send

from portalq.portals.standin.kit.state import PortalState


class DropAfterActing:
    """ASGI wrapper of one stand-in app applying its portal's ``drop_after_acting`` fault."""

    def __init__(self, app: Any, state: PortalState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = self.state.faults.drop_after_acting
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        with self.state.lock:
            key = str(scope["path"])
            self.state.arrivals[key] = self.state.arrivals.get(key, 0) + 1
        if not path or not key.endswith(path):
            await self.app(scope, receive, send)
            return

        async def swallowed(message: Any) -> None:  # noqa: ARG001
            """The portal's answer, lost on the way."""

        await self.app(scope, receive, swallowed)   # the portal acts ...
        cycle = getattr(receive, "__self__", None)  # ... and the line goes dead (uvicorn)
        transport = getattr(cycle, "transport", None)
        if transport is None:
            raise ConnectionAbortedError("answer dropped")
        transport.close()
