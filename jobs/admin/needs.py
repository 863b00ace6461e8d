"""What needs a person, as the console's "Needs you" page lists it (issue 39): open
questions, approvals with their review screenshot, uncertain filings, jobs waiting on a
portal past the time it normally takes, and failed jobs grouped by cause.

Every item is read from its cause (an open question, a pending approval, a failed job, an
overdue wait), never from a flag someone must clear: when the cause goes (answered,
decided, retried, filed, decided by the portal) the item is gone at the next view. Text
shown to every role is scrubbed of anything shaped like an SSN (jobs.secrets.redaction).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from portalq.jobs import clock, submission
from portalq.jobs.checkpoints import past_point_of_no_return
from portalq.jobs.db import sql
from portalq.jobs.secrets import redaction as masking

#: at most this many items of each sort are read (the count in the navigation says more)
LIMIT = 200
#: failed jobs read to group (a group's bulk retry covers the ones read)
FAILED_LIMIT = 5000
_NUMBER = re.compile(r"\d+")

#: what to do about a group of failed jobs, by their escalation's kind: (the advice, and
#: whether a retry can help -- only then is the bulk retry offered)
ADVICE = {
    "attempts": ("Every attempt failed, the same way for each job in this group. Retry "
                 "them all: each goes back to the queue and runs again when the portal "
                 "is open (you see the jobs and give a reason before anything is done).",
                 True),
    "probe": ("It kept failing as the probe of a paused portal. Once the portal works "
              "again, retry them all: each goes back to the queue (previewed first).", True),
    "crashing": ("Its worker kept dying while running it. Look at one job's evidence "
                 "first; retry them all once the cause is fixed (previewed first).", True),
    "business": ("The portal refused it: a plain retry would be refused the same way. "
                 "Open a job to read what the portal said and decide for each; no bulk "
                 "action is offered.", False),
}
DEFAULT_ADVICE = ("It failed. Retry them all: each goes back to the queue (you see the jobs "
                  "and give a reason before anything is done).", True)


@dataclass
class FailedGroup:
    """Failed jobs with one cause: the same portal, job type, kind and error (digits
    aside, so "IRS answered 503 for order 17" and "... order 18" are one cause)."""

    portal: str
    job_type: str
    kind: str
    cause: str
    sample: str
    ids: list[int] = field(default_factory=list)
    first: datetime | None = None
    last: datetime | None = None

    @property
    def advice(self) -> str:
        return ADVICE.get(self.kind, DEFAULT_ADVICE)[0]

    @property
    def retry_helps(self) -> bool:
        return ADVICE.get(self.kind, DEFAULT_ADVICE)[1]


def cause_of(error: str | None) -> str:
    first = (error or "no error recorded").strip().splitlines()[0] if error else \
        "no error recorded"
    return _NUMBER.sub("#", first[:200])


def group_failed(rows: Sequence[Mapping[str, Any]]) -> tuple[list[FailedGroup],
                                                          list[dict[str, Any]]]:
    """(groups of failed jobs by cause, largest first; the uncertain filings -- a
    submission pressed and never confirmed -- apart, one by one)."""
    groups: dict[tuple[str, str, str, str], FailedGroup] = {}
    uncertain: list[dict[str, Any]] = []
    for r in rows:
        if past_point_of_no_return(r["checkpoint"]):
            doubt = submission.in_doubt(r["checkpoint"])
            uncertain.append({k: r[k] for k in ("id", "job_type", "order_id", "portal",
                                                "last_error", "finished_at", "kind")}
                             | {"submissions": [d.name for d in doubt]})
            continue
        key = (r["portal"], r["job_type"], r["kind"], cause_of(r["last_error"]))
        g = groups.get(key)
        if g is None:
            g = groups[key] = FailedGroup(*key, sample=(r["last_error"] or "")[:500])
        g.ids.append(r["id"])
        at = r["finished_at"]
        if at is not None:
            g.first = at if g.first is None else min(g.first, at)
            g.last = at if g.last is None else max(g.last, at)
    ordered = sorted(groups.values(), key=lambda g: (-len(g.ids), g.portal, g.cause))
    return ordered, uncertain


def review_screenshot(artifacts: Sequence[Mapping[str, Any]], attempt: int,
                      ) -> Mapping[str, Any] | None:
    """The review page's screenshot of the attempt that asked for approval: the one named
    for the review; else that attempt's last screenshot that is not the one taken when the
    attempt ended to wait ("deferred"; "failure" before flows named it so)."""
    shots = [a for a in artifacts if a["kind"] == "screenshot" and a["attempt"] == attempt]
    named = [a for a in shots if "review" in _name(a)]
    if named:
        return named[-1]
    others = [a for a in shots if not any(w in _name(a) for w in ("failure", "deferred"))]
    return others[-1] if others else None


def _name(artifact: Mapping[str, Any]) -> str:
    return str(artifact["path"]).rsplit("/", 1)[-1].lower()


def approvals(conn: Any, now: datetime) -> list[dict[str, Any]]:
    out = []
    for row in sql.fetch(conn, "console_needs_approvals", {"limit": LIMIT}):
        arts = sql.fetch(conn, "console_artifacts", {"job_id": row["job_id"]})
        approval = row["approval"] or {}
        out.append({**row, "review": review_screenshot(arts, row["attempt"]),
                    "digest": str(approval.get("digest") or ""),
                    "changed": bool(approval.get("changed")),
                    "asked_at": _instant(approval.get("asked_at")) or row["created_at"]})
    return out


def waiting_overdue(conn: Any, now: datetime) -> list[dict[str, Any]]:
    out = []
    for row in sql.fetch(conn, "console_needs_waiting", {"now": now, "limit": LIMIT}):
        w = row["waiting"] or {}
        out.append({**row, "since": _instant(w.get("since")),
                    "expected_by": _instant(w.get("expected_by")),
                    "next_check": _instant(w.get("next_check")),
                    "checks": int(w.get("checks") or 0), "what": w.get("what") or ""})
    return out


def _instant(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def page(conn: Any) -> dict[str, Any]:
    """Everything the "Needs you" page lists, each sort oldest (or most urgent) first."""
    now = clock.now()
    failed_rows = [{**r, "last_error": masking.scrub_ssn_like(r["last_error"])}
                   for r in sql.fetch(conn, "console_needs_failed", {"limit": FAILED_LIMIT})]
    groups, uncertain = group_failed(failed_rows)
    data: dict[str, Any] = masking.scrub_ssn_like({
        "questions": sql.fetch(conn, "console_needs_questions", {"now": now,
                                                                  "limit": LIMIT}),
        "approvals": approvals(conn, now),
        "uncertain": uncertain,
        "waiting": waiting_overdue(conn, now),
    })
    data.update(now=now, failed=groups, failed_partial=len(failed_rows) >= FAILED_LIMIT)
    data["total"] = (len(data["questions"]) + len(data["approvals"]) + len(uncertain)
                     + len(data["waiting"]) + sum(len(g.ids) for g in groups))
    return data
