"""A sign-in is confirmed, never assumed, and follows the real pages' own handles: GCKey's
login page is known by its fields (``#token1``/``#token2`` and its submit button, public
automation of GCKey: ``tests/facts/gckey-crtc.txt`` [G1]), not by the stand-in's marks; the
password is typed once; a page the sign-in does not know is never taken as signed in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from bckit import CRTC_PAYLOAD, build

from portalq.jobs.errors import AccountRejected, RetryableError
from portalq.portals.flows.browser import close_context
from portalq.portals.flows.signin import Credentials, sign_in

pytestmark = pytest.mark.browser

PASSWORD = "Correct-Horse-42!"
GCKEY_LOGIN = """<!doctype html><html><body><h1>Sign In</h1><form method=post action="#">
<label for=token1>Username</label><input id=token1 name=token1>
<label for=token2>Password</label><input id=token2 name=token2 type=password>
<button type=submit>Sign In</button></form></body></html>"""
GCKEY_CONTINUE = """<!doctype html><html><body><h1>Welcome back</h1>
<p>You are about to be redirected.</p><form><button>Continue</button></form></body></html>"""
#: GCKey's page after the sign-in [G1]: h1[property=name] and a submit input to click
GCKEY_BACK = """<!doctype html><html><body><h1 property=name>Welcome</h1>
<form method=post action="/back"><input type=submit value=Continue></form></body></html>"""
SERVICE = """<!doctype html><html><body><h1>My CRTC Account</h1><p>Welcome.</p></body></html>"""


@pytest.fixture
def ctx(make_ctx: Callable[..., Any]) -> Any:
    return make_ctx("process_crtc", build(CRTC_PAYLOAD))


def in_page(run: Callable[..., Any], ctx: Any, html: str | list[str],
            fn: Callable[[Any], Awaitable[Any]]) -> tuple[Any, list[str]]:
    """Run ``fn(page)`` with every request of the page answered by ``html`` (a list: the
    first page, then one per POST); the bodies the page posted."""
    posted: list[str] = []
    pages = [html] if isinstance(html, str) else html

    async def body() -> Any:
        context = await ctx.new_browser_context()
        try:
            page = await context.new_page()

            async def answer(route: Any) -> None:
                if route.request.method == "POST":
                    posted.append(route.request.post_data or "")
                await route.fulfill(status=200, content_type="text/html",
                                    body=pages[min(len(posted), len(pages) - 1)])

            await page.route("**/*", answer)
            return await fn(page)
        finally:
            await close_context(context)

    return run(body()), posted


def test_a_page_with_unknown_marks_is_never_signed_in(run, portals, ctx):
    with pytest.raises(RetryableError, match="neither a known sign-in step nor a signed-in"):
        in_page(run, ctx, GCKEY_CONTINUE,
                lambda page: sign_in(ctx, page, Credentials("acme", PASSWORD)))


def test_gckey_login_is_known_by_its_own_fields_and_signs_in(run, portals, ctx):
    """The real login page carries none of the stand-in's marks: its fields are typed, its
    button clicked, the page back to the service clicked, and the service's page is signed
    in (issue 53 item 4: the fields were typed only after the stand-in's mark appeared)."""
    signed, posted = in_page(run, ctx, [GCKEY_LOGIN, GCKEY_BACK, SERVICE],
                             lambda page: sign_in(ctx, page, Credentials("acme", PASSWORD)))
    assert signed.asked == 0 and len(posted) == 2
    assert "token1=acme" in posted[0] and "token2=" in posted[0]


def test_gckey_login_shown_again_after_the_password_is_a_refusal_typed_once(run, portals,
                                                                             ctx):
    async def attempt(page: Any) -> None:
        with pytest.raises(AccountRejected):
            await sign_in(ctx, page, Credentials("acme", PASSWORD))

    _, posted = in_page(run, ctx, GCKEY_LOGIN, attempt)
    assert len(posted) == 1   # the password is sent once, never again on the same page
