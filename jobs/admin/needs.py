"""What needs a person, as the console's "Needs you" page lists it (issue 39): open
questions, approvals with their review screenshot, uncertain filings, jobs waiting on a
portal past the time it normally takes, portals paused for a page their flow does not know,
and failed jobs grouped by cause.

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
from portalq.jobs.admin.actions import BULK_CAP
from portalq.jobs.db import sql
from portalq.jobs.secrets import redaction

#: at most this many items of each sort are read (the count in the navigation says more)
LIMIT = 200
#: causes of failure listed (each a group of any number of failed jobs)
GROUPS_LIMIT = 200
_NUMBER = re.compile(r"[0-9]+")

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
    #: the oldest of them, at most a bulk action's worth (BULK_CAP); ``count`` says how many
    ids: list[int] = field(default_factory=list)
    first: datetime | None = None
    last: datetime | None = None
    count: int = 0

    @property
    def capped(self) -> bool:
        """Whether the group holds more jobs than one bulk action can take."""
        return self.count > len(self.ids)

    @property
    def advice(self) -> str:
        return ADVICE.get(self.kind, DEFAULT_ADVICE)[0]

    @property
    def retry_helps(self) -> bool:
        return ADVICE.get(self.kind, DEFAULT_ADVICE)[1]


def cause_of(error: str | None) -> str:
    """The cause a failed job is grouped by (the database groups them so:
    console_needs_failed_groups): the error's first line, its first 200 characters, each
    run of digits as "#" -- "IRS answered 503 for order 17" and "... order 18" are one."""
    first = (error or "").strip(" \t\r\n").split("\n", 1)[0].split("\r", 1)[0]
    return _NUMBER.sub("#", (first or "no error recorded")[:200])


def failed_groups(conn: Any) -> list[FailedGroup]:
    """Every failed job in the inbox (not past a point of no return), grouped by cause,
    largest group first; the text scrubbed of anything shaped like an SSN."""
    return [FailedGroup(r["portal"], r["job_type"], r["kind"],
                        str(redaction.scrub_ssn_like(r["cause"])),
                        sample=str(redaction.scrub_ssn_like(r["sample"] or "")),
                        ids=list(r["ids"]), first=r["first"], last=r["last"], count=r["n"])
            for r in sql.fetch(conn, "console_needs_failed_groups",
                               {"limit": GROUPS_LIMIT, "ids_cap": BULK_CAP})]


def uncertain(conn: Any) -> list[dict[str, Any]]:
    """Failed jobs past a point of no return, one by one, with their submissions in doubt."""
    out = []
    for r in sql.fetch(conn, "console_needs_uncertain", {"limit": LIMIT}):
        doubt = submission.in_doubt({submission.KEY: r.pop("submissions")})
        out.append({**r, "last_error": redaction.scrub_ssn_like(r["last_error"]),
                    "submissions": [d.name for d in doubt]})
    return out


@dataclass
class UncertainGroup:
    """Uncertain filings with one cause (the same portal, job type and error, digits
    aside): the jobs of one outage, one card with "not filed, all of these" (previewed)."""

    portal: str
    job_type: str
    cause: str
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.jobs)

    @property
    def ids(self) -> list[int]:
        return [int(j["id"]) for j in self.jobs]

    @property
    def submissions(self) -> list[str]:
        return sorted({s for j in self.jobs for s in j["submissions"]})

    @property
    def first(self) -> Any:
        return self.jobs[0]


def uncertain_groups(items: Sequence[Mapping[str, Any]]) -> list[UncertainGroup]:
    """:func:`uncertain`'s filings grouped by cause, in their order (oldest first)."""
    groups: dict[tuple[str, str, str], UncertainGroup] = {}
    for item in items:
        key = (item["portal"], item["job_type"], cause_of(item.get("last_error")))
        groups.setdefault(key, UncertainGroup(*key)).jobs.append(dict(item))
    return list(groups.values())


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
    groups, doubtful = failed_groups(conn), uncertain(conn)
    data: dict[str, Any] = redaction.scrub_ssn_like({
        "questions": sql.fetch(conn, "console_needs_questions", {"now": now,
                                                                  "limit": LIMIT}),
        "approvals": approvals(conn, now),
        "uncertain": doubtful,
        "waiting": waiting_overdue(conn, now),
        # counted in the navigation (console_needs_you): listed here, so both say one number
        "changed": sql.fetch(conn, "console_needs_changed", {"limit": LIMIT}),
    })
    data.update(now=now, failed=groups, failed_partial=len(groups) >= GROUPS_LIMIT,
                uncertain_groups=uncertain_groups(data["uncertain"]))
    data["total"] = (len(data["questions"]) + len(data["approvals"]) + len(doubtful)
                     + len(data["waiting"]) + len(data["changed"])
                     + sum(g.count for g in groups))
    return data
