"""Cross-site request forgery against the console (issue 39): the CSRF token is bound to
the signed-in session (another session's token is refused, even planted in the cookie as
well), and a state-changing request from another origin is refused by its Origin or
Referer -- each with nothing written; the console's own forms keep working."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import console_env, seed

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("csrf-artifacts"), lambda dsn, artifacts: {"ids": seed(dsn, artifacts)}) as found:
        yield found


def _status(dsn: str, job_id: int) -> str:
    with psycopg.connect(dsn) as c:
        return str(c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                             (job_id,)).fetchone()[0])


def _audited(dsn: str, job_id: int) -> list[str]:
    with psycopg.connect(dsn) as c:
        return [r[0] for r in c.execute(
            "SELECT action FROM portalq.audit_log WHERE target = %s ORDER BY id",
            (f"job:{job_id}",)).fetchall()]


def _token(run: Any, page: Any) -> str:
    """The token the console's own form on this page carries."""
    return str(run(page.locator("input[name=csrftoken]").first.input_value()))


def test_a_token_from_another_session_is_refused(env, signin, run):
    job_id = env["ids"]["bc2"]
    alice, bob = signin("operator"), signin("operator")
    run(alice.goto(f"/jobs/{job_id}"))
    run(bob.goto(f"/jobs/{job_id}"))
    alices = _token(run, alice)
    assert alices != _token(run, bob)

    # Alice's valid token, in Bob's session: in the form, and planted in his cookie too
    run(bob.context.add_cookies([{"name": "csrftoken", "value": alices,
                                  "url": env["base"]}]))
    resp = run(bob.context.request.post(f"/jobs/{job_id}/cancel", form={
        "csrftoken": alices, "reason": "forged"}, max_redirects=0))
    assert resp.status == 403
    assert "session" in run(resp.text())
    assert _status(env["dsn"], job_id) == "pending" and _audited(env["dsn"], job_id) == []

    # Bob's own form (after a fresh page) still works, and so does Alice's
    run(bob.goto(f"/jobs/{job_id}"))
    resp = run(bob.context.request.post(f"/jobs/{job_id}/cancel", form={
        "csrftoken": _token(run, bob), "reason": "bob's own form"}, max_redirects=0))
    assert resp.status == 303
    assert _status(env["dsn"], job_id) == "cancelled"


def test_a_cross_origin_write_is_refused_by_origin_or_referer(env, signin, run):
    job_id = env["ids"]["bc"]
    page = signin("operator")
    run(page.goto(f"/jobs/{job_id}"))
    token = _token(run, page)
    # the session's own cookies and token: only where the request came from differs
    for headers in ({"Origin": "https://evil.example"}, {"Origin": "null"},
                    {"Referer": "https://evil.example/page"},
                    {"Origin": env["base"].replace("127.0.0.1", "localhost")}):
        resp = run(page.context.request.post(f"/jobs/{job_id}/cancel", headers=headers, form={
            "csrftoken": token, "reason": "cross-site"}, max_redirects=0))
        assert resp.status == 403, headers
        assert "origin" in run(resp.text()).lower()
    assert _status(env["dsn"], job_id) == "pending" and _audited(env["dsn"], job_id) == []

    # the console's own form in the browser: same origin, accepted
    async def own_form() -> None:
        await page.locator("form[action$='/cancel'] input[name=reason]").fill("duplicate")
        async with page.expect_navigation():
            await page.locator("#cancel").click()
    run(own_form())
    assert run(page.locator("#done").inner_text()) == "Cancelled."
    assert _status(env["dsn"], job_id) == "cancelled"
    assert _audited(env["dsn"], job_id) == ["job.cancel"]


def test_a_forged_form_on_another_site_changes_nothing(env, signin, browser, run):
    """A real page on another origin posting a form at the console in the browser of a
    signed-in operator."""
    job_id = env["ids"]["ein"]
    page = signin("operator")
    before = _status(env["dsn"], job_id)
    evil = (f'<form id="f" method="post" action="{env["base"]}/jobs/{job_id}/cancel">'
            '<input name="reason" value="forged"><input name="csrftoken" value="x"></form>')

    async def go() -> int:
        await page.route("http://evil.example/", lambda route: route.fulfill(
            status=200, content_type="text/html", body=evil))
        await page.goto("http://evil.example/")
        async with page.expect_response(lambda r: "/cancel" in r.url) as info:
            await page.evaluate("document.getElementById('f').submit()")
        return int((await info.value).status)

    assert run(go()) == 403
    assert _status(env["dsn"], job_id) == before and _audited(env["dsn"], job_id) == []
