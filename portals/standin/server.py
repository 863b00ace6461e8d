"""One ASGI app serving every stand-in portal under its own prefix, plus the control API.

    /bc/...        BC Registries (name request, incorporation)    portal bc_corporate_online
    /irs/...       IRS EIN Assistant                              portal irs_ein
    /delaware/...  Delaware ICIS                                  portal delaware_icis
    /crtc/...      CRTC registration                              portal crtc

Each portal sits behind :class:`~portals.standin.kit.sign_in_gate.SigninGate`: no sign-in unless
switched on through ``/_control/<portal>`` (``{"signin": {"enabled": true, ...}}``).
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from portalq.portals.standin.kit.network import DropAfterActing
from portalq.portals.standin.kit.sign_in_gate import SigninGate
from portalq.portals.standin.kit.state import PortalState, StandinState

# prefix -> (module, portal code); each module exposes ``create_app(state: PortalState)``
# and ``signin_look(title, body, status)``: its sign-in pages (off unless switched on)
PORTALS: dict[str, tuple[str, str]] = {
    "bc": ("portalq.portals.bc.standin", "bc_corporate_online"),
    "irs": ("portalq.portals.irs.standin", "irs_ein"),
    "delaware": ("portalq.portals.delaware.standin", "delaware_icis"),
    "crtc": ("portalq.portals.crtc.standin", "crtc"),
}


def create_app(state: StandinState | None = None, *, smtp_url: str | None = None) -> Starlette:
    """The stand-ins; ``smtp_url`` (``smtp://host:port``): where their e-mailed sign-in
    codes go by default (the demo's or the tests' mailbox)."""
    state = state or StandinState([code for _, code in PORTALS.values()], smtp_url)

    def per_portal(answer: Callable[[Request, PortalState], Awaitable[JSONResponse]]
                   ) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def endpoint(request: Request) -> JSONResponse:
            code = request.path_params["portal"]
            if code not in state.portals:
                return JSONResponse({"error": f"unknown portal {code}"}, status_code=404)
            return await answer(request, state[code])

        return endpoint

    @per_portal
    async def control(request: Request, portal: PortalState) -> JSONResponse:
        try:
            portal.control(await request.json())
        except (ValueError, TypeError, AttributeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(portal.snapshot())

    @per_portal
    async def ledger(request: Request, portal: PortalState) -> JSONResponse:
        return JSONResponse(list(portal.ledger))

    @per_portal
    async def arrivals(request: Request, portal: PortalState) -> JSONResponse:
        return JSONResponse(dict(portal.arrivals))

    @per_portal
    async def signins(request: Request, portal: PortalState) -> JSONResponse:
        return JSONResponse(portal.accounts.ledger())

    async def reset(request: Request) -> JSONResponse:
        for portal in state.portals.values():
            portal.reset()
        return JSONResponse({"ok": True})

    routes: list[Any] = [
        Route("/_control/{portal}", control, methods=["POST"]),
        Route("/_ledger/{portal}", ledger),
        Route("/_ledger/{portal}/signins", signins),
        Route("/_ledger/{portal}/arrivals", arrivals),
        Route("/_reset", reset, methods=["POST"]),
    ]
    for prefix, (module_name, code) in PORTALS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # portal not built yet
        portal = state[code]
        gate = SigninGate(DropAfterActing(module.create_app(portal), portal), portal.accounts,
                          module.signin_look,
                          getattr(module, "PUBLIC_PATHS", ()))
        routes.append(Mount(f"/{prefix}", app=gate))
    app = Starlette(routes=routes)
    app.state.standin = state
    return app


class StandinServer:
    """Runs the stand-ins with uvicorn in a background thread (tests, demo).

    ``with StandinServer() as server: server.url("irs")``
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 smtp_url: str | None = None) -> None:
        # the server only when serving: tests and tools build the app without it
        import uvicorn

        self.app = create_app(smtp_url=smtp_url)
        self.state: StandinState = self.app.state.standin
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="standin", daemon=True)
        self.host = host
        self.port = port

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def start(self) -> StandinServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("stand-in server failed to start")
            threading.Event().wait(0.01)
        sock = self._server.servers[0].sockets[0]
        self.port = sock.getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, prefix: str) -> str:
        return f"{self.base_url}/{prefix}"

    def portal_urls(self) -> dict[str, str]:
        return {code: self.url(prefix) for prefix, (_, code) in PORTALS.items()}

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(host: str = "127.0.0.1", port: int = 8765, smtp_url: str | None = None) -> None:
    """Serve the stand-ins in the foreground (``portalq standin``)."""
    # the server only when serving: tests and tools build the app without it
    import uvicorn

    uvicorn.run(create_app(smtp_url=smtp_url), host=host, port=port, log_level="info")
