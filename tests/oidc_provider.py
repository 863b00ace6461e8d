"""A small but genuine OpenID Connect provider for the console's sign-on tests.

A Starlette app on a real uvicorn server (a thread of the test process), reached as
``http://localhost:PORT`` while the console is ``http://127.0.0.1:PORT``: two sites, so the
browser treats the provider's redirect back as the cross-site navigation it is in
production. It serves discovery, a JWKS (an RSA key made per run), ``/authorize`` (a sign-in
form, then a session cookie of its own so a second sign-in goes straight back, like a real
provider's single sign-on session), and ``/token``, which checks the client secret (HTTP
Basic or form), the code (once, unexpired, for this client and redirect URI) and the PKCE
verifier (S256), then signs an RS256 ID token with joserfc.

Test knobs: ``overrides`` (claims to replace in the next ID tokens; None removes one),
``tamper`` (change the token's payload after signing), ``sign_with`` (another key under
the same key id) and ``hs256`` (an HMAC signature with the client secret). The provider keeps its own (wall-clock) time: it is another system.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import time
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

PASSWORD = "idp password"
TOKEN_SECONDS = 300
SESSION_COOKIE = "idp_session"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcProvider:
    def __init__(self, port: int, client_id: str, client_secret: str, redirect_uri: str,
                 ) -> None:
        self.port, self.client_id, self.client_secret = port, client_id, client_secret
        self.redirect_uri = redirect_uri
        self.issuer = f"http://localhost:{port}"
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig",
                                                         "alg": "RS256"})
        self.users: dict[str, dict[str, Any]] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, str] = {}
        self.overrides: dict[str, Any] = {}
        self.tamper = False
        self.sign_with: RSAKey | None = None
        self.hs256 = False  # sign with the client secret (HMAC), which the console refuses
        self.token_requests: list[dict[str, str]] = []
        self.app = Starlette(routes=[
            Route("/.well-known/openid-configuration", self.discovery),
            Route("/jwks", self.jwks),
            Route("/authorize", self.authorize, methods=["GET", "POST"]),
            Route("/token", self.token, methods=["POST"]),
        ])

    def add_user(self, name: str, email: str, groups: list[str]) -> None:
        self.users[name] = {"sub": f"sub-{name}-{secrets.token_hex(4)}", "email": email,
                            "email_verified": True, "groups": groups, "name": name.title(),
                            "preferred_username": name}

    def reset(self) -> None:
        self.overrides, self.tamper, self.sign_with, self.hs256 = {}, False, None, False

    # -- endpoints --------------------------------------------------------------------------
    async def discovery(self, request: Request) -> Response:
        return JSONResponse({
            "issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token", "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                      "client_secret_post"],
            "scopes_supported": ["openid", "email", "profile"]})

    async def jwks(self, request: Request) -> Response:
        return JSONResponse(KeySet([self.key]).as_dict(private=False))

    async def authorize(self, request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") != self.client_id or q.get("redirect_uri") != self.redirect_uri:
            return HTMLResponse("unknown client or redirect_uri", status_code=400)
        if q.get("response_type") != "code" or "openid" not in q.get("scope", "").split() \
                or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return HTMLResponse("bad authorization request", status_code=400)
        user = self.sessions.get(request.cookies.get(SESSION_COOKIE, ""))
        session = None
        if request.method == "POST":
            form = await request.form()
            name = str(form.get("username") or "")
            if name not in self.users or form.get("password") != PASSWORD:
                return HTMLResponse("wrong user name or password", status_code=401)
            user, session = name, secrets.token_urlsafe(16)
            self.sessions[session] = name
        if user is None:
            return HTMLResponse(
                f"<!doctype html><title>Test IdP</title><form method='post' "
                f"action='/authorize?{html.escape(str(request.url.query))}'>"
                "<input name='username'><input name='password' type='password'>"
                "<button type='submit' id='idp-submit'>Sign in</button></form>")
        code = secrets.token_urlsafe(24)
        self.codes[code] = {"user": user, "challenge": q["code_challenge"],
                            "nonce": q.get("nonce"), "redirect_uri": q["redirect_uri"],
                            "at": time.time()}
        response = RedirectResponse(f"{self.redirect_uri}?"
                                    + urlencode({"code": code, "state": q.get("state", "")}),
                                    status_code=302)
        if session:
            response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="lax")
        return response

    async def token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = request.headers.get("authorization", "")
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        if client_id != self.client_id or secret != self.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        grant = self.codes.pop(form.get("code", ""), None)  # a code works once
        if form.get("grant_type") != "authorization_code" or grant is None \
                or time.time() - grant["at"] > 60 \
                or form.get("redirect_uri") != grant["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        verifier = form.get("code_verifier", "")
        if _b64(hashlib.sha256(verifier.encode()).digest()) != grant["challenge"]:
            return JSONResponse({"error": "invalid_grant",
                                 "error_description": "PKCE verifier"}, status_code=400)
        access = secrets.token_urlsafe(24)
        return JSONResponse({"access_token": access, "token_type": "Bearer",
                             "expires_in": TOKEN_SECONDS,
                             "id_token": self.id_token(grant["user"], grant["nonce"])})

    def id_token(self, user: str, nonce: str | None) -> str:
        now = int(time.time())
        info = self.users[user]
        claims: dict[str, Any] = {"iss": self.issuer, "aud": self.client_id, "iat": now,
                                  "exp": now + TOKEN_SECONDS, "auth_time": now,
                                  "nonce": nonce, **info}
        for key, value in self.overrides.items():
            if value is None:
                claims.pop(key, None)
            else:
                claims[key] = value
        key = self.sign_with or self.key
        if self.hs256:
            token = jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(self.client_secret))
        else:
            token = jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)
        if self.tamper:  # a forged payload under the real signature
            head, _, sig = token.split(".")
            claims["groups"] = ["portalq-admins"]
            token = ".".join([head, _b64(json.dumps(claims).encode()), sig])
        return token


class ProviderServer:
    """The provider on a real uvicorn in a thread (started and stopped as a context)."""

    def __init__(self, provider: OidcProvider) -> None:
        import uvicorn

        self.provider = provider
        self.server = uvicorn.Server(uvicorn.Config(provider.app, host="127.0.0.1",
                                                    port=provider.port, log_level="warning"))

    def __enter__(self) -> OidcProvider:
        from tests.service_helpers import start_server_thread

        self.thread = start_server_thread(self.server, "the test identity provider")
        return self.provider

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
