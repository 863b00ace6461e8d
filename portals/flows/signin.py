"""One sign-in step for every flow, and the signs of a lost session.

    creds = Credentials("acme", password, totp_seed=seed)     # from the secrets provider
    signed = await sign_in(ctx, page, creds, ask=ask)          # ask(question) -> answer
    if signed.password_expires_in is not None: ...             # tell the admins, days ahead
    ...
    await check_session(page)   # after a step: raises SessionLost -> sign in again

What it does on the page, per the portal's answer: user name and password (typed **once**
per call: a refused password raises :class:`jobs.errors.AccountRejected`, a locked account
:class:`~jobs.errors.AccountLocked`, neither is ever retried); a TOTP code computed from the
seed with ``pyotp`` on the jobs clock (no human); an e-mailed code or a CAPTCHA answered
through ``ask`` (the caller decides how a person is asked and how long to wait); the
"password expires in N days" interstitial passed, its N returned; a forced password change
raises :class:`~jobs.errors.PasswordChangeRequired` (a person changes it and updates the
secret).

Secrets: the whole step runs inside :func:`portals.flows.browser.untraced` (nothing of it
in a trace; tracing resumes only if no page shows the password or seed), password inputs
are masked in every screenshot (:data:`portals.flows.base.SENSITIVE_SELECTOR`), and no
error text carries a secret. Written against the stand-ins' sign-in markers
(:mod:`portals.standin.kit.sign_in_gate`), which imitate what the real portals show.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pyotp
from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import (
    AccountLocked,
    AccountRejected,
    BusinessError,
    PasswordChangeRequired,
    PortalChanged,
    PortalUnavailable,
    RetryableError,
)
from portalq.portals.flows.base import click_and_wait
from portalq.portals.flows.browser import trace_secrets, untraced
from portalq.portals.flows.context import Credentials, FlowContext, HeldAccount, SessionState
from portalq.portals.flows.masking import masked_screenshot, redact

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

#: asks a person something mid-flow and returns the answer (e.g. an e-mailed code)
Ask = Callable[[str], Awaitable[str]]

_MARKERS = ("account-locked", "signin-error", "password-change", "password-expiry",
            "mfa-error", "mfa-form", "captcha", "signin-form", "signed-out")
_MARKER_JS = """ids => ids.find(id => document.getElementById(id)) ?? null"""
#: a page asking for a password is never a signed-in page, whatever else it shows
_ASKS_PASSWORD_JS = """() => !!document.querySelector('input[type=password]')"""
MAX_STEPS = 10
#: what a sign-in expects to meet (a changed portal's evidence)
SIGNIN_PAGES = ("one of the sign-in steps (elements with the ids "
                + ", ".join(f"#{m}" for m in _MARKERS)
                + ") or, once the password was sent, a page the portal shows signed in")
#: the user name and password inputs of a portal's sign-in form ("": the stand-in kit's, the
#: only one known by the kit's marks; the others are known by their own fields);
#: GCKey (the CRTC's sign-in) [S]: ``#token1``, ``#token2``; eCorp2 (Delaware) [S]: its
#: Angular ``formcontrolname`` inputs
FIELDS = {"": ("#signin-username", "#signin-password"), "crtc": ("#token1", "#token2"),
          "delaware_icis": ("input[formcontrolname=userName]",
                            "input[formcontrolname=password]")}
#: GCKey's page after a sign-in [S]: its ``h1[property=name]`` and a submit input that must
#: be clicked to go back to the service
_CONTINUE_JS = """() => !!document.querySelector('h1[property=name]')
  && !!document.querySelector('input[type=submit]')
  && !document.querySelector('input[type=password]')"""
MAX_ASKS = 3


@dataclass(frozen=True)
class SignedIn:
    #: days until the password expires, when the portal warned (else None)
    password_expires_in: int | None = None
    #: questions asked of a person on the way (e-mailed code, CAPTCHA)
    asked: int = 0
    #: signed in by a session an earlier job kept (no password typed)
    reused: bool = False


class SessionLost(RetryableError):
    """The portal ended the signed-in session: ``reason`` is "expired" (timed out),
    "ended" (the account signed in elsewhere) or "signed_out" (sent back to sign in).
    The caller signs in again; if it never catches it, the attempt is retried."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"portal session lost ({reason})")
        self.reason = reason


async def _marker(page: Page) -> str | None:
    found = await page.evaluate(_MARKER_JS, list(_MARKERS))
    return str(found) if found is not None else None


async def _submit(page: Page, form: str) -> None:
    await _submit_with(page, page.locator(f"#{form} button[type=submit]"))


async def _submit_with(page: Page, button: Locator) -> None:
    status = await click_and_wait(page, button)
    if status is not None and status >= 500:
        raise PortalUnavailable(f"sign-in answered HTTP {status}")


async def _real_form(page: Page, portal: str) -> bool:
    """Does the page show ``portal``'s own login fields (a sourced :data:`FIELDS` entry) and
    a submit button in their form?"""
    if portal not in FIELDS:
        return False
    user, password = FIELDS[portal]
    return bool(await page.locator(user).count() and await page.locator(
        f"form:has({password}) button[type=submit]").count())


async def sign_in(ctx: FlowContext[BaseModel], page: Page, creds: Credentials, *,
                  portal: str | None = None, ask: Ask | None = None,
                  start: str = "/signin") -> SignedIn:
    """Sign ``creds`` in on ``portal`` (default: the job's) in ``page``; see the module."""
    code = portal or ctx.portal
    base = ctx.portal_urls[code].rstrip("/")
    secrets = creds.secrets() + list(ctx.secrets())
    try:
        async with untraced(page.context, secrets=secrets):
            return await _steps(ctx, page, creds, code, f"{base}{start}", ask)
    except (BusinessError, RetryableError) as exc:
        exc.args = tuple(redact(str(a), secrets) for a in exc.args)
        raise


async def sign_in_with_account(ctx: FlowContext[BaseModel], page: Page, *, start: str = "/signin",
                               home: str = "/") -> SignedIn | None:
    """Sign in with the account the job holds (``ctx.account()``), asking a person through
    ``ctx.ask`` when the portal sends a code; None when the portal has no account
    configured (nothing to sign in with).

    Sessions are reused between jobs: the account's kept session (its cookies, sealed at
    rest) is tried first on the portal's ``home`` page; only if the portal no longer knows
    it is the password typed (and the new session kept for the next job)."""
    held: HeldAccount | None = await ctx.account()
    if held is None:
        return None
    await ctx.step("signing in")
    base = ctx.portal_urls[ctx.portal].rstrip("/")
    kept = await held.session()
    trace_secrets(page.context, held.credentials.secrets())
    if kept and kept.get("cookies"):
        trace_secrets(page.context, [c.get("value", "") for c in kept["cookies"]])
        async with untraced(page.context, secrets=held.credentials.secrets()):
            await page.context.add_cookies(kept["cookies"])
            await page.goto(f"{base}{home}")
            if await signed_in_page(page):  # confirmed, never assumed
                return SignedIn(reused=True)
        await held.drop_session()
        await page.context.clear_cookies()
    signed = await sign_in(ctx, page, held.credentials, ask=ctx.ask, start=start)
    if signed.password_expires_in is not None:
        await held.password_expires_in(signed.password_expires_in)
    storage = await page.context.storage_state()
    state: SessionState = dict(storage)
    # the session's cookies ride on every later request the trace records
    trace_secrets(page.context, [str(c.get("value", "")) for c in storage.get("cookies", [])])
    await held.keep_session(state)
    return signed


async def _steps(ctx: FlowContext[BaseModel], page: Page, creds: Credentials, portal: str, url: str,
                 ask: Ask | None) -> SignedIn:
    response = await page.goto(url)
    if response is not None and response.status >= 500:
        raise PortalUnavailable(f"sign-in page answered HTTP {response.status}")
    who = f"account {creds.user!r} on {portal}"
    password_sent, days, asked, codes = False, None, 0, 0

    async def person(question: str) -> str:
        nonlocal asked
        if ask is None:
            raise BusinessError(f"sign-in needs a person ({question}); nobody to ask")
        if asked >= MAX_ASKS:
            raise RetryableError(f"sign-in: {who}: no accepted answer after {asked} questions")
        asked += 1
        return (await ask(question)).strip()

    for _ in range(MAX_STEPS):
        marker = await _marker(page)
        if marker is None and await _real_form(page, portal):
            # the real login page carries none of the stand-in's marks: known by its own
            # fields (GCKey's #token1/#token2 [S]), typed and submitted by its button
            marker = "signin-form"
        if marker == "account-locked":
            raise AccountLocked(f"{who} is locked", account=creds.user)
        if marker == "signin-error" or (marker == "signin-form" and password_sent):
            raise AccountRejected(f"{who}: user name or password refused", account=creds.user)
        if marker == "password-change":
            raise PasswordChangeRequired(f"{who}: the portal requires a new password",
                                         account=creds.user)
        if marker == "signin-form":
            user_field, password_field = FIELDS.get(portal, FIELDS[""])
            await page.locator(user_field).fill(creds.user)
            await page.locator(password_field).fill(creds.password)
            password_sent = True  # set before the click: whatever happens, never twice
            if await page.locator("#signin-form").count():
                await _submit(page, "signin-form")
            else:
                await _submit_with(page, page.locator(f"form:has({password_field}) "
                                                      "button[type=submit]").first)
        elif marker == "captcha":
            shot = ctx.artifacts_dir / f"captcha-{asked + 1}.png"
            await masked_screenshot(page, shot, ctx.secrets())
            answer = await person(f"{portal}: type the characters in the picture ({shot})")
            await page.locator("#captcha-answer").fill(answer)
            await _submit(page, "captcha-form")
        elif marker in ("mfa-form", "mfa-error"):
            if marker == "mfa-error" and not await page.locator("#mfa-form").count():
                raise PortalUnavailable(f"sign-in: {portal} could not send a verification code")
            method = await page.locator("#mfa-form").get_attribute("data-method")
            if method == "totp":
                if marker == "mfa-error" or not creds.totp_seed:
                    raise AccountRejected(f"{who}: authenticator code refused or no TOTP seed",
                                          account=creds.user)
                value = pyotp.TOTP(creds.totp_seed).at(clock.now())
            else:
                codes += 1
                value = await person(f"{portal}: the verification code e-mailed for {who}"
                                     + (" (the last one was refused)" if codes > 1 else ""))
            await page.locator("#mfa-code").fill(value)
            await _submit(page, "mfa-form")
        elif marker == "password-expiry":
            text = await page.locator("#password-expiry").get_attribute("data-days")
            days = int(text) if text and text.lstrip("-").isdigit() else None
            await _submit(page, "expiry-form")
        elif marker == "signed-out":
            raise SessionLost(await page.locator("#signed-out").get_attribute("data-reason")
                              or "signed_out")
        elif password_sent and await _continue_page(page):
            # GCKey's page back to the service: it must be clicked (the service's session
            # starts there)
            await click_and_wait(page, page.locator("input[type=submit]").first)
        elif password_sent and await signed_in_page(page):
            return SignedIn(password_expires_in=days, asked=asked)
        else:  # never assumed: a page the flow does not know is not "signed in"
            raise PortalChanged(f"sign-in: {who}: the portal shows a page that is neither a "
                                "known sign-in step nor a signed-in page — portal changed?",
                                where="sign-in", expected=SIGNIN_PAGES)
    raise RetryableError(f"sign-in: {who}: still not signed in after {MAX_STEPS} pages")


async def _continue_page(page: Page) -> bool:
    return await _marker(page) is None and bool(await page.evaluate(_CONTINUE_JS))


async def signed_in_page(page: Page) -> bool:
    """Does the page read as signed in: none of the sign-in marks, no password asked for,
    and not the sign-in address?"""
    if await _marker(page) is not None or await page.evaluate(_ASKS_PASSWORD_JS):
        return False
    path = urlsplit(page.url).path.rstrip("/")
    return not (path.endswith("/signin") or "/signin/" in path)


async def session_lost(page: Page) -> str | None:
    """Why the page shows that the signed-in session is gone ("expired", "ended",
    "signed_out"), or None if it does not."""
    marker = await _marker(page)
    if marker == "signed-out":
        return await page.locator("#signed-out").get_attribute("data-reason") or "signed_out"
    return "signed_out" if marker == "signin-form" else None


async def check_session(page: Page) -> None:
    """Raise :class:`SessionLost` if the portal ended the session (see :func:`session_lost`)."""
    if (reason := await session_lost(page)) is not None:
        raise SessionLost(reason)
