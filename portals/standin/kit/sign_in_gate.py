"""The sign-in a stand-in portal puts in front of its pages when ``signin.enabled`` is on
(see :mod:`.accounts` for the switches). Off, every request passes straight through.

    GET|POST /signin            (CAPTCHA first if switched on) user name + password
    GET|POST /signin/captcha    "type the characters in the picture"
    GET|POST /signin/mfa        6-digit code: authenticator app (TOTP) or e-mailed
    GET|POST /signin/expiry     "your password expires in N days" (Continue)
    GET|POST /signin/change     forced password change
    GET      /signout

Any other page needs a signed-in session; without one the visitor is sent to
``/signin?next=...``; a session that timed out or was ended by a second sign-in answers
with the signed-out page. Pages carry stable markers a flow recognises: ``#signin-form``
(``#signin-username``, ``#signin-password``), ``#signin-error``, ``#account-locked``,
``#captcha`` (``#captcha-answer``), ``#mfa-form`` (``data-method``, ``#mfa-code``),
``#mfa-error``, ``#password-expiry`` (``data-days``), ``#password-change``,
``#signed-out`` (``data-reason`` "expired" | "ended").
"""

from __future__ import annotations

import asyncio
import secrets
import smtplib
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any
from urllib.parse import quote, urlsplit

import pyotp
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from portalq.jobs import clock
from portalq.portals.standin.kit.html import esc, root
from portalq.portals.standin.kit.portal_accounts import CODE_LIFETIME, Accounts

#: how a portal draws a sign-in page: (title, body, status) -> response
Look = Callable[[str, str, int], Response]
AUTH_COOKIE, PENDING_COOKIE = "standin_auth", "standin_signin"


def _form(action: str, inner: str, button: str, ident: str, extra: str = "") -> str:
    return (f'<form id="{ident}" method="post" action="{action}"{extra}>{inner}'
            f'<button type="submit">{esc(button)}</button></form>')


def _input(label: str, name: str, ident: str, kind: str = "text", extra: str = "") -> str:
    return (f'<p><label for="{ident}">{esc(label)}</label> <input id="{ident}" name="{name}" '
            f'type="{kind}" {extra}></p>')


def _captcha_svg(text: str) -> str:
    glyphs = "".join(f'<text x="{12 + i * 22}" y="{30 + (i % 2) * 6}" '
                     f'transform="rotate({(-1) ** i * 8} {12 + i * 22} 30)">{esc(ch)}</text>'
                     for i, ch in enumerate(text))
    return (f'<svg id="captcha-image" role="img" aria-label="CAPTCHA" width="150" height="48" '
            f'style="background:#eee;font:bold 22px monospace">{glyphs}</svg>')


def _send_code(smtp_url: str, to: str, code: str) -> None:
    parts = urlsplit(smtp_url)
    message = EmailMessage()
    message["From"], message["To"] = "no-reply@standin.portal", to
    message["Subject"] = "Your verification code"
    message.set_content(f"Your verification code is {code}. It expires in 5 minutes.\n"
                        "If you did not try to sign in, change your password.")
    with smtplib.SMTP(parts.hostname or "127.0.0.1", parts.port or 25, timeout=10) as smtp:
        smtp.send_message(message)


class SigninGate:
    """ASGI wrapper of one portal's app: its sign-in pages and the signed-in check."""

    def __init__(self, app: ASGIApp, accounts: Accounts, look: Look,
                 public: tuple[str, ...] = ()) -> None:
        self.app, self.accounts, self.look = app, accounts, look
        #: the portal's public pages (no sign-in: e.g. the CRTC's registration list)
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.accounts.config.enabled:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        path = request.url.path[len(root(request)):] or "/"
        if path in self.public:
            await self.app(scope, receive, send)
            return
        if path == "/signin" or path.startswith("/signin/") or path == "/signout":
            response = await self.signin(request, path)
        else:
            state = self.accounts.touch(request.cookies.get(AUTH_COOKIE, ""))
            if state == "ok":
                await self.app(scope, receive, send)
                return
            if state == "none":
                target = quote(f"{request.url.path}?{request.url.query}".rstrip("?"))
                response = RedirectResponse(f"{root(request)}/signin?next={target}", 303)
            else:
                response = self.signed_out(request, state)
        await response(scope, receive, send)

    # ---- pages ---------------------------------------------------------------------------
    def page(self, title: str, body: str, status: int = 200) -> Response:
        return self.look(title, body, status)

    def signed_out(self, request: Request, reason: str) -> Response:
        text = ("You were signed out because your account signed in somewhere else."
                if reason == "ended" else "Your session has expired. Please sign in again.")
        return self.page("Signed out", f'<p id="signed-out" data-reason="{reason}">{text}</p>'
                         f'<p><a href="{root(request)}/signin">Sign in again</a></p>')

    def signin_form(self, request: Request, pending: dict[str, Any], error: str = "",
                    status: int = 200) -> Response:
        inner = (_input("User name", "username", "signin-username", extra="autocomplete=username")
                 + _input("Password", "password", "signin-password", "password",
                          "autocomplete=current-password"))
        return self.page("Sign in", error + _form(f"{root(request)}/signin", inner, "Sign in",
                                                  "signin-form"), status)

    # ---- the sign-in steps ------------------------------------------------------------------
    async def signin(self, request: Request, path: str) -> Response:
        r = root(request)
        if path == "/signout":
            self.accounts.close_session(request.cookies.get(AUTH_COOKIE, ""))
            response: Response = RedirectResponse(f"{r}/signin", 303)
            response.delete_cookie(AUTH_COOKIE, path=r or "/")
            return response
        sid = request.cookies.get(PENDING_COOKIE, "")
        with self.accounts.lock:
            pending = self.accounts.pending.get(sid)
        if pending is None:
            nxt = request.query_params.get("next", "")
            sid, pending = secrets.token_urlsafe(18), {
                "stage": "captcha" if self.accounts.config.captcha else "password",
                "next": nxt if nxt.startswith(f"{r}/") else f"{r}/"}
            with self.accounts.lock:
                self.accounts.pending[sid] = pending
        step = path.removeprefix("/signin").strip("/") or "password"
        if step != pending["stage"]:  # every step in its order, none skipped
            response = RedirectResponse(self.stage_url(r, pending["stage"]), 303)
        elif request.method == "POST":
            data = {k: str(v) for k, v in (await request.form()).items()}
            response = await getattr(self, f"post_{step}")(request, sid, pending, data)
        else:
            response = await self.show(request, pending)
        response.set_cookie(PENDING_COOKIE, sid, path=r or "/", httponly=True, samesite="lax")
        return response

    @staticmethod
    def stage_url(r: str, stage: str) -> str:
        return f"{r}/signin" if stage == "password" else f"{r}/signin/{stage}"

    async def show(self, request: Request, p: dict[str, Any], error: str = "") -> Response:
        r, stage = root(request), p["stage"]
        if stage == "password":
            return self.signin_form(request, p, error)
        if stage == "captcha":
            with self.accounts.lock:
                p["captcha"] = "".join(secrets.choice("ABCDEFGHJKMNPRSTUVWXYZ23456789")
                                       for _ in range(6))
            inner = _input("Type the characters in the picture", "answer", "captcha-answer",
                           extra="autocomplete=off")
            return self.page("Security check", error + (
                f'<div id="captcha"><p>Please confirm that you are not a robot.</p>'
                f'{_captcha_svg(p["captcha"])}</div>')
                + _form(f"{r}/signin/captcha", inner, "Verify", "captcha-form"))
        if stage == "mfa":
            account = self.accounts.accounts[p["user"]]
            hint = ("Enter the 6-digit code from your authenticator app."
                    if account.mfa == "totp" else
                    "We sent a 6-digit code to the e-mail address of your account.")
            inner = _input("Verification code", "code", "mfa-code",
                           extra='inputmode=numeric autocomplete=one-time-code maxlength=6')
            return self.page("Verify your identity", error + f"<p>{hint}</p>" + _form(
                f"{r}/signin/mfa", inner, "Verify", "mfa-form",
                f' data-method="{account.mfa}"'))
        if stage == "expiry":
            days = self.accounts.config.password_expires_in
            return self.page("Password expiry", (
                f'<p id="password-expiry" data-days="{days}">Your password expires in {days} '
                "days. Change it before then to keep access to your account.</p>")
                + _form(f"{r}/signin/expiry", "", "Continue", "expiry-form"))
        inner = "".join(_input(label, name, f"change-{name}", "password") for label, name in (
            ("Current password", "current"), ("New password", "new"),
            ("Confirm new password", "confirm")))
        return self.page("Change your password", error + (
            '<p id="password-change">Your password has expired. You must choose a new '
            "password before you continue.</p>")
            + _form(f"{r}/signin/change", inner, "Change password", "change-form"))

    async def advance(self, request: Request, sid: str, p: dict[str, Any]) -> Response:
        """On to the next stage after ``p["stage"]``, or signed in after the last."""
        cfg, order = self.accounts.config, ["captcha", "password", "mfa", "expiry", "change"]
        account = self.accounts.accounts.get(p.get("user", ""))
        wanted = {"captcha": cfg.captcha, "password": True,
                  "mfa": bool(account and account.mfa),
                  "expiry": cfg.password_expires_in is not None,
                  "change": cfg.force_password_change}
        later = [s for s in order[order.index(p["stage"]) + 1:] if wanted[s]]
        r = root(request)
        if later:
            p["stage"] = later[0]
            if p["stage"] == "mfa" and account and account.mfa == "email":
                problem = await self.email_code(p, account.email or "")
                if problem:
                    return self.page("Verify your identity", problem, 503)
            return RedirectResponse(self.stage_url(r, p["stage"]), 303)
        with self.accounts.lock:
            self.accounts.pending.pop(sid, None)
        response = RedirectResponse(p["next"], 303)
        response.set_cookie(AUTH_COOKIE, self.accounts.open_session(p["user"]), path=r or "/",
                            httponly=True, samesite="lax")
        response.delete_cookie(PENDING_COOKIE, path=r or "/")
        return response

    async def email_code(self, p: dict[str, Any], to: str) -> str:
        smtp = self.accounts.config.smtp
        code = f"{secrets.randbelow(1_000_000):06d}"
        p.update(code=code, code_at=clock.now())
        if not smtp:
            return '<p id="mfa-error" role="alert">The code could not be sent.</p>'
        try:
            await asyncio.to_thread(_send_code, smtp, to, code)
        except OSError:
            return '<p id="mfa-error" role="alert">The code could not be sent.</p>'
        return ""

    async def post_captcha(self, request: Request, sid: str, p: dict[str, Any],
                           data: dict[str, str]) -> Response:
        answer, expected = data.get("answer", "").strip().upper(), p.pop("captcha", "")
        self.accounts.record("", "captcha", "passed" if answer == expected else "failed")
        if not expected or answer != expected:
            return await self.show(request, p, '<p id="captcha-error" role="alert">The '
                                   "characters did not match. Try again.</p>")
        return await self.advance(request, sid, p)

    async def post_password(self, request: Request, sid: str, p: dict[str, Any],
                            data: dict[str, str]) -> Response:
        user = data.get("username", "").strip()
        outcome = self.accounts.check_password(user, data.get("password", ""))
        if outcome == "locked":
            return self.page("Account locked", (
                '<p id="account-locked">Your account is locked after too many unsuccessful '
                "sign-in attempts. Contact your account administrator to unlock it.</p>"))
        if outcome != "ok":
            return self.signin_form(request, p, (
                '<p id="signin-error" role="alert">The user name or password you entered is '
                "incorrect.</p>"))
        p["user"] = user
        return await self.advance(request, sid, p)

    async def post_mfa(self, request: Request, sid: str, p: dict[str, Any],
                       data: dict[str, str]) -> Response:
        account, code = self.accounts.accounts[p["user"]], data.get("code", "").strip()
        if account.mfa == "totp":
            ok = pyotp.TOTP(account.totp_seed or "").verify(code, for_time=clock.now(),
                                                             valid_window=1)
        else:
            fresh = p.get("code_at") and clock.now() - p["code_at"] <= CODE_LIFETIME
            ok = bool(fresh) and secrets.compare_digest(code, p.get("code", ""))
        self.accounts.record(p["user"], "mfa", "accepted" if ok else "wrong_code")
        if not ok:
            return await self.show(request, p, '<p id="mfa-error" role="alert">The code is '
                                   "not valid or has expired.</p>")
        return await self.advance(request, sid, p)

    async def post_expiry(self, request: Request, sid: str, p: dict[str, Any],
                          data: dict[str, str]) -> Response:
        return await self.advance(request, sid, p)

    async def post_change(self, request: Request, sid: str, p: dict[str, Any],
                          data: dict[str, str]) -> Response:
        account = self.accounts.accounts[p["user"]]
        if data.get("current") != account.password or not data.get("new") or (
                data.get("new") != data.get("confirm")) or data.get("new") == account.password:
            return await self.show(request, p, '<p id="change-error" role="alert">Enter your '
                                   "current password and a new one, twice.</p>")
        with self.accounts.lock:
            account.password = data["new"]
            self.accounts.config.force_password_change = False
        return await self.advance(request, sid, p)
