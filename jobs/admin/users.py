"""Console users, their Argon2id password hashes, sessions and sign-in throttling.

Passwords are hashed with argon2-cffi's defaults (Argon2id; the parameters travel in the
hash, so raising them later rehashes at the next sign-in). Sessions live in the database
(a cookie carries a random token; the table only its SHA-256), so signing out, disabling a
user and the idle timeout hold on every console process.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.errors import IllegalTransition, InputError
from portalq.jobs.kinds import CONSOLE_ROLES

RANK = {role: n for n, role in enumerate(CONSOLE_ROLES)}
MIN_PASSWORD = 12


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    session_id: int | None = None

    def can(self, role: str) -> bool:
        """True if this user's role is ``role`` or above (viewer < operator < admin)."""
        return RANK[self.role] >= RANK[role]


@cache
def hasher() -> PasswordHasher:
    return PasswordHasher()


@cache
def _dummy_hash() -> str:
    # verified against for unknown names, so "no such user" takes as long as "wrong password"
    return hasher().hash(secrets.token_urlsafe(16))


def check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 64 or not all(ch.isalnum() or ch in "._@-" for ch in name):
        raise InputError("a user name is 1-64 letters, digits or . _ @ -")
    return name


def _check_role(role: str) -> str:
    if role not in RANK:
        raise InputError(f"unknown role {role!r} (one of {', '.join(CONSOLE_ROLES)})")
    return role


def _check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise InputError(f"a password needs at least {MIN_PASSWORD} characters")
    return password


def add_user(conn: Any, name: str, role: str, password: str) -> dict[str, Any]:
    name, role = check_name(name), _check_role(role)
    digest = hasher().hash(_check_password(password))
    row = sql.fetch_one(conn, "console_user_add", {"name": name, "role": role,
                                                   "password_hash": digest, "now": clock.now()})
    if row is None:
        raise IllegalTransition(f"user {name!r} exists (change the password with passwd)")
    return row


def set_password(conn: Any, name: str, password: str) -> None:
    row = sql.fetch_one(conn, "console_user_by_name", {"name": name})
    if row is not None and row["password_hash"] is None:
        raise IllegalTransition(f"user {name!r} signs in through single sign-on (no password)")
    digest = hasher().hash(_check_password(password))
    if not sql.fetch(conn, "console_user_set_password",
                     {"name": name, "password_hash": digest, "now": clock.now()}):
        raise InputError(f"no user {name!r}")


def disable(conn: Any, name: str) -> None:
    if not sql.fetch(conn, "console_user_disable", {"name": name, "now": clock.now()}):
        if sql.fetch_one(conn, "console_user_by_name", {"name": name}) is None:
            raise InputError(f"no user {name!r}")
        raise IllegalTransition(f"user {name!r} is already disabled")


def users(conn: Any) -> list[dict[str, Any]]:
    return sql.fetch(conn, "console_users")


def authenticate(conn: Any, name: str, password: str) -> User | None:
    """The user if ``password`` is theirs and they are enabled (rehashed if needed)."""
    row = sql.fetch_one(conn, "console_user_by_name", {"name": name.strip()})
    # no such user, or one who signs in only through single sign-on: the same work, refused
    digest = row["password_hash"] if row and row["password_hash"] else _dummy_hash()
    try:
        hasher().verify(digest, password)
    except (VerificationError, InvalidHashError):
        return None
    if row is None or row["disabled_at"] is not None or not row["password_hash"]:
        return None
    if hasher().check_needs_rehash(digest):
        sql.fetch(conn, "console_user_rehash", {"id": row["id"],
                                                "password_hash": hasher().hash(password)})
    return User(row["id"], row["name"], row["role"])


# -- sign-in throttling ----------------------------------------------------------------------
@dataclass(frozen=True)
class Throttle:
    per_name: int = 5
    per_ip: int = 20
    window: timedelta = timedelta(minutes=15)


def throttled(conn: Any, name: str | None, ip: str, limits: Throttle) -> bool:
    """True if too many sign-ins failed lately for this name or from this address
    (``name`` None: the address alone)."""
    row = sql.fetch_one(conn, "console_login_failures", {
        "name": name.strip() if name is not None else None, "ip": ip,
        "since": clock.now() - limits.window})
    assert row is not None
    return bool(row["by_name"] >= limits.per_name or row["by_ip"] >= limits.per_ip)


def login_failed(conn: Any, name: str, ip: str, limits: Throttle) -> None:
    now = clock.now()
    sql.fetch(conn, "console_login_failed", {"now": now, "name": name.strip()[:64], "ip": ip})
    sql.fetch(conn, "console_login_failures_prune", {"before": now - 4 * limits.window})


# -- sessions --------------------------------------------------------------------------------
def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(conn: Any, user: User) -> str:
    """A new session for ``user``; returns its token (for the cookie, never stored)."""
    token = secrets.token_urlsafe(32)
    sql.fetch(conn, "console_session_start", {"token_hash": _digest(token), "user_id": user.id,
                                              "now": clock.now()})
    return token


def session_user(conn: Any, token: str, idle: timedelta) -> User | None:
    """The user of a live session (not ended, not idle longer than ``idle``), whose last
    activity moves to now."""
    now = clock.now()
    row = sql.fetch_one(conn, "console_session_touch", {
        "token_hash": _digest(token), "now": now, "idle_before": now - idle,
        "touch_before": now - min(idle / 10, timedelta(seconds=5))})
    if row is None:
        return None
    return User(row["user_id"], row["name"], row["role"], row["session_id"])


def session_live(conn: Any, token: str, idle: timedelta) -> bool:
    """Like :func:`session_user` but without counting as activity (a live stream)."""
    return bool(sql.fetch(conn, "console_session_live", {
        "token_hash": _digest(token), "idle_before": clock.now() - idle}))


def end_session(conn: Any, token: str) -> None:
    sql.fetch(conn, "console_session_end", {"token_hash": _digest(token), "now": clock.now()})
