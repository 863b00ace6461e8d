"""Accounts of one stand-in portal and what its sign-in remembers: off by default.

Switched on and configured through the control API, like the faults::

    POST /_control/<portal>  {"signin": {"enabled": true,
                                         "accounts": {"acme": {"password": "...",
                                                               "totp_seed": "BASE32...",
                                                               "email": "ops@example.test",
                                                               "mfa": "totp" | "email"}},
                                         "lockout_after": 3, ...}}
    GET  /_ledger/<portal>/signins   attempts (one entry per submitted password or code),
                                     per-account counts, the CAPTCHA challenges on screen

Settings (:class:`SigninConfig`): ``lockout_after`` bad passwords lock the account;
``password_expires_in`` days shows the expiry interstitial; ``force_password_change``
stops at a "choose a new password" page; ``session_pages`` ends a signed-in session after
that many pages, ``idle_minutes`` after that long unused (jobs clock); ``single_session``:
a second sign-in ends the first session; ``captcha``: a CAPTCHA before the password;
``smtp`` (``smtp://host:port``): where e-mailed codes are sent. An account named with
``null`` is removed; naming an account again resets its counters and lock.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from typing import Any

from portalq.jobs import clock

CODE_LIFETIME = timedelta(minutes=5)


@dataclass
class Account:
    user: str
    password: str
    totp_seed: str | None = None
    email: str | None = None
    mfa: str | None = None  # None | "totp" | "email"
    failures: int = 0
    locked: bool = False

    def __repr__(self) -> str:  # never the password or the seed
        return f"Account({self.user!r}, mfa={self.mfa!r}, locked={self.locked})"


@dataclass
class SigninConfig:
    enabled: bool = False
    lockout_after: int = 3
    password_expires_in: int | None = None
    force_password_change: bool = False
    session_pages: int | None = None
    idle_minutes: int | None = None
    single_session: bool = False
    captcha: bool = False
    smtp: str | None = None


_SETTINGS = {f.name for f in fields(SigninConfig)}
_ACCOUNT_KEYS = {"password", "totp_seed", "email", "mfa"}


class Accounts:
    """Accounts, sign-in sessions (signed in, or half-way) and the attempts ledger."""

    def __init__(self, smtp: str | None = None) -> None:
        #: where e-mailed codes go unless ``signin.smtp`` says otherwise (kept by a reset)
        self.default_smtp = smtp
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.config = SigninConfig(smtp=self.default_smtp)
        self.accounts: dict[str, Account] = {}
        self.attempts: list[dict[str, Any]] = []
        self.sessions: dict[str, dict[str, Any]] = {}  # signed in: sid -> user, pages, ...
        self.pending: dict[str, dict[str, Any]] = {}  # half-way through signing in

    def configure(self, data: dict[str, Any]) -> None:
        """Apply a ``signin`` control body; raises ValueError (nothing applied) if bad."""
        if not isinstance(data, dict):
            raise ValueError("signin: expected an object")
        unknown = set(data) - _SETTINGS - {"accounts"}
        if unknown:
            raise ValueError(f"signin: unknown setting {sorted(unknown)[0]!r}")
        accounts = data.get("accounts") or {}
        made: dict[str, Account | None] = {}
        for user, spec in accounts.items():
            if spec is None:
                made[user] = None
                continue
            if not isinstance(spec, dict) or not isinstance(spec.get("password"), str):
                raise ValueError(f"signin: account {user!r} needs a password")
            if set(spec) - _ACCOUNT_KEYS:
                raise ValueError(f"signin: account {user!r}: unknown key "
                                 f"{sorted(set(spec) - _ACCOUNT_KEYS)[0]!r}")
            mfa = spec.get("mfa") or ("totp" if spec.get("totp_seed") else None)
            if mfa not in (None, "totp", "email") or (mfa == "totp"
                                                      and not spec.get("totp_seed")):
                raise ValueError(f"signin: account {user!r}: bad mfa {mfa!r}")
            if mfa == "email" and not spec.get("email"):
                raise ValueError(f"signin: account {user!r}: e-mailed codes need an email")
            made[user] = Account(user, spec["password"], spec.get("totp_seed"),
                                 spec.get("email"), mfa)
        with self.lock:
            for key in _SETTINGS & set(data):
                setattr(self.config, key, data[key])
            for user, account in made.items():
                if account is None:
                    self.accounts.pop(user, None)
                else:
                    self.accounts[user] = account

    # ---- the ledger -------------------------------------------------------------------
    def record(self, user: str, step: str, outcome: str) -> None:
        with self.lock:
            self.attempts.append({"seq": len(self.attempts) + 1, "at": clock.now().isoformat(),
                                  "account": user, "step": step, "outcome": outcome})

    def ledger(self) -> dict[str, Any]:
        with self.lock:
            counts = {
                user: {"attempts": sum(1 for a in self.attempts
                                       if a["account"] == user and a["step"] == "password"),
                       "failures": a.failures, "locked": a.locked,
                       "live_sessions": sum(1 for s in self.sessions.values()
                                            if s["user"] == user and not s["ended"])}
                for user, a in self.accounts.items()}
            captchas = [p["captcha"] for p in self.pending.values() if p.get("captcha")]
            return {"attempts": list(self.attempts), "accounts": counts, "captcha": captchas}

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {**asdict(self.config), "accounts": sorted(self.accounts)}

    # ---- passwords ----------------------------------------------------------------------
    def check_password(self, user: str, password: str) -> str:
        """"ok", "wrong" (a failure counted), "locked" (now or already), or "unknown"."""
        with self.lock:
            account = self.accounts.get(user)
            if account is None:
                outcome = "unknown"
            elif account.locked:
                outcome = "locked"
            elif secrets.compare_digest(account.password.encode(), password.encode()):
                account.failures = 0
                outcome = "ok"
            else:
                account.failures += 1
                account.locked = account.failures >= self.config.lockout_after
                outcome = "locked" if account.locked else "wrong"
        self.record(user, "password", {"ok": "accepted", "wrong": "wrong_password",
                                       "locked": "locked", "unknown": "unknown_account"}[outcome])
        return outcome

    # ---- signed-in sessions ---------------------------------------------------------------
    def open_session(self, user: str) -> str:
        sid = secrets.token_urlsafe(18)
        with self.lock:
            if self.config.single_session:
                for session in self.sessions.values():
                    if session["user"] == user:
                        session["ended"] = True
            self.sessions[sid] = {"user": user, "pages": 0, "last": clock.now(),
                                  "ended": False}
        return sid

    def touch(self, sid: str) -> str:
        """One page on session ``sid``: "ok", "ended" (signed in elsewhere), "expired" or
        "none" (no such session)."""
        now = clock.now()
        with self.lock:
            session = self.sessions.get(sid)
            if session is None:
                return "none"
            if session["ended"]:
                del self.sessions[sid]
                return "ended"
            idle = self.config.idle_minutes
            session["pages"] += 1
            pages = self.config.session_pages
            if (idle is not None and now - session["last"] > timedelta(minutes=idle)) or (
                    pages is not None and session["pages"] > pages):
                del self.sessions[sid]
                return "expired"
            session["last"] = now
            return "ok"

    def close_session(self, sid: str) -> None:
        with self.lock:
            self.sessions.pop(sid, None)
