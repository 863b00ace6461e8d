"""A sign-in is confirmed, never assumed: a page the sign-in step does not know — a real
GCKey page (``#token1``/``#token2``, then a continue page) where the stand-in's sign-in
form was expected — is never taken as signed in, and nothing is typed into it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from bckit import CRTC_PAYLOAD, build

from portalq.jobs.errors import RetryableError
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


@pytest.fixture
def ctx(make_ctx: Callable[..., Any]) -> Any:
    return make_ctx("process_crtc", build(CRTC_PAYLOAD))


def in_page(run: Callable[..., Any], ctx: Any, html: str,
            fn: Callable[[Any], Awaitable[Any]]) -> tuple[Any, list[str]]:
    """Run ``fn(page)`` with every request of the page answered by ``html``; the bodies
    the page posted."""
    posted: list[str] = []

    async def body() -> Any:
        context = await ctx.new_browser_context()
        try:
            page = await context.new_page()

            async def answer(route: Any) -> None:
                if route.request.method == "POST":
                    posted.append(route.request.post_data or "")
                await route.fulfill(status=200, content_type="text/html", body=html)

            await page.route("**/*", answer)
            return await fn(page)
        finally:
            await close_context(context)

    return run(body()), posted


@pytest.mark.parametrize("html", [GCKEY_LOGIN, GCKEY_CONTINUE], ids=["login", "continue"])
def test_a_page_with_unknown_marks_is_never_signed_in(run, portals, ctx, html):
    with pytest.raises(RetryableError, match="neither a known sign-in step nor a signed-in"):
        in_page(run, ctx, html, lambda page: sign_in(ctx, page, Credentials("acme", PASSWORD)))


def test_nothing_is_typed_into_an_unknown_login_page(run, portals, ctx):
    async def attempt(page: Any) -> str:
        with pytest.raises(RetryableError):
            await sign_in(ctx, page, Credentials("acme", PASSWORD))
        return str(await page.locator("#token2").input_value())

    typed, posted = in_page(run, ctx, GCKEY_LOGIN, attempt)
    assert typed == "" and posted == []
