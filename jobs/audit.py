"""The audit log: who did what, when, why, with the state before and after.

Every console action writes its row in the transaction of the change itself (an action
that rolls back leaves no row; a row always means it happened). ``before``/``after`` are
passed through :mod:`jobs.secrets.redaction` by the caller, so no secret value is ever stored here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from portalq.jobs import clock, limits
from portalq.jobs.db import sql
from portalq.jobs.errors import InputError


@dataclass(frozen=True)
class Actor:
    name: str
    role: str | None = None
    source: str = "console"


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime)
                      else str(v), sort_keys=True)


def record(conn: Any, actor: Actor, action: str, target: str, reason: str, *,
           before: Any = None, after: Any = None) -> int:
    """Write one audit row in ``conn``'s transaction; a reason is required."""
    if not reason or not reason.strip():
        raise InputError("a reason is required")
    # no control characters (an escape sequence would be replayed by `portalq audit`)
    limits.check_text(reason, "the reason")
    row = sql.fetch_one(conn, "audit_add", {
        "now": clock.now(), "actor": actor.name, "role": actor.role, "source": actor.source,
        "action": action, "target": target, "reason": reason.strip()[:2000],
        "before": _json(before), "after": _json(after)})
    assert row is not None
    return int(row["id"])


def entries(conn: Any, *, before_id: int | None = None, target: str | None = None,
            actor: str | None = None, action: str | None = None, limit: int = 100,
            ) -> list[dict[str, Any]]:
    """Newest first; ``before_id`` continues below an earlier page's last id."""
    return sql.fetch(conn, "audit_list", {
        "before_id": before_id if before_id is not None else 2**63 - 1, "target": target,
        "actor": actor, "action": action, "limit": max(1, min(limit, 1000))})
