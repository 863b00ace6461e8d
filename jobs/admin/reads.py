"""The console's reads: the job list (filtered, keyset-paged, bounded), a job's page, the
overview's numbers, the escalations inbox. Every statement is in ``queries.sql``.

Bounded means: no page reads more than :data:`WINDOW` candidate rows, whatever the filters.
Status filters read their partial index (failed, waiting, running); portal, job type and
order id their indexes; a time range becomes an id range (ids and enqueue times rise
together); a payload field is tested on the window's rows. A window that held fewer matches
than a page says where the search stopped, and the next page continues from there -- except
for a search of a field of :data:`SEARCH_FIELDS` by at least three characters: its trigram
index on ``job_search`` (migration 0026, written once per job beside the queue) finds the
rest of the page wherever the matches are, at ten million rows in one page view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from portalq.jobs import clock, queue, search_index, types
from portalq.jobs.db import sql
from portalq.jobs.errors import InputError
from portalq.jobs.kinds import JOB_STATUSES
from portalq.jobs.secrets import crypto, redaction

WINDOW = 20_000
PAGE = 50
MAX_ID = 2**63 - 1
#: the payload fields searched through a trigram index of their own (migration 0026 copies
#: them into job_search, by the same path, one index per field): the names people look a
#: job up by, never a secret field (a test checks both against every job type)
SEARCH_FIELDS = ("legal_name", "company_name", "names", "applicant.name")
#: a trigram index needs three characters of the searched text to narrow anything
SEARCH_MIN = 3
#: the most jobs above the search indexer's mark one page tests on the queue (the indexer
#: keeps it to a few seconds' worth; a service stopped for long lets it grow): beyond, the
#: page says where it stopped, as a window does
UNINDEXED = 200_000


@dataclass
class JobFilter:
    status: str | None = None
    portal: str | None = None
    job_type: str | None = None
    order_id: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    #: a payload field (dotted path, e.g. ``legal_name`` or ``applicant.name``) and the text
    #: its value contains (case-insensitive)
    field: str | None = None
    value: str | None = None

    def check(self) -> JobFilter:
        if self.status is not None and self.status not in JOB_STATUSES:
            raise InputError(f"unknown status {self.status!r}")
        if self.job_type is not None:
            types.get(self.job_type)
        if (self.field is None) != (self.value is None):
            raise InputError("a payload filter needs both a field and a value")
        if self.field is not None:
            if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", self.field):
                raise InputError(f"not a payload field: {self.field!r}")
            scope = [self.job_type] if self.job_type else types.names()
            if redaction.field_is_secret(scope, self.field):
                raise InputError(f"{self.field} is a secret field: it cannot be searched")
        if self.value is not None and "\x00" in self.value:
            raise InputError("a NUL character cannot be searched for")
        if self.created_from and self.created_to and self.created_to <= self.created_from:
            raise InputError("the time range ends before it starts")
        return self

    def params(self) -> dict[str, Any]:
        return {"status": self.status, "portal": self.portal, "job_type": self.job_type,
                "order_id": self.order_id, "created_from": self.created_from,
                "created_to": self.created_to,
                "field_path": self.field.split(".") if self.field else None,
                "search_field": self.field,
                "field_like": (f"%{_like_escape(self.value.lower())}%"
                               if self.value is not None else None)}

    def shown(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` (with ``matched``) masked as every page shows them, without those whose
        searched value is not in what is shown. The database tests the masked text already
        (migration 0028); this holds where its regular expressions and Python's differ (a
        digit of another script is ``\\d`` to Python's, not to PostgreSQL's): a search never
        finds a job by a text the page hides (issue 48 #13)."""
        out = [redaction.scrub_ssn_like(r) for r in rows]
        if self.value is None:
            return out
        needle = self.value.lower()
        return [r for r in out if needle in (r.get("matched") or "").lower()]

    def indexed(self) -> bool:
        """A search its field's trigram index can answer (else: the id window's test)."""
        return (self.field in SEARCH_FIELDS and self.value is not None
                and len(self.value) >= SEARCH_MIN)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")


def first_id_at_or_after(conn: Any, at: datetime) -> int | None:
    """The lowest job id enqueued at or after ``at`` (a binary search over ids in SQL)."""
    found = sql.fetch_value(conn, "console_first_id_at", {"at": at})
    return None if found is None else int(found)


@dataclass
class Page:
    rows: list[dict[str, Any]]
    #: continue below this id (None: nothing further)
    next_before: int | None
    #: True if the window ran out before a page was full: the search stopped at next_before
    partial: bool
    scanned: int


def jobs_page(conn: Any, flt: JobFilter, *, before_id: int | None = None,
              limit: int = PAGE, window: int = WINDOW) -> Page:
    flt.check()
    floor = 0
    top = before_id if before_id is not None else MAX_ID
    if flt.created_from is not None:
        floor = first_id_at_or_after(conn, flt.created_from) or MAX_ID
    if flt.created_to is not None:
        end = first_id_at_or_after(conn, flt.created_to)
        if end is not None:
            top = min(top, end)
    params = {**flt.params(), "before_id": top, "floor_id": floor, "window": window,
              "limit": limit}
    found = sql.fetch(conn, "console_jobs_page", params)
    hits = flt.shown(found)
    if len(found) >= limit:
        return Page(hits, found[-1]["id"], False, len(found))
    summary = sql.fetch_one(conn, "console_jobs_window", params)
    assert summary is not None
    scanned = summary["scanned"] or 0
    if scanned >= window and summary["scanned_to"] is not None:
        if flt.indexed():   # few matches near the top: the index finds the rest below it
            below = summary["scanned_to"]
            indexed_to = search_index.mark(conn).indexed_to
            if below > indexed_to + 1:
                # the newest jobs the indexer has not reached (a few seconds' worth): tested
                # on the queue, as the window does
                tail = {**params, "before_id": below, "floor_id": max(floor, indexed_to + 1),
                        "window": UNINDEXED, "limit": limit - len(found)}
                more = sql.fetch(conn, "console_jobs_page", tail)
                found += more
                hits += flt.shown(more)
                if len(found) >= limit:
                    return Page(hits, found[-1]["id"], False, scanned)
                rest = sql.fetch_one(conn, "console_jobs_window", tail)
                assert rest is not None
                scanned += rest["scanned"] or 0
                if (rest["scanned"] or 0) >= UNINDEXED:   # the indexer is far behind
                    return Page(hits, rest["scanned_to"], True, scanned)
                below = indexed_to + 1
            more = sql.fetch(conn, "console_jobs_search", {
                **params, "before_id": below, "limit": limit - len(found)})
            found += more
            hits += flt.shown(more)
            return Page(hits, found[-1]["id"] if len(found) >= limit else None, False,
                        scanned)
        return Page(hits, summary["scanned_to"], True, scanned)
    return Page(hits, None, False, scanned)


def status_estimates(conn: Any) -> dict[str, int]:
    """Jobs per status, estimated from the table's statistics (no count at 10 M rows); a
    status too rare for the statistics' most common values is absent."""
    return {r["status"]: int(r["n"]) for r in sql.fetch(conn, "console_status_estimates")}


#: up to this many jobs in the table, the list's counts per status are exact (a bounded
#: read of at most this many rows, a few milliseconds); beyond, the statistics' estimates
EXACT_COUNTS_UP_TO = 20_000


def status_counts(conn: Any) -> tuple[dict[str, int], bool]:
    """Jobs per status, and whether the counts are exact: counted when the table holds at
    most :data:`EXACT_COUNTS_UP_TO` jobs, else :func:`status_estimates`."""
    rows = sql.fetch(conn, "console_status_counts_small", {"limit": EXACT_COUNTS_UP_TO + 1})
    counts = {r["status"]: int(r["n"]) for r in rows}
    if sum(counts.values()) <= EXACT_COUNTS_UP_TO:
        return counts, True
    return status_estimates(conn), False


def ids_matching(conn: Any, flt: JobFilter, statuses: tuple[str, ...], cap: int,
                 ) -> list[int]:
    flt.check()
    rows = sql.fetch(conn, "console_job_ids_matching",
                     {**flt.params(), "statuses": list(statuses), "limit": cap})
    return [r["id"] for r in flt.shown(rows)]


def statuses_of(conn: Any, ids: list[int]) -> dict[int, str]:
    return {r["id"]: r["status"] for r in sql.fetch(conn, "console_jobs_status_of",
                                                    {"ids": ids})}


def job_page(conn: Any, job_id: int) -> dict[str, Any]:
    """Everything the job page shows, secrets masked/scrubbed (jobs.secrets.redaction)."""
    job: dict[str, Any] = dict(queue.get_job(job_id, conn))
    job["events"] = sql.fetch(conn, "job_events", {"id": job_id})
    job["artifacts"] = sql.fetch(conn, "console_artifacts", {"job_id": job_id})
    job["documents"] = sql.fetch(conn, "document_names", {"job_id": job_id})
    job["escalations"] = [{**e, "message": mail_text(e["message"])}
                          for e in sql.fetch(conn, "console_job_escalations",
                                             {"job_id": job_id})]
    # a person's part (issue 16): the questions asked (never their answers) and an approval
    now = clock.now()
    job["questions"] = [{**q, "open": q["answered_at"] is None and q["deadline"] > now}
                        for q in sql.fetch(conn, "job_questions", {"job_id": job_id})]
    approval = (job.get("checkpoint") or {}).get("approval") or {}
    job["awaits_approval"] = approval.get("state") == "pending"
    return redaction.public_job(job)


def mail_text(raw: bytes | memoryview | None) -> str | None:
    """A stored escalation mail (``escalations.message``: the message as it was sent) as a
    person reads it: its headers, its text, what it attached. None: not built yet."""
    if raw is None:
        return None
    msg = message_from_bytes(bytes(raw), policy=policy.default)
    assert isinstance(msg, EmailMessage)
    lines = [f"{h}: {msg[h]}" for h in ("From", "To", "Subject", "Message-ID", "In-Reply-To")
             if msg[h] is not None]
    body = msg.get_body(preferencelist=("plain", "html"))
    text = str(body.get_content()) if body is not None else ""
    # the screenshot is inline in the HTML alternative: every part that is not a text of
    # the mail itself is listed
    attached = [f"[attached: {p.get_filename() or p.get_content_type()}, "
                f"{len(p.get_content()):,} bytes]" for p in msg.walk()
                if not p.is_multipart() and p is not body
                and (p.get_filename() or p.get_content_maintype() != "text")]
    return "\n".join(lines) + "\n\n" + text.rstrip("\n") + "".join(
        "\n" + a for a in attached)


def artifact(conn: Any, artifact_id: int) -> dict[str, Any] | None:
    return sql.fetch_one(conn, "console_artifact", {"id": artifact_id})


def document(conn: Any, job_id: int, name: str) -> dict[str, Any] | None:
    """A job's document as the portal gave it: opened from its seal (documents are kept
    sealed, jobs.worker_api.store_document), so a CP 575 downloads as the PDF it is."""
    row = sql.fetch_one(conn, "console_document", {"job_id": job_id, "name": name})
    if row is None:
        return None
    data = bytes(row["data"])
    if row["key_id"] is not None:
        data = crypto.open_blob(row["key_id"], data)
    return {"name": row["name"], "content_type": row["content_type"], "data": data}


def depth(conn: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in sql.fetch(conn, "console_depth"):
        out.setdefault(row["portal"], {})[row["status"]] = row["n"]
    return out


def throughput(conn: Any, hours: int = 24,
               cache: dict[datetime, dict[str, int]] | None = None) -> list[dict[str, Any]]:
    """Per hour of the last ``hours`` (oldest first): completed and failed counts.

    ``cache`` (kept by the caller across calls) holds the hours already past: only the
    hours missing from it and the current one are counted, so a refresh reads one hour
    of finished jobs, not a day."""
    now = clock.now().replace(minute=0, second=0, microsecond=0)
    since = now - timedelta(hours=hours - 1)
    wanted = [since + timedelta(hours=i) for i in range(hours)]
    cache = cache if cache is not None else {}
    for hour in [h for h in cache if h < since]:
        del cache[hour]
    start = next(h for h in wanted if h not in cache or h == now)
    counted: dict[datetime, dict[str, int]] = {h: {"completed": 0, "failed": 0}
                                               for h in wanted if h >= start}
    for r in sql.fetch(conn, "console_throughput", {"since": start}):
        if r["hour"] in counted:
            counted[r["hour"]][r["status"]] = r["n"]
    for hour, counts in counted.items():
        if hour < now:
            cache[hour] = counts
    return [{"hour": h, **(counted.get(h) or cache[h])} for h in wanted]


def running(conn: Any) -> list[dict[str, Any]]:
    return [redaction.scrub_ssn_like(r) for r in sql.fetch(conn, "status_running")]


def table_estimate(conn: Any) -> int:
    return int(sql.fetch_value(conn, "console_table_estimate") or 0)


def escalations_inbox(conn: Any, *, include_resolved: bool = False, limit: int = 200,
                      ) -> list[dict[str, Any]]:
    """The escalations nobody resolved whose cause is still there (``live``), oldest
    first; with ``include_resolved`` every one, those closed by themselves included."""
    rows = sql.fetch(conn, "console_escalations_all" if include_resolved
                     else "console_escalations_inbox", {"limit": limit, "now": clock.now()})
    return [redaction.scrub_ssn_like(r) for r in rows]


#: the navigation counts what needs a person up to this ("999+" beyond)
NEEDS_YOU_CAP = 1000


def needs_you(conn: Any) -> int:
    """How many things need a person, at most the cap: the escalations inbox's open rows
    and the jobs waiting on a portal past its expected time (the "Needs you" page's items,
    jobs.admin.needs)."""
    params = {"now": clock.now(), "cap": NEEDS_YOU_CAP}
    escalated = int(sql.fetch_value(conn, "console_needs_you", params) or 0)
    overdue = int(sql.fetch_value(conn, "console_needs_waiting_count", params) or 0)
    return min(escalated + overdue, NEEDS_YOU_CAP)


def closures(conn: Any) -> list[dict[str, Any]]:
    return sql.fetch(conn, "console_closures", {"after": clock.now()})


def sign_in_turn(conn: Any, name: str | None, ip: str) -> None:
    """Wait for this sign-in's turn (in the caller's transaction, until it ends): one
    attempt at a time from ``ip`` and for ``name``, so a burst of parallel attempts is
    counted against the throttle's limits, not checked all at once before any failure is
    recorded."""
    sql.fetch(conn, "console_login_lock", {"key": f"ip:{ip}"})
    if name is not None:
        sql.fetch(conn, "console_login_lock", {"key": f"name:{name.strip()}"})
