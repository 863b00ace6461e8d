"""Console users who sign in through the company's OpenID Connect provider.

The console (``scheduler/console/oidc.py``) checks the provider's ID token and maps its
claims to a role; this module records the result: an identity (issuer, ``sub``) is linked
to one console user, made at its first sign-in (without a password), whose role is set
from the claims at every sign-in. A disabled user stays refused whatever the provider
says; a refusal is written to the audit log (and counts towards the sign-in throttle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portalq.jobs import audit, clock
from portalq.jobs.admin import users
from portalq.jobs.admin.users import Throttle, User
from portalq.jobs.db import sql
from portalq.jobs.errors import InputError

SOURCE = "sso"


@dataclass(frozen=True)
class Identity:
    issuer: str
    subject: str
    name: str  # the console user's name (from the e-mail or user-name claim)
    role: str | None  # None: no claim value maps to a console role


@dataclass(frozen=True)
class Outcome:
    user: User | None
    refusal: str = ""  # one line for the sign-in page when user is None


def sign_in(conn: Any, identity: Identity, ip: str, limits: Throttle,
            refusal: str = "") -> Outcome:
    """The console user for ``identity`` (made or updated), or the refusal, audited;
    in the caller's transaction. ``refusal``: the console's own reason to refuse (an
    e-mail domain not allowed)."""
    if refusal:
        return _refuse(conn, identity.name[:64], identity, ip, limits, refusal)
    row = sql.fetch_one(conn, "console_sso_identity",
                        {"issuer": identity.issuer, "subject": identity.subject})
    name = row["name"] if row else identity.name
    if row is not None and row["disabled_at"] is not None:
        return _refuse(conn, name, identity, ip, limits, f"user {name} is disabled")
    if identity.role is None:
        return _refuse(conn, name, identity, ip, limits,
                       "your sign-on gives no console role (ask an admin for a group)")
    now = clock.now()
    params = {"issuer": identity.issuer, "subject": identity.subject, "role": identity.role,
              "now": now}
    actor = audit.Actor(name, identity.role, SOURCE)
    if row is not None:
        updated = sql.fetch_one(conn, "console_sso_signed_in", params)
        assert updated is not None
        if row["role"] != identity.role:
            audit.record(conn, actor, "user.role", f"user:{name}", "role from the sign-on's "
                         "claims", before={"role": row["role"]}, after={"role": identity.role})
        return Outcome(User(updated["id"], updated["name"], updated["role"]))
    try:
        users.check_name(identity.name)
    except InputError:
        return _refuse(conn, identity.name[:64], identity, ip, limits,
                       "your sign-on gives no usable user name (letters, digits, . _ @ -)")
    added = sql.fetch_one(conn, "console_sso_user_add", {**params, "name": identity.name})
    if added is None:
        return _refuse(conn, name, identity, ip, limits, f"a console user named {name} "
                       "exists and does not sign in through this provider")
    audit.record(conn, actor, "user.add", f"user:{name}", "first sign-on",
                 after={"role": identity.role, "issuer": identity.issuer})
    return Outcome(User(added["id"], added["name"], added["role"]))


def _refuse(conn: Any, name: str, identity: Identity, ip: str, limits: Throttle,
            reason: str) -> Outcome:
    audit.record(conn, audit.Actor(name, None, SOURCE), "user.sign_in_refused",
                 f"user:{name}", reason, after={"issuer": identity.issuer,
                                                "mapped_role": identity.role})
    users.login_failed(conn, name, ip, limits)
    return Outcome(None, reason)
