"""The sign-on settings (one-line errors before the console starts, the secret file's
mode, the callback derived from PORTALQ_CONSOLE_URL, the secret in no repr) and the claim
rules (role mapping, user name, e-mail domain)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portalq.jobs.errors import InputError
from portalq.scheduler.config import Settings
from portalq.scheduler.console.oidc import Config, domain_refusal, map_role, user_name
from portalq.scheduler.console.signing_key import ConsoleSettings

SECRET = "the-client-secret-value"
BASE = {"oidc_issuer": "https://id.example.com/realms/corp", "oidc_client_id": "portalq",
        "oidc_client_secret": SECRET, "oidc_admins": "ops-admins",
        "oidc_operators": "ops", "oidc_viewers": "staff,auditors"}


def config(service: Settings | None = None, **values: object) -> Config | None:
    return Config.from_settings(ConsoleSettings(**{**BASE, **values}),  # type: ignore[arg-type]
                                service or Settings(console_url="https://pq.example.com/"))


def test_configuration_and_its_one_line_errors(tmp_path: Path) -> None:
    c = config()
    assert c is not None and c.redirect_url == "https://pq.example.com/login/sso/callback"
    assert SECRET not in repr(c) and SECRET not in repr(ConsoleSettings(**BASE))  # type: ignore[arg-type]
    assert config(oidc_issuer="") is None
    bad = {
        "needs PORTALQ_CONSOLE_URL": dict(service=Settings(console_url="")),
        "must be an https:// URL": dict(oidc_issuer="http://id.example.com"),
        "CLIENT_ID": dict(oidc_client_id=""),
        "role mapping": dict(oidc_admins="", oidc_operators="", oidc_viewers=""),
        "must include openid": dict(oidc_scopes="email profile"),
        "must end in /login/sso/callback": dict(oidc_redirect_url="https://pq/elsewhere"),
        "CLIENT_SECRET_FILE": dict(oidc_client_secret=""),
        "nobody could sign in": dict(oidc_issuer="", password_sign_in=False),
    }
    for message, values in bad.items():
        with pytest.raises(InputError, match=message) as info:
            config(**values)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o644)
    with pytest.raises(InputError, match="readable by others") as info:
        config(oidc_client_secret="", oidc_client_secret_file=secret)
    assert SECRET not in str(info.value)
    secret.chmod(0o600)
    c = config(oidc_client_secret="", oidc_client_secret_file=secret)
    assert c is not None and c.client_secret == SECRET


def test_claims_map_to_the_highest_role_a_name_and_a_domain() -> None:
    c = config(oidc_allowed_domains="Example.com")
    assert c is not None
    assert map_role({"groups": ["staff", "ops"]}, c) == "operator"
    assert map_role({"groups": ["ops-admins", "staff"]}, c) == "admin"
    assert map_role({"groups": "auditors"}, c) == "viewer"
    assert map_role({"groups": ["sales"]}, c) is None and map_role({}, c) is None
    nested = config(oidc_role_claim="realm_access.roles")
    assert nested is not None
    assert map_role({"realm_access": {"roles": ["ops-admins"]}}, nested) == "admin"
    assert map_role({"realm_access": "ops-admins"}, nested) is None
    assert user_name({"sub": "1", "email": "Ada@Example.com"}) == "ada@example.com"
    assert user_name({"sub": "1", "email": "a@x", "email_verified": False,
                      "preferred_username": "ada"}) == "ada"
    assert user_name({"sub": "abc"}) == "abc"
    assert domain_refusal({"email": "ada@example.com"}, c) == ""
    assert "may not sign in" in domain_refusal({"email": "eve@example.org"}, c)
    assert "verified e-mail" in domain_refusal({"email": "ada@example.com",
                                                "email_verified": False}, c)
    open_config = config()
    assert open_config is not None and domain_refusal({}, open_config) == ""
