"""Sign-in through the company's OpenID Connect provider (``scheduler/console/oidc.py``).

``GET /login/sso`` starts a sign-in (the sign-in page's button is a link: the
Content-Security-Policy's ``form-action 'self'`` would stop a form's redirect to the
provider; it changes nothing but this browser's flow cookie, so there is nothing for CSRF
to forge): a fresh ``state``, ``nonce`` and PKCE verifier go into a short-lived signed
cookie (HttpOnly, SameSite=Lax so that it comes back on the provider's redirect, path
``/login/sso`` only) and the browser to the provider. ``GET /login/sso/callback`` checks
the state against that cookie, exchanges the code, verifies the ID token, maps its claims
to a role and records the user (:mod:`jobs.admin.sso`); from then on the session is a
password session's twin (idle expiry, CSRF on writes). Refusals are one line on the
sign-in page; a refused identity is audited; failures count towards the sign-in throttle
(by address; by name once the identity is known).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from typing import TYPE_CHECKING, Any

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import clock
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin import sso as console_sso
from portalq.jobs.admin import users as console_users
from portalq.scheduler.console.oidc import (
    FLOW_SECONDS,
    Config,
    Provider,
    SignOnError,
    domain_refusal,
    map_role,
    user_name,
)
from portalq.scheduler.console.pages_overview import safe_next
from portalq.scheduler.console.security import derive

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

log = logging.getLogger("portalq.console.sso")

FLOW_COOKIE = "portalq_sso"
FLOW_PATH = "/login/sso"
THROTTLE_NAME = "sso"  # failures before an identity is known count under this name


def _ip(request: Request) -> str:
    return request.client.host if request.client else "?"


def routes(console: Console, config: Config) -> list[Route]:
    provider = Provider(config)
    console.on_close.append(provider.close)
    flows = URLSafeSerializer(derive(console.secret, "sso-flow"), salt="portalq-sso")
    console.sso_label = config.label

    def refuse(request: Request, message: str, status: int = 403) -> Response:
        response = console.render(request, "login.html", user=None, error=message,
                                  status=status, next="")
        response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        return response

    def throttled(ip: str) -> bool:
        with console.db() as conn:
            # by address only: a shared name would let anyone lock everyone out
            return console_users.throttled(conn, None, ip, console.throttle)

    def failed(ip: str) -> None:
        with console.db() as conn:
            console_users.login_failed(conn, THROTTLE_NAME, ip, console.throttle)

    async def start(request: Request) -> Response:
        if await run_in_threadpool(throttled, _ip(request)):
            return refuse(request, "Too many failed sign-ins; wait a few minutes.", 429)
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)  # 64 characters (RFC 7636: 43-128)
        try:
            url = await provider.authorization_url(state, nonce, verifier)
        except SignOnError as exc:
            return refuse(request, f"Single sign-on is unavailable: {exc}.", 502)
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(FLOW_COOKIE, flows.dumps({
            "state": state, "nonce": nonce, "verifier": verifier,
            "next": safe_next(request.query_params.get("next")),
            "at": clock.now().timestamp()}), max_age=FLOW_SECONDS, path=FLOW_PATH,
            httponly=True, samesite="lax", secure=console.settings.secure_cookies)
        return response

    def _flow(request: Request) -> dict[str, Any] | None:
        raw = request.cookies.get(FLOW_COOKIE)
        if not raw:
            return None
        try:
            flow = flows.loads(raw)
        except BadSignature:
            return None
        if not isinstance(flow, dict) or \
                clock.now().timestamp() - float(flow.get("at", 0)) > FLOW_SECONDS:
            return None
        return flow

    async def callback(request: Request) -> Response:
        ip = _ip(request)
        if await run_in_threadpool(throttled, ip):
            return refuse(request, "Too many failed sign-ins; wait a few minutes.", 429)
        q = request.query_params
        flow = _flow(request)
        state = q.get("state") or ""
        if flow is None or not hmac.compare_digest(state.encode(),
                                                   str(flow["state"]).encode()):
            await run_in_threadpool(failed, ip)
            log.warning("sign-on refused: state missing or not this browser's (from %s)", ip)
            return refuse(request, "This sign-in was not started here, or it expired; "
                          "start again.", 400)
        if q.get("error"):
            await run_in_threadpool(failed, ip)
            return refuse(request, "The identity provider did not sign you in "
                          f"({q['error'][:60]}).", 403)
        try:
            claims = await provider.finish(q.get("code") or "", flow["verifier"],
                                           flow["nonce"])
        except SignOnError as exc:
            await run_in_threadpool(failed, ip)
            return refuse(request, f"Sign-on refused: {exc}.", 403)
        identity = console_sso.Identity(config.issuer, str(claims["sub"]), user_name(claims),
                                        map_role(claims, config))
        blocked = domain_refusal(claims, config)

        def record() -> tuple[str | None, str]:
            with console.db() as conn, conn.transaction():
                console_repo.sign_in_turn(conn, identity.name, ip)  # counted one by one
                if console_users.throttled(conn, identity.name, ip, console.throttle):
                    return None, "too many failed sign-ins; wait a few minutes"
                outcome = console_sso.sign_in(conn, identity, ip, console.throttle, blocked)
                if outcome.user is None:
                    return None, outcome.refusal
                return console_users.start_session(conn, outcome.user), ""

        token, refusal = await run_in_threadpool(record)
        if token is None:
            return refuse(request, f"Sign-on refused: {refusal}.", 403)
        # the provider's redirect made this a cross-site navigation: a SameSite=Strict
        # session cookie set now is not sent on a redirect that goes on from it, so the page
        # itself moves on (a same-site navigation, which does send it)
        target = flow.get("next") or "/"
        response = console.render(request, "signed_in.html", user=None, target=target)
        console.sessions.set_cookie(response, token)
        response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        return response

    return [Route("/login/sso", start, methods=["GET"]),
            Route("/login/sso/callback", callback, methods=["GET"])]
