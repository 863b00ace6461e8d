"""Console single sign-on against a real OpenID Connect provider (tests/oidc_provider.py):
in real Chromium, an admin-group user signs in, acts, and the audit log names them; once
disabled they are refused although the provider still has them signed in; a viewer-group
user's write is refused and their role follows the provider's groups at the next sign-in;
a user with no mapped group is refused and audited. Over plain HTTP against the same
servers: tampered, expired, wrong-audience, wrong-nonce, wrong-issuer, foreign-key and
HMAC-signed ID tokens, a state that is not the browser's and a domain not allowed are all
refused, with no session, nothing recorded as a user, and the client secret in no page or
log; a rotated provider key is fetched; password sign-in can be turned off."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx2
import psycopg
import pytest
from consolekit import ConsoleServer, MovableClock
from joserfc.jwk import RSAKey

from portalq.jobs import clock
from portalq.jobs.admin import users as console_users
from portalq.jobs.errors import IllegalTransition
from tests.oidc_provider import PASSWORD, OidcProvider, ProviderServer
from tests.ports import free_port

CLIENT_ID = "portalq-console"
CLIENT_SECRET = "s3cret-of-the-console-client-" + "q" * 12


@pytest.fixture(scope="module")
def sso(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    name = pg_server.create()
    url, dsn = pg_server.url(name), pg_server.dsn(name)
    folder = tmp_path_factory.mktemp("sso")
    secret_file = folder / "client-secret"
    secret_file.write_text(CLIENT_SECRET + "\n")
    os.chmod(secret_file, 0o600)
    port = free_port()
    provider = OidcProvider(free_port(), CLIENT_ID, CLIENT_SECRET,
                            f"http://127.0.0.1:{port}/login/sso/callback")
    provider.add_user("ada", "ada@example.com", ["portalq-admins", "staff"])
    provider.add_user("vic", "vic@example.com", ["staff"])
    provider.add_user("nobody", "nobody@example.com", ["sales"])
    provider.add_user("eve", "eve@elsewhere.org", ["portalq-admins"])
    provider.add_user("rot", "rot@example.com", ["staff"])
    try:
        with ProviderServer(provider), ConsoleServer(
                dsn, folder, port=port, live_refresh_seconds=30, oidc_issuer=provider.issuer,
                oidc_client_id=CLIENT_ID, oidc_client_secret_file=secret_file,
                oidc_redirect_url=provider.redirect_uri, oidc_admins="portalq-admins",
                oidc_operators="portalq-operators", oidc_viewers="staff",
                oidc_allowed_domains="example.com", oidc_label="Example SSO") as server:
            yield {"url": url, "dsn": dsn, "base": server.base, "provider": provider,
                   "settings": server.console.settings}
    finally:
        pg_server.drop(name)


@pytest.fixture(autouse=True)
def _fresh_provider(sso):
    sso["provider"].reset()
    yield
    with psycopg.connect(sso["dsn"], autocommit=True) as c:
        c.execute("DELETE FROM portalq.console_login_failures")


def one(dsn: str, query: str, *args: Any) -> Any:
    with psycopg.connect(dsn) as c:
        return c.execute(query, args).fetchall()


def browser_sign_on(run, browser, base: str, user: str | None) -> Any:
    """A fresh browser context through the SSO button (and the provider's form when
    ``user`` is given; None: the provider's session signs in without asking)."""
    async def go() -> Any:
        ctx = await browser.new_context(base_url=base)
        ctx.set_default_timeout(10_000)
        page = await ctx.new_page()
        await page.goto("/login")
        await page.click("#sso")
        await page.wait_for_url("http://localhost:*/authorize?*")
        await page.fill("input[name=username]", user or "")
        await page.fill("input[name=password]", PASSWORD)
        await page.click("#idp-submit")
        await page.wait_for_load_state()
        return page
    return run(go())


async def _again(page: Any, base: str) -> None:
    """Sign out (if signed in) and through the SSO button once more: the provider still has
    this browser signed in, so it does not ask."""
    if await page.locator("form.who").count():
        await page.click("form.who button")
        await page.wait_for_url("**/login?bye=1")
    await page.goto(base + "/login")
    await page.click("#sso")
    await page.wait_for_load_state()


def csrf(run, page) -> str:
    return next(c["value"] for c in run(page.context.cookies()) if c["name"] == "csrftoken")


@pytest.mark.browser
def test_admin_group_signs_in_acts_under_their_name_and_is_refused_once_disabled(
        sso, browser, run):
    base, dsn = sso["base"], sso["dsn"]
    page = browser_sign_on(run, browser, base, "ada")
    run(page.wait_for_url(base + "/"))
    assert "ada@example.com" in run(page.locator("form.who").inner_text())
    assert run(page.locator("form.who em.role").inner_text()) == "admin"
    cookies = {c["name"]: c for c in run(page.context.cookies())}
    assert cookies["portalq_session"]["httpOnly"] and \
        cookies["portalq_session"]["sameSite"] == "Strict"
    assert "portalq_sso" not in cookies  # the flow's cookie is gone once used

    # a sign-on session is a session like any: a write without the CSRF token is refused
    resp = run(page.context.request.post("/portals/irs_ein/pause", form={
        "reason": "no token"}, max_redirects=0))
    assert resp.status == 403
    resp = run(page.context.request.post("/portals/irs_ein/pause", form={
        "csrftoken": csrf(run, page), "reason": "maintenance window"}, max_redirects=0))
    assert resp.status == 303
    assert one(dsn, "SELECT actor, role, source, target, reason FROM portalq.audit_log "
               "WHERE action = 'portal.pause'") == [
        ("ada@example.com", "admin", "console", "portal:irs_ein", "maintenance window")]
    assert one(dsn, "SELECT u.name, u.role, u.password_hash, i.issuer FROM portalq.console_users u "
               "JOIN portalq.console_sso_identities i ON i.user_id = u.id "
               "WHERE u.name = 'ada@example.com'") == [
        ("ada@example.com", "admin", None, sso["provider"].issuer)]
    assert one(dsn, "SELECT actor, source FROM portalq.audit_log WHERE action = 'user.add' "
               "AND target = 'user:ada@example.com'") == [("ada@example.com", "sso")]
    # no password sign-in for a sign-on user, whatever is typed, nor a password to set
    assert run(page.context.request.post("/login", form={
        "csrftoken": csrf(run, page), "name": "ada@example.com", "password": "x" * 12},
        max_redirects=0)).status == 401
    with psycopg.connect(dsn) as c, pytest.raises(IllegalTransition, match="single sign-on"):
        console_users.set_password(c, "ada@example.com", "y" * 12)

    # what `portalq users disable` does (in-process: no CLI start-up for the test to wait on)
    with psycopg.connect(dsn) as c:
        console_users.disable(c, "ada@example.com")
    run(page.goto("/portals"))
    assert "/login" in page.url  # the session ended with the disable
    run(_again(page, base))
    run(page.wait_for_url("**/login/sso/callback?*"))
    assert "user ada@example.com is disabled" in run(page.locator("#login-error").inner_text())
    run(page.goto("/"))
    assert "/login" in page.url  # not signed in
    assert one(dsn, "SELECT actor, reason FROM portalq.audit_log WHERE action = "
               "'user.sign_in_refused'") == [("ada@example.com",
                                             "user ada@example.com is disabled")]
    run(page.context.close())


@pytest.mark.browser
def test_viewer_write_is_refused_role_follows_groups_and_unmapped_user_is_refused(
        sso, browser, run):
    base, dsn, provider = sso["base"], sso["dsn"], sso["provider"]
    page = browser_sign_on(run, browser, base, "vic")
    run(page.wait_for_url(base + "/"))
    assert run(page.locator("form.who em.role").inner_text()) == "viewer"
    resp = run(page.context.request.post("/portals/irs_ein/resume", form={
        "csrftoken": csrf(run, page), "reason": "viewer tries"}, max_redirects=0))
    assert resp.status == 403
    assert one(dsn, "SELECT count(*) FROM portalq.audit_log WHERE action = 'portal.resume'") == [(0,)]

    # the provider now puts vic in the operators' group: the next sign-in makes them one
    provider.users["vic"]["groups"] = ["staff", "portalq-operators"]
    run(_again(page, base))
    run(page.wait_for_url(base + "/"))
    assert run(page.locator("form.who em.role").inner_text()) == "operator"
    assert one(dsn, "SELECT actor, before, after FROM portalq.audit_log WHERE action = 'user.role'") \
        == [("vic@example.com", {"role": "viewer"}, {"role": "operator"})]
    run(page.context.close())

    page = browser_sign_on(run, browser, base, "nobody")
    assert "no console role" in run(page.locator("#login-error").inner_text())
    assert not [c for c in run(page.context.cookies()) if c["name"] == "portalq_session"]
    assert one(dsn, "SELECT count(*) FROM portalq.console_users WHERE name LIKE 'nobody%%'") == [(0,)]
    assert one(dsn, "SELECT actor, after->>'mapped_role' FROM portalq.audit_log "
               "WHERE action = 'user.sign_in_refused' AND actor LIKE 'nobody%%'") == [
        ("nobody@example.com", None)]
    run(page.context.close())


# --- the callback over plain HTTP: what must be refused -------------------------------------

def http_sign_on(sso: dict[str, Any], user: str, *, state: str | None = None,
                 ) -> tuple[httpx2.Response, httpx2.Client]:
    """The whole flow without a browser: the console's sign-in page, the SSO button, the
    provider's form, the callback (``state`` replaces the provider's if given)."""
    client = httpx2.Client(follow_redirects=False, timeout=10)
    client.get(sso["base"] + "/login")
    start = client.get(sso["base"] + "/login/sso")
    assert start.status_code == 303, start.text
    back = client.post(start.headers["location"], data={"username": user,
                                                        "password": PASSWORD})
    assert back.status_code == 302, back.text
    callback = httpx2.URL(back.headers["location"])
    if state is not None:
        callback = callback.copy_set_param("state", state)
    return client.get(str(callback)), client


CASES = {
    "wrong audience": ({"aud": "another-client"}, "ID token is not valid"),
    "wrong nonce": ({"nonce": "not-the-one-sent"}, "ID token is not valid"),
    "wrong issuer": ({"iss": "http://localhost:1"}, "ID token is not valid"),
    "no nonce": ({"nonce": None}, "ID token is not valid"),
}


def test_bad_id_tokens_states_and_domains_are_refused(sso, caplog):
    caplog.set_level(logging.DEBUG)
    provider, dsn = sso["provider"], sso["dsn"]
    seen: list[str] = []
    users_before = one(dsn, "SELECT count(*) FROM portalq.console_users")

    def refused(user: str = "ada", status: int = 403, **kwargs: Any) -> str:
        resp, client = http_sign_on(sso, user, **kwargs)
        seen.append(resp.text)
        assert resp.status_code == status, resp.text
        assert "portalq_session" not in client.cookies
        client.close()
        return resp.text

    for overrides, message in CASES.values():
        provider.reset()
        provider.overrides = overrides
        assert message in refused()
    provider.reset()
    provider.tamper = True
    assert "ID token is not valid" in refused(user="vic")
    provider.reset()
    provider.sign_with = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    assert "ID token is not valid" in refused()
    provider.reset()
    provider.hs256 = True
    assert "ID token is not valid" in refused()
    provider.reset()
    moving = MovableClock()
    clock.set_clock(moving)
    moving.offset = timedelta(minutes=7)  # past exp (5 min) and the skew (1 min)
    assert "ID token is not valid" in refused()
    clock.set_clock(None)
    assert "not started here" in refused(status=400, state="someone-elses-state")
    assert "domain elsewhere.org may not sign in" in refused(user="eve")
    # none of these made a user, and each counts towards the sign-in throttle
    assert one(dsn, "SELECT count(*) FROM portalq.console_users") == users_before
    failures = one(dsn, "SELECT count(*) FROM portalq.console_login_failures")[0][0]
    assert failures == len(CASES) + 6
    # the verifier and the secret reached the provider, and nothing else shows the secret
    assert all(r.get("code_verifier") for r in provider.token_requests)
    for text in [*seen, caplog.text]:
        assert CLIENT_SECRET not in text

    # the provider rotates its key: the console fetches the new set and signs rot in
    provider.key = RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig"})
    resp, client = http_sign_on(sso, "rot")
    assert resp.status_code == 200 and "portalq_session" in client.cookies, resp.text
    assert client.get(sso["base"] + "/jobs").status_code == 200
    client.close()

    with psycopg.connect(dsn, autocommit=True) as c:
        for _ in range(20):  # the per-address limit (login_failures_per_ip)
            c.execute("INSERT INTO portalq.console_login_failures (at, name, ip) "
                      "VALUES (%s, 'x', '127.0.0.1')", (clock.now(),))
    client = httpx2.Client(follow_redirects=False, timeout=10)
    client.get(sso["base"] + "/login")
    resp = client.get(sso["base"] + "/login/sso")
    assert resp.status_code == 429 and "Too many" in resp.text
    client.close()


def test_password_sign_in_can_be_turned_off(sso, monkeypatch):
    with psycopg.connect(sso["dsn"]) as c:
        console_users.add_user(c, "olga", "admin", "a password long enough")
    monkeypatch.setattr(sso["settings"], "password_sign_in", False)
    with httpx2.Client(follow_redirects=False, timeout=10) as client:
        page = client.get(sso["base"] + "/login")
        assert 'id="sso"' in page.text and 'name="password"' not in page.text
        resp = client.post(sso["base"] + "/login", data={
            "csrftoken": client.cookies["csrftoken"], "name": "olga",
            "password": "a password long enough"})
        assert resp.status_code == 403 and "use single sign-on" in resp.text
        assert "portalq_session" not in client.cookies
