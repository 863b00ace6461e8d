"""Single sign-on with OpenID Connect (``PORTALQ_CONSOLE_OIDC_*``), for companies that have it.

The authorization-code flow with PKCE (S256), ``state`` and ``nonce``, through Authlib's
OAuth 2 client; the provider's endpoints from its discovery document, checked to name the
configured issuer. The ID token is verified with joserfc against the provider's JWKS
(asymmetric algorithms only: never ``none`` or a shared-secret HMAC; the key set is fetched
again when a token names a key it does not hold, so key rotation just works) and its
claims with Authlib's ID-token rules: ``iss``, ``aud`` (and ``azp``), ``exp``, ``iat`` and
``nonce``, with a small clock skew, "now" from :mod:`jobs.clock`.

The role comes from one claim (``groups`` by default; a dotted path reaches nested claims
such as Keycloak's ``realm_access.roles``): the highest role any of its values maps to.
The client secret is read from a 0600 file or the environment and never logged or shown.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from portalq.jobs import clock
from portalq.jobs.admin.users import RANK
from portalq.jobs.errors import InputError

if TYPE_CHECKING:
    from portalq.scheduler.config import Settings
    from portalq.scheduler.console.signing_key import ConsoleSettings

log = logging.getLogger("portalq.console.sso")

SKEW_SECONDS = 60  # clock skew allowed between the provider and this console
FLOW_SECONDS = 600  # a sign-in started longer ago than this must start again
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
              "ES512", "EdDSA")
CALLBACK = "/login/sso/callback"
TIMEOUT = 10.0
METADATA_TTL = 3600.0


class SignOnError(Exception):
    """A sign-on that cannot go on: one line for the page, no secret in it."""


def _split(value: str) -> frozenset[str]:
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def _secret(settings: ConsoleSettings) -> str:
    path = settings.oidc_client_secret_file
    if path is not None:
        try:
            mode = os.stat(path).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise InputError(f"the OIDC client secret file {path} is readable by others "
                                 f"(mode {stat.filemode(mode)}): chmod 600 it")
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise InputError(f"cannot read the OIDC client secret file {path}: "
                             f"{exc.strerror}") from None
    else:
        value = settings.oidc_client_secret.get_secret_value().strip()
    if not value:
        raise InputError("single sign-on needs PORTALQ_CONSOLE_OIDC_CLIENT_SECRET_FILE "
                         "(or PORTALQ_CONSOLE_OIDC_CLIENT_SECRET)")
    return value


def _loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Config:
    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    redirect_url: str
    scopes: str
    role_claim: str
    roles: Mapping[str, frozenset[str]]  # console role -> claim values giving it
    domains: frozenset[str]
    label: str

    @classmethod
    def from_settings(cls, settings: ConsoleSettings, service: Settings) -> Config | None:
        """The sign-on configuration; None when no issuer is set. A setting that is
        missing or wrong is an :class:`InputError` (one line) before the console starts."""
        issuer = settings.oidc_issuer.strip()
        if not issuer:
            if not settings.password_sign_in:
                raise InputError("PORTALQ_CONSOLE_PASSWORD_SIGN_IN=false needs single "
                                 "sign-on (PORTALQ_CONSOLE_OIDC_ISSUER): nobody could sign in")
            return None
        if not issuer.startswith("https://") and not _loopback(issuer):
            raise InputError(f"the OIDC issuer must be an https:// URL (got {issuer!r})")
        if not settings.oidc_client_id.strip():
            raise InputError("single sign-on needs PORTALQ_CONSOLE_OIDC_CLIENT_ID")
        redirect = settings.oidc_redirect_url.strip()
        if not redirect:
            base = service.console_url.strip().rstrip("/")
            if not base:
                raise InputError("single sign-on needs PORTALQ_CONSOLE_URL (or "
                                 "PORTALQ_CONSOLE_OIDC_REDIRECT_URL) for its callback")
            redirect = base + CALLBACK
        if urlsplit(redirect).path != CALLBACK:
            raise InputError(f"the OIDC redirect URL must end in {CALLBACK} (got {redirect!r})")
        roles = {"admin": _split(settings.oidc_admins),
                 "operator": _split(settings.oidc_operators),
                 "viewer": _split(settings.oidc_viewers)}
        if not any(roles.values()):
            raise InputError("single sign-on needs a role mapping: PORTALQ_CONSOLE_OIDC_ADMINS, "
                             "_OPERATORS or _VIEWERS (claim values, comma-separated)")
        if "openid" not in settings.oidc_scopes.split():
            raise InputError("PORTALQ_CONSOLE_OIDC_SCOPES must include openid")
        return cls(issuer, settings.oidc_client_id.strip(), _secret(settings),
                   redirect, settings.oidc_scopes, settings.oidc_role_claim.strip(), roles,
                   frozenset(d.lower() for d in _split(settings.oidc_allowed_domains)),
                   settings.oidc_label)


# -- the claims -> who and which role -------------------------------------------------------
def claim(claims: Mapping[str, Any], path: str) -> list[str]:
    """The values of a claim (a dotted path into nested objects), as strings."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return [str(v) for v in value]
    return [str(value)]


def map_role(claims: Mapping[str, Any], config: Config) -> str | None:
    """The highest console role one of the role claim's values maps to; None: none does."""
    values = set(claim(claims, config.role_claim))
    granted = [role for role, wanted in config.roles.items() if values & wanted]
    return max(granted, key=RANK.__getitem__) if granted else None


def user_name(claims: Mapping[str, Any]) -> str:
    """The console user's name: the e-mail (unless marked unverified), else the provider's
    user name, else the subject."""
    email = claims.get("email")
    if isinstance(email, str) and email and claims.get("email_verified") is not False:
        return email.lower()
    name = claims.get("preferred_username")
    return str(name) if name else str(claims["sub"])


def domain_refusal(claims: Mapping[str, Any], config: Config) -> str:
    """Why the e-mail domain is not allowed ("" if it is, or none is required)."""
    if not config.domains:
        return ""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or claims.get("email_verified") is False:
        return "your sign-on gives no verified e-mail address, which this console requires"
    domain = email.rsplit("@", 1)[1].lower()
    return "" if domain in config.domains else f"e-mail domain {domain} may not sign in here"


# -- the provider ---------------------------------------------------------------------------
class Provider:
    """The identity provider: discovery and key set (cached), the authorization URL, and
    the code exchange with the ID token's verification."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: Any = None
        # made at first use, then kept (their TLS contexts and connections): a plain client
        # for discovery and keys, Authlib's for the flow (which would add the last token it
        # fetched to any other request it made)
        self._http: Any = None
        self._oauth: Any = None

    def _client(self) -> Any:
        if self._oauth is None:
            # the OpenID Connect stack only when single sign-on is configured
            from authlib.integrations.httpx_client import AsyncOAuth2Client

            self._oauth = AsyncOAuth2Client(
                self.config.client_id, self.config.client_secret, scope=self.config.scopes,
                redirect_uri=self.config.redirect_url, code_challenge_method="S256",
                timeout=TIMEOUT)
        return self._oauth

    async def close(self) -> None:
        for client in (self._http, self._oauth):
            if client is not None:
                await client.aclose()
        self._http = self._oauth = None

    async def _get_json(self, url: str) -> dict[str, Any]:
        # the OpenID Connect stack only when single sign-on is configured
        import httpx2

        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=TIMEOUT)
        try:
            response = await self._http.get(url)
            response.raise_for_status()
            data = response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            log.warning("identity provider: %s: %s", url, type(exc).__name__)
            raise SignOnError("the identity provider cannot be reached; try again "
                              "later") from None
        if not isinstance(data, dict):
            raise SignOnError("the identity provider's answer is not usable")
        return data

    async def metadata(self) -> dict[str, Any]:
        # monotonic: a cache age, not an instant of the system (jobs.clock is for those)
        if self._metadata is None or time.monotonic() - self._metadata_at > METADATA_TTL:
            data = await self._get_json(self.config.issuer.rstrip("/")
                                        + "/.well-known/openid-configuration")
            if data.get("issuer") != self.config.issuer:  # exactly (OpenID Discovery 4.3)
                raise SignOnError(f"the identity provider's discovery names issuer "
                                  f"{str(data.get('issuer'))[:200]!r}, not the configured "
                                  f"{self.config.issuer!r}")
            for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(data.get(key), str):
                    raise SignOnError(f"the identity provider's discovery has no {key}")
            self._metadata, self._metadata_at = data, time.monotonic()
        return self._metadata

    async def key_set(self, refresh: bool = False) -> Any:
        # the OpenID Connect stack only when single sign-on is configured
        from joserfc.jwk import KeySet

        if self._keys is None or refresh:
            meta = await self.metadata()
            try:
                self._keys = KeySet.import_key_set(await self._get_json(meta["jwks_uri"]))  # type: ignore[arg-type]
            except (ValueError, KeyError, TypeError):
                raise SignOnError("the identity provider's key set is not usable") from None
        return self._keys

    async def authorization_url(self, state: str, nonce: str, verifier: str) -> str:
        meta = await self.metadata()
        url, _ = self._client().create_authorization_url(
            meta["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier)
        return str(url)

    async def finish(self, code: str, verifier: str, nonce: str) -> dict[str, Any]:
        """The verified claims of the ID token the code is exchanged for."""
        # the OpenID Connect stack only when single sign-on is configured
        import httpx2
        from authlib.integrations.base_client.errors import OAuthError

        meta = await self.metadata()
        methods = meta.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        auth = "client_secret_basic" if "client_secret_basic" in methods \
            else "client_secret_post"
        try:
            client = self._client()
            token = await client.fetch_token(
                meta["token_endpoint"], code=code, code_verifier=verifier,
                grant_type="authorization_code", auth=client.client_auth(auth))
        except OAuthError as exc:
            log.warning("identity provider refused the code: %s", exc.error)
            raise SignOnError("the identity provider refused the sign-in code") from None
        except (httpx2.HTTPError, ValueError) as exc:  # ValueError: an answer not JSON
            log.warning("identity provider: token endpoint: %s", type(exc).__name__)
            raise SignOnError("the identity provider cannot be reached; try again later") \
                from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignOnError("the identity provider sent no ID token")
        return await self.verify(id_token, nonce, meta, token.get("access_token"))

    async def verify(self, id_token: str, nonce: str, meta: Mapping[str, Any],
                     access_token: Any = None) -> dict[str, Any]:
        # the OpenID Connect stack only when single sign-on is configured
        from authlib.oidc.core import CodeIDToken
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError

        offered = meta.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = [a for a in offered if a in ASYMMETRIC] or ["RS256"]
        try:
            try:
                token = jwt.decode(id_token, await self.key_set(), algorithms=algorithms)
            except InvalidKeyIdError:
                # a key the cached set lacks: the provider rotated its keys. The token came
                # from the provider's own token endpoint, not from the browser, so nobody
                # else can make the console fetch the set again and again.
                token = jwt.decode(id_token, await self.key_set(refresh=True),
                                   algorithms=algorithms)
            claims = CodeIDToken(token.claims, token.header, options={
                "iss": {"essential": True, "value": self.config.issuer},
                "aud": {"essential": True, "value": self.config.client_id}},
                params={"nonce": nonce, "client_id": self.config.client_id,
                        "access_token": access_token if isinstance(access_token, str)
                        else None})
            claims.validate(now=int(clock.now().timestamp()), leeway=SKEW_SECONDS)
        except (JoseError, ValueError, KeyError) as exc:
            # the kind of failure only: a token is a credential, its text is never logged
            log.warning("ID token refused: %s %s", type(exc).__name__,
                        getattr(exc, "description", "") or "")
            raise SignOnError("the identity provider's ID token is not valid for this "
                              "console") from None
        return dict(claims)
