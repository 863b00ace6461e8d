"""The console's settings (``PORTALQ_CONSOLE_*``) and its secret key."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from portalq.jobs.database import home
from portalq.jobs.errors import InputError


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PORTALQ_CONSOLE_", env_file=os.environ.get(
        "PORTALQ_CONFIG"), extra="ignore", hide_input_in_errors=True)

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8780, ge=0, le=65535)
    idle_minutes: float = Field(30.0, gt=0, description="a session unused this long ends")
    max_session_hours: float = Field(12.0, gt=0, description="a session ends this long after "
                                     "sign-in, used or not")
    secret: str = Field("", description="signing key for cookies, at least 32 bytes "
                        "(default: a key generated once in PORTALQ_HOME/console-secret, "
                        "mode 0600)")
    secure_cookies: bool = Field(False, description="mark cookies Secure (behind HTTPS)")
    live_refresh_seconds: float = Field(5.0, gt=0, description="the live overview's refresh "
                                        "when no notification came (one query per process)")
    login_failures_per_name: int = Field(5, ge=1)
    login_failures_per_ip: int = Field(20, ge=1)
    login_window_minutes: float = Field(15.0, gt=0)
    password_sign_in: bool = Field(True, description="offer sign-in with a console "
                                   "password (false: single sign-on only)")
    # single sign-on with OpenID Connect (scheduler/console/oidc.py); off without an issuer
    oidc_issuer: str = Field("", description="the provider's issuer URL (discovery at "
                             "ISSUER/.well-known/openid-configuration)")
    oidc_client_id: str = ""
    oidc_client_secret: SecretStr = Field(SecretStr(""), description="the client secret "
                                          "(or oidc_client_secret_file)")
    oidc_client_secret_file: Path | None = Field(None, description="a file (mode 0600) "
                                                 "holding the client secret")
    oidc_redirect_url: str = Field("", description="the callback registered with the "
                                   "provider (default: PORTALQ_CONSOLE_URL/login/sso/callback)")
    oidc_scopes: str = "openid email profile"
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


#: a signing key shorter than this could be guessed (HMAC-SHA256: 32 bytes is its strength)
MIN_SECRET_BYTES = 32
TOO_SHORT = (f"must be at least {MIN_SECRET_BYTES} bytes (e.g. the output of "
             "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`)")


def secret_key(settings: ConsoleSettings) -> str:
    """``PORTALQ_CONSOLE_SECRET``, else the key in ``PORTALQ_HOME/console-secret``, created
    (0600, never overwritten) on first use."""
    if settings.secret:
        return settings.secret
    path = Path(home()) / "console-secret"
    try:
        return _checked(path.read_text().strip(), path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_urlsafe(48)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return _checked(path.read_text().strip(), path)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def _checked(key: str, path: Path) -> str:
    if len(key.encode()) < MIN_SECRET_BYTES:
        raise InputError(f"the console secret in {path} {TOO_SHORT}")
    return key
