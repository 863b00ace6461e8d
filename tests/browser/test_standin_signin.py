"""Stand-in logins driven through the shared sign-in step (portals/flows/signin.py) in real
Chromium; no scheduler. The stand-in's sign-in ledger is the judge of how often a password
was typed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyotp
import pytest
from bckit import CRTC, CRTC_PAYLOAD, build
from flowkit import artifact_blobs

from portalq.jobs import clock
from portalq.jobs.errors import AccountLocked, AccountRejected, PasswordChangeRequired
from portalq.portals.flows.browser import close_context
from portalq.portals.flows.signin import (
    Credentials,
    SessionLost,
    check_session,
    session_lost,
    sign_in,
)
from tests.mailbox import Mailbox

pytestmark = pytest.mark.browser

IRS = "irs_ein"
ACCOUNT, PASSWORD = "acme-filings", "Correct-Horse-42!"
SEED = pyotp.random_base32()
EMAIL = "filings@acme.example.test"
GOOD = Credentials(ACCOUNT, PASSWORD)


@pytest.fixture(scope="module")
def box() -> Iterator[Mailbox]:
    mailbox = Mailbox().start()
    yield mailbox
    mailbox.stop()


def enable(portals: Any, portal: str = CRTC, **settings: Any) -> None:
    accounts = settings.pop("accounts", {ACCOUNT: {"password": PASSWORD}})
    portals.control(portal, signin={"enabled": True, "accounts": accounts, **settings})


def signins(portals: Any, portal: str = CRTC) -> dict[str, Any]:
    return portals._call(f"/_ledger/{portal}/signins")  # type: ignore[no-any-return]


def password_attempts(portals: Any, portal: str = CRTC) -> list[str]:
    return [a["outcome"] for a in signins(portals, portal)["attempts"]
            if a["account"] == ACCOUNT and a["step"] == "password"]


@pytest.fixture
def ctx(make_ctx: Callable[..., Any]) -> Any:
    return make_ctx("process_crtc", build(CRTC_PAYLOAD))


@pytest.fixture
def in_page(run: Callable[..., Any], ctx: Any) -> Callable[..., Any]:
    """``in_page(fn)``: run ``await fn(page)`` in a fresh browser context of ``ctx``."""

    def go(fn: Callable[[Any], Awaitable[Any]]) -> Any:
        async def body() -> Any:
            context = await ctx.new_browser_context()
            try:
                return await fn(await context.new_page())
            finally:
                await close_context(context)

        return run(body())

    return go


def test_off_by_default_the_portal_needs_no_sign_in(portals, in_page):
    portals.control(CRTC, signin={"accounts": {ACCOUNT: {"password": PASSWORD}}})

    async def home(page: Any) -> str:
        await page.goto(portals.url("crtc") + "/")
        return await page.title()

    assert in_page(home).startswith("My CRTC Account")
    assert signins(portals)["attempts"] == []


def test_wrong_password_is_one_attempt_and_account_rejected(portals, ctx, in_page):
    enable(portals)
    wrong = Credentials(ACCOUNT, "Wrong-Horse-41!")
    with pytest.raises(AccountRejected) as caught:
        in_page(lambda page: sign_in(ctx, page, wrong))
    assert caught.value.account == ACCOUNT
    assert "Wrong-Horse" not in str(caught.value)
    assert password_attempts(portals) == ["wrong_password"]
    assert signins(portals)["accounts"][ACCOUNT]["locked"] is False


def test_third_bad_password_locks_and_the_right_one_is_then_refused(portals, ctx, in_page):
    enable(portals)
    wrong = Credentials(ACCOUNT, "guess")
    outcomes = []
    for _ in range(3):
        with pytest.raises((AccountRejected, AccountLocked)) as caught:
            in_page(lambda page: sign_in(ctx, page, wrong))
        outcomes.append(type(caught.value))
    assert outcomes == [AccountRejected, AccountRejected, AccountLocked]
    with pytest.raises(AccountLocked):
        in_page(lambda page: sign_in(ctx, page, GOOD))
    assert password_attempts(portals) == ["wrong_password"] * 2 + ["locked"] * 2
    assert signins(portals)["accounts"][ACCOUNT] == {
        "attempts": 4, "failures": 3, "locked": True, "live_sessions": 0}


def test_totp_is_computed_on_the_jobs_clock_with_no_human(portals, ctx, in_page):
    clock.set_clock(clock.FrozenClock(datetime(2026, 3, 2, 18, 0, 7, tzinfo=UTC)))
    enable(portals, accounts={ACCOUNT: {"password": PASSWORD, "totp_seed": SEED}})

    async def flow(page: Any) -> tuple[Any, str]:
        signed = await sign_in(ctx, page, Credentials(ACCOUNT, PASSWORD, SEED))  # no ask
        return signed, await page.title()

    signed, title = in_page(flow)
    assert signed.asked == 0 and title.startswith("My CRTC Account")
    steps = [(a["step"], a["outcome"]) for a in signins(portals)["attempts"]]
    assert steps == [("password", "accepted"), ("mfa", "accepted")]


def test_wrong_totp_seed_is_account_rejected_once(portals, ctx, in_page):
    enable(portals, accounts={ACCOUNT: {"password": PASSWORD, "totp_seed": SEED}})
    with pytest.raises(AccountRejected, match="authenticator"):
        in_page(lambda page: sign_in(ctx, page,
                                     Credentials(ACCOUNT, PASSWORD, pyotp.random_base32())))
    steps = [(a["step"], a["outcome"]) for a in signins(portals)["attempts"]]
    assert steps == [("password", "accepted"), ("mfa", "wrong_code")]


def test_emailed_code_is_answered_through_ask_from_the_real_mailbox(portals, ctx, in_page, box):
    enable(portals, smtp=box.url,
           accounts={ACCOUNT: {"password": PASSWORD, "mfa": "email", "email": EMAIL}})
    before = len(box.messages)
    questions: list[str] = []

    async def ask(question: str) -> str:  # a person reading the mail and typing the code
        questions.append(question)
        mail = (await asyncio.to_thread(box.wait_for, before + 1, 10))[before]
        assert mail["To"] == EMAIL and mail["Subject"] == "Your verification code"
        return re.search(r"\b(\d{6})\b", mail.get_payload()).group(1)

    async def flow(page: Any) -> Any:
        signed = await sign_in(ctx, page, GOOD, ask=ask)
        await check_session(page)
        return signed

    assert in_page(flow).asked == 1
    assert len(questions) == 1 and "e-mailed" in questions[0] and PASSWORD not in questions[0]
    assert len(box.messages) == before + 1
    assert password_attempts(portals) == ["accepted"]


def test_expiry_interstitial_reports_the_days_left(portals, make_ctx, run, ein_payload):
    enable(portals, IRS, password_expires_in=5)
    ctx = make_ctx("obtain_ein", ein_payload())

    async def flow() -> tuple[Any, str]:
        context = await ctx.new_browser_context()
        try:
            page = await context.new_page()
            signed = await sign_in(ctx, page, GOOD)
            return signed, await page.locator("h1").inner_text()
        finally:
            await close_context(context)

    signed, heading = run(flow())
    assert signed.password_expires_in == 5 and heading == "Apply For Ein"
    assert password_attempts(portals, IRS) == ["accepted"]


def test_forced_password_change_is_a_business_error(portals, ctx, in_page):
    enable(portals, force_password_change=True)
    with pytest.raises(PasswordChangeRequired):
        in_page(lambda page: sign_in(ctx, page, GOOD))
    assert password_attempts(portals) == ["accepted"]


def test_captcha_is_answered_by_a_person_through_ask(portals, ctx, in_page):
    enable(portals, captcha=True)
    questions: list[str] = []

    async def ask(question: str) -> str:  # the person reads the picture
        questions.append(question)
        [challenge] = signins(portals)["captcha"]
        return challenge.lower()

    assert in_page(lambda page: sign_in(ctx, page, GOOD, ask=ask)).asked == 1
    shot = re.search(r"\((/.*\.png)\)", questions[0]).group(1)
    assert shot.startswith(str(ctx.artifacts_dir))
    assert password_attempts(portals) == ["accepted"]


def test_session_expiring_mid_flow_is_detected_and_signing_in_again_works(portals, ctx,
                                                                           in_page):
    enable(portals, session_pages=4)
    base = portals.url("crtc")

    async def flow(page: Any) -> list[Any]:
        # GCKey's page back to the service and its Continue: pages 1 and 2
        await sign_in(ctx, page, GOOD)  # lands on the home page: page 3
        await page.goto(f"{base}/register")  # page 4
        seen = [await session_lost(page)]
        await page.goto(f"{base}/submissions")  # page 5: past the session's life
        seen.append(await session_lost(page))
        with pytest.raises(SessionLost) as caught:
            await check_session(page)
        seen.append(caught.value.reason)
        await sign_in(ctx, page, GOOD, start="/signin?next=/crtc/submissions")
        seen.append(await page.title())
        return seen

    seen = in_page(flow)
    assert seen[:3] == [None, "expired", "expired"]
    assert seen[3].startswith("Find a submission")
    assert password_attempts(portals) == ["accepted", "accepted"]


def test_second_sign_in_ends_the_first_session(portals, ctx, run):
    enable(portals, single_session=True)
    base = portals.url("crtc")

    async def flow() -> list[Any]:
        first, second = await ctx.new_browser_context(), await ctx.new_browser_context()
        try:
            page1, page2 = await first.new_page(), await second.new_page()
            await sign_in(ctx, page1, GOOD)
            await page1.goto(f"{base}/register")
            seen = [await session_lost(page1)]
            await sign_in(ctx, page2, GOOD)
            await page1.goto(f"{base}/submissions")
            seen.append(await session_lost(page1))
            await page2.goto(f"{base}/submissions")
            seen.append(await session_lost(page2))
            return seen
        finally:
            await close_context(first)
            await close_context(second)

    assert run(flow()) == [None, "ended", None]
    assert signins(portals)["accounts"][ACCOUNT]["live_sessions"] == 1


def test_sign_in_is_never_traced(portals, make_ctx, run):
    enable(portals, accounts={ACCOUNT: {"password": PASSWORD, "totp_seed": SEED}})
    ctx = make_ctx("process_crtc", build(CRTC_PAYLOAD), trace_policy="on")

    async def flow() -> None:
        context = await ctx.new_browser_context()
        try:
            page = await context.new_page()
            await sign_in(ctx, page, Credentials(ACCOUNT, PASSWORD, SEED))
            await page.goto(portals.url("crtc") + "/register")  # traced again
        finally:
            await close_context(context)

    run(flow())
    blobs = dict(artifact_blobs(ctx.artifacts_dir))
    assert any(name.endswith("trace.zip") for name in blobs)
    everything = b"\n".join(blobs.values())
    assert b"Telecom Cover Page" in everything  # tracing resumed after the sign-in
    for never in (PASSWORD.encode(), SEED.encode(), b"/signin"):
        assert never not in everything, never


def test_gckey_two_pages_token_fields_then_the_page_back_to_the_service(
        portals, ctx, in_page):
    """GCKey (the CRTC's sign-in): user name ``#token1``, password ``#token2``, then a page
    with ``h1[property=name]`` whose submit input must be clicked to return to the service."""
    enable(portals)
    base = portals.url("crtc")

    async def flow(page: Any) -> list[Any]:
        await page.goto(f"{base}/register")
        fields = [await page.locator(s).count() for s in ("#token1", "#token2",
                                                           "#signin-username")]
        await page.locator("#token1").fill(ACCOUNT)
        await page.locator("#token2").fill(PASSWORD)
        await page.locator("button[type=submit]").click()
        await page.wait_for_load_state()
        back = await page.locator("h1[property=name]").count()
        await page.goto(f"{base}/submissions")      # the service waits for the click
        still = await page.locator("h1[property=name]").count()
        await page.context.clear_cookies()
        await sign_in(ctx, page, GOOD, start="/signin?next=/crtc/register")
        return [fields, back, still, await page.locator("h1").inner_text()]

    fields, back, still, heading = in_page(flow)
    assert fields == [1, 1, 0] and back == 1 and still == 1
    assert heading == "Telecom Cover Page"    # sign_in clicked the page back to the service
    assert password_attempts(portals) == ["accepted", "accepted"]


def test_ecorp2_sign_in_by_its_formcontrolname_inputs(portals, ctx, in_page):
    enable(portals, portal="delaware_icis")
    base = portals.url("delaware")

    async def flow(page: Any) -> list[Any]:
        await sign_in(ctx, page, GOOD, portal="delaware_icis",
                      start="/signin?next=/delaware/services/e-filing")
        return [await page.locator("h1").inner_text(), page.url]

    heading, url = in_page(flow)
    assert heading == "Document Filing and Certificate Request Service"
    assert url == f"{base}/services/e-filing"
    assert password_attempts(portals, "delaware_icis") == ["accepted"]
