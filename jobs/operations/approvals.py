"""Approval before the point of no return (issue 16; off by default, per job type or portal).

The flow fills everything, stops at the review page and calls ``ctx.approve(review)``: the
first time, a digest of what would be submitted is recorded (checkpoint ``approval``), the
review page's screenshot is kept, admins are told, and the job waits (deferred, attempt
refunded, the browser freed). ``portalq jobs approve ID`` runs it again at once: the flow fills
again and submits only if the review page's digest matches the approved one -- otherwise it
asks again. ``portalq jobs reject ID --note ...`` cancels it: nothing is filed.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from portalq.jobs import audit, clock, limits, queue, types
from portalq.jobs.db import sql
from portalq.jobs.errors import IllegalTransition, InputError

KEY = "approval"
#: a job waiting for approval is looked at again after this long even without a decision
WAIT = timedelta(days=7)


def check_setting(value: str) -> None:
    """``PORTALQ_APPROVAL``: each name a job type whose flow stops at a review page for
    approval (``JobType.stops_for_approval``) or the portal of one; any other name would
    let its jobs submit without asking, so it is refused (InputError, one line)."""
    honoured: set[str] = set()
    for name in types.names():
        jt = types.get(name)
        if jt.stops_for_approval:
            honoured |= {name, *jt.other_portals}
            if isinstance(jt.portal, str):
                honoured.add(jt.portal)
    wanted = [w.strip() for w in value.split(",") if w.strip()]
    bad = [w for w in wanted if w not in honoured]
    if bad:
        raise InputError(
            f"PORTALQ_APPROVAL: {', '.join(bad)} {'has' if len(bad) == 1 else 'have'} no "
            "flow that stops for approval before it submits (these do: "
            f"{', '.join(sorted(honoured)) or 'none'})")


def digest(review: str) -> str:
    """What would be submitted, as the review page shows it (whitespace-normalised)."""
    return hashlib.sha256(" ".join(review.split()).encode()).hexdigest()


def approved(checkpoint: dict[str, Any] | None, review_digest: str) -> bool:
    rec = (checkpoint or {}).get(KEY) or {}
    return rec.get("state") == "approved" and rec.get("digest") == review_digest


def pending(checkpoint: dict[str, Any] | None, review_digest: str) -> dict[str, Any]:
    """The checkpoint record of a new request (``changed``: an earlier approval was for
    other data)."""
    rec = (checkpoint or {}).get(KEY) or {}
    changed = (rec.get("state") == "approved" and rec.get("digest") != review_digest) or (
        # asked again before a decision (the run that asked was interrupted and ran again):
        # what was said of the earlier approval still holds
        rec.get("state") == "pending" and bool(rec.get("changed")))
    return {"state": "pending", "digest": review_digest, "asked_at": clock.now().isoformat(),
            "changed": changed}


def decide(conn: Any, actor: audit.Actor, job_id: int, state: str, note: str) -> None:
    """``state``: "approved" (runs again at once) or "rejected" (cancelled, nothing filed)."""
    limits.check_text(note, "the note")   # printed raw by `portalq audit` otherwise
    with conn.transaction():
        row = sql.fetch_one(conn, "approval_decide", {"id": int(job_id), "state": state,
                                                      "actor": actor.name,
                                                      "now": clock.now()})
        if row is None:
            raise IllegalTransition(f"job {job_id} is not waiting for approval")
        if state == "rejected":
            queue.cancel(job_id, actor=actor.name, conn=conn)
        audit.record(conn, actor, f"job.{'approve' if state == 'approved' else 'reject'}",
                     f"job:{job_id}", note)
