"""Portal accounts (issue 16): who signs in where, one session per account at a time.

An account is configuration: (portal, name, user name) in ``portal_accounts``; its secrets
come from the secrets provider (jobs/secrets/account_secrets.py), never from the database. A job
whose flow signs in takes an account of its portal for the length of the job
(:func:`take`: the least recently used free one, so jobs spread across accounts; held by
one job at a time on every node) and gives it back when done (:func:`release`).

The first "wrong password" or "account locked" answer pauses the account (:func:`pause`,
by "portal"): no other job tries it -- they are deferred without spending attempts -- until
an operator fixes the secret and runs ``portalq accounts resume``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from portalq.jobs import audit, clock, limits
from portalq.jobs.db import sql
from portalq.jobs.errors import IllegalTransition, InputError
from portalq.jobs.secrets import crypto

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Account:
    portal: str
    name: str
    username: str
    password_expires_on: date | None = None


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise InputError(f"account name {name!r}: lower-case letters, digits, '-' and '_' "
                         "(at most 63, starting with a letter or digit)")
    return name


def add(conn: Any, actor: audit.Actor, portal: str, name: str, username: str,
        reason: str = "account added") -> Account:
    _check_name(name)
    # one line, no control characters: it is printed to terminals (accounts list, audit)
    username = limits.check_identifier(username, "a user name", 200)
    row = sql.fetch_one(conn, "account_add", {"portal": portal, "name": name,
                                              "username": username, "now": clock.now()})
    if row is None:
        known = [r["name"] for r in sql.fetch(conn, "account_list", {"portal": portal})]
        if name in known:
            raise InputError(f"account {portal}/{name} exists already")
        raise InputError(f"unknown portal {portal!r}")
    audit.record(conn, actor, "account.add", f"account:{portal}/{name}", reason,
                 after={"username": row["username"]})
    return Account(row["portal"], row["name"], row["username"])


def listing(conn: Any, portal: str | None = None) -> list[dict[str, Any]]:
    return sql.fetch(conn, "account_list", {"portal": portal})


def pause(conn: Any, actor: audit.Actor, portal: str, name: str, reason: str,
          by: str = "operator") -> None:
    if sql.fetch_one(conn, "account_pause", {"portal": portal, "name": name, "now": clock.now(),
                                             "reason": reason, "by": by}) is None:
        raise IllegalTransition(f"account {portal}/{name} is unknown or paused already")
    audit.record(conn, actor, "account.pause", f"account:{portal}/{name}", reason)


def waiting_for_an_account(portal: str) -> str:
    """The error a job deferred for want of an unpaused account carries (a resume wakes
    the jobs that carry it)."""
    return f"every account of {portal} is paused"


def resume(conn: Any, actor: audit.Actor, portal: str, name: str, reason: str) -> None:
    if sql.fetch_one(conn, "account_resume", {
            "portal": portal, "name": name, "now": clock.now(),
            "waiting": waiting_for_an_account(portal)}) is None:
        raise IllegalTransition(f"account {portal}/{name} is unknown or not paused")
    audit.record(conn, actor, "account.resume", f"account:{portal}/{name}", reason)


# -- the service's side (async connections) ------------------------------------------------
async def take(conn: Any, portal: str, holder: str, until: datetime,
               name: str | None = None) -> Account | None:
    row = await sql.afetch_one(conn, "account_take", {"portal": portal, "holder": holder,
                                                      "until": until, "now": clock.now(),
                                                      "name": name})
    if row is None:
        return None
    return Account(row["portal"], row["name"], row["username"], row["password_expires_on"])


async def release(conn: Any, account: Account, holder: str) -> None:
    await sql.afetch(conn, "account_release", {"portal": account.portal,
                                               "name": account.name, "holder": holder})


async def counts(conn: Any, portal: str) -> tuple[int, int]:
    """(usable, total) accounts of ``portal``."""
    row = await sql.afetch_one(conn, "account_counts", {"portal": portal})
    return (int(row["usable"]), int(row["total"])) if row else (0, 0)


async def paused_by_portal(conn: Any, account: Account, reason: str) -> bool:
    """The portal refused the account: paused so that nobody tries it again. True if this
    call paused it (the first job to hear it), False if it was paused already."""
    row = await sql.afetch_one(conn, "account_pause", {
        "portal": account.portal, "name": account.name, "now": clock.now(),
        "reason": reason, "by": "portal"})
    if row is not None:
        await sql.afetch(conn, "audit_add", {
            "now": clock.now(), "actor": "portalq", "role": None, "source": "service",
            "action": "account.pause", "target": f"account:{account.portal}/{account.name}",
            "reason": reason[:2000], "before": None, "after": None})
    return row is not None


async def note_password_expiry(conn: Any, account: Account, days: int) -> None:
    """The portal said the password expires in ``days``: recorded, admins told."""
    on = clock.now().date() + timedelta(days=days)
    reason = (f"the password of account {account.name} ({account.username}) expires on "
              f"{on.isoformat()}: change it on the portal, then in the secrets provider")
    await sql.afetch(conn, "account_password_expiry", {
        "portal": account.portal, "name": account.name, "on": on, "reason": reason,
        "now": clock.now()})


async def session(conn: Any, account: Account, holder: str) -> dict[str, Any] | None:
    """The account's kept browser session (opened from its seal), if any."""
    row = await sql.afetch_one(conn, "account_session_get", {
        "portal": account.portal, "name": account.name, "holder": holder})
    if row is None or row["session_state"] is None:
        return None
    data = crypto.open_blob(row["session_key_id"], bytes(row["session_state"]))
    state: dict[str, Any] = json.loads(data)
    return state


async def keep_session(conn: Any, account: Account, holder: str,
                       state: dict[str, Any] | None) -> None:
    """Keep (sealed) or drop (None) the account's signed-in browser session."""
    key_id, blob = (crypto.seal_blob(json.dumps(state).encode()) if state is not None
                    else (None, None))
    await sql.afetch(conn, "account_session_set", {
        "portal": account.portal, "name": account.name, "holder": holder, "state": blob,
        "key_id": key_id})
