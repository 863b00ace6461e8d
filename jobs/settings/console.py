"""The console's settings (``PORTALQ_CONSOLE_*``): the admin console and its single sign-on."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from portalq.jobs.settings.section import Section

#: a signing key shorter than this could be guessed (HMAC-SHA256: 32 bytes is its strength)
MIN_SECRET_BYTES = 32
TOO_SHORT = (f"must be at least {MIN_SECRET_BYTES} bytes (e.g. the output of "
             "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`)")


class ConsoleSettings(Section):
    model_config = SettingsConfigDict(env_prefix="PORTALQ_CONSOLE_")
    title: ClassVar[str] = "Console (portalq[console])"

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8780, ge=0, le=65535, description="port to listen on")
    idle_minutes: float = Field(30.0, gt=0, description="a session unused this long ends")
    max_session_hours: float = Field(12.0, gt=0, description="a session ends this long after "
                                     "sign-in, used or not")
    secret: str = Field("", description="signing key for cookies, at least 32 bytes "
                        "(default: a key generated once in PORTALQ_HOME/console-secret, "
                        "mode 0600)")
    secure_cookies: bool = Field(False, description="mark cookies Secure (behind HTTPS)")
    live_refresh_seconds: float = Field(5.0, gt=0, description="the live overview's refresh "
                                        "when no notification came (one query per process)")
    login_failures_per_name: int = Field(5, ge=1, description="failed sign-ins of one name "
                                         "within the window that lock it out")
    login_failures_per_ip: int = Field(20, ge=1, description="failed sign-ins from one "
                                       "address within the window that lock it out")
    login_window_minutes: float = Field(15.0, gt=0, description="the window failed sign-ins "
                                        "count in")
    password_sign_in: bool = Field(True, description="offer sign-in with a console "
                                   "password (false: single sign-on only)")
    # single sign-on with OpenID Connect (scheduler/console/oidc.py); off without an issuer
    oidc_issuer: str = Field("", description="single sign-on: the provider's issuer URL "
                             "(discovery at ISSUER/.well-known/openid-configuration); "
                             "empty: no single sign-on")
    oidc_client_id: str = Field("", description="the client id registered with the provider")
    oidc_client_secret: SecretStr = Field(SecretStr(""), description="the client secret "
                                          "(or oidc_client_secret_file)")
    oidc_client_secret_file: Path | None = Field(None, description="a file (mode 0600) "
                                                 "holding the client secret")
    oidc_redirect_url: str = Field("", description="the callback registered with the "
                                   "provider (default: PORTALQ_CONSOLE_URL/login/sso/callback)")
    oidc_scopes: str = Field("openid email profile", description="the scopes asked for "
                             "(must include openid)")
    oidc_role_claim: str = Field("groups", description="the ID-token claim holding groups "
                                 "or roles (a dotted path for nested claims, e.g. "
                                 "realm_access.roles)")
    oidc_admins: str = Field("", description="comma-separated claim values that make an admin")
    oidc_operators: str = Field("", description="... an operator")
    oidc_viewers: str = Field("", description="... a viewer")
    oidc_allowed_domains: str = Field("", description="comma-separated e-mail domains "
                                      "allowed to sign in (empty: any)")
    oidc_label: str = Field("single sign-on", description="the sign-in button's name for "
                            "the provider")

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if value and len(value.encode()) < MIN_SECRET_BYTES:
            raise ValueError(TOO_SHORT)
        return value
