"""The mail outbox: escalations (a job needs a human) and portal notices (paused,
resumed), each row sent once. Rows are taken one at a time, locked (SKIP LOCKED) while
their mail goes out, and marked sent -- or failed with the next try -- in that same
transaction (the caller's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from psycopg import AsyncConnection, Connection

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.kinds import ArtifactKind
from portalq.jobs.rows import EscalationRow, NoticeRow

AConn = AsyncConnection[Any]
R = TypeVar("R", EscalationRow, NoticeRow)


@dataclass(frozen=True)
class Box(Generic[R]):
    """One outbox table's statements (``R``: the type of its due rows)."""

    name: str
    due: str
    sent: str
    failed: str


ESCALATIONS: Box[EscalationRow] = Box("escalations", "due_escalations", "escalation_sent",
                                      "escalation_send_failed")
NOTICES: Box[NoticeRow] = Box("notices", "due_notices", "notice_sent", "notice_send_failed")


async def next_due(conn: AConn, box: Box[R], *, skip: list[int]) -> R | None:
    """The oldest due row not in ``skip``, locked until the caller's transaction ends."""
    rows = await sql.afetch(conn, box.due, {"now": clock.now(), "limit": 1, "skip": skip})
    return cast(R, rows[0]) if rows else None


async def due_like(conn: AConn, row: EscalationRow, *, skip: list[int],
                   limit: int = 200) -> list[EscalationRow]:
    """The other due escalations of ``row``'s portal and kind (not in ``skip``), locked
    until the caller's transaction ends: the candidates for one incident's mail."""
    rows = await sql.afetch(conn, "due_escalations_like", {
        "now": clock.now(), "portal": row["portal"], "kind": row["kind"], "skip": skip,
        "limit": limit})
    return cast(list[EscalationRow], rows)


async def hold(conn: AConn, escalation_id: int, until: datetime) -> None:
    """Leave an escalation unsent until ``until`` (gathering its incident), no attempt
    counted."""
    await sql.afetch(conn, "escalation_hold", {"id": escalation_id, "until": until})


async def first_escalation(conn: AConn, job_id: int) -> tuple[int, str | None] | None:
    """The id and Message-ID token of the job's first escalation (its mails are threaded
    under that one's)."""
    row = await sql.afetch_one(conn, "job_first_escalation", {"job_id": job_id})
    return (int(row["id"]), row["mail_token"]) if row else None


async def threads(conn: AConn, *, kind: str, portal: str, since: datetime,
                  ) -> list[dict[str, Any]]:
    """The sent escalations of a portal's kind since ``since``, newest first, each with the
    first escalation of the mail thread it went in (``mail_thread``, ``thread_token``,
    ``thread_message``)."""
    return await sql.afetch(conn, "escalation_threads", {"kind": kind, "portal": portal,
                                                         "since": since})


async def in_thread(conn: AConn, escalation_ids: list[int], thread: int) -> None:
    """The escalations of one mail belong to the thread ``thread`` started (kept with the
    mail's send, in its transaction)."""
    await sql.afetch(conn, "escalation_in_thread", {"ids": escalation_ids, "thread": thread})


async def mark_sent(conn: AConn, box: Box[Any], row_id: int) -> None:
    await sql.afetch(conn, box.sent, {"id": row_id, "now": clock.now()})


async def mark_failed(conn: AConn, box: Box[Any], row_id: int, *, error: str,
                      next_try_at: datetime) -> None:
    await sql.afetch(conn, box.failed, {"id": row_id, "error": error[:500],
                                        "next_try_at": next_try_at})


async def store_message(conn: AConn, escalation_id: int, message: bytes) -> None:
    """Keep the escalation's mail as built for this send (the console shows it)."""
    await sql.afetch(conn, "escalation_message_store", {"id": escalation_id,
                                                         "message": message})


async def job_secret_columns(conn: AConn, job_id: int) -> dict[str, Any] | None:
    """The job's type, payload and sealed secret columns (to scrub its mail of them)."""
    return await sql.afetch_one(conn, "escalation_job_secrets", {"id": job_id})


async def next_try(conn: AConn) -> datetime | None:
    """When the next unsent message is due (None: nothing waits)."""
    row = await sql.afetch_one(conn, "outbox_next_try")
    return row["at"] if row else None


async def page_snapshots(conn: AConn, job_id: int) -> list[str]:
    """The paths of the aria snapshots (the page's and the expected one) a changed page
    left on the job, of its last run that left any (a portal_changed escalation's)."""
    found = [a for a in await sql.afetch(conn, "job_artifacts", {"id": job_id})
             if a["kind"] == ArtifactKind.FILE
             and a["path"].rsplit("/", 1)[-1] in ("aria-page.yaml", "aria-expected.yaml")]
    return [a["path"] for a in found[-2:]]


async def screenshots(conn: AConn, job_id: int, attempt: int | None = None) -> list[str]:
    """The paths of a job's screenshots (of one ``attempt``), oldest first (an escalation
    attaches the last)."""
    return [a["path"] for a in await sql.afetch(conn, "job_artifacts", {"id": job_id})
            if a["kind"] == ArtifactKind.SCREENSHOT and attempt in (None, a["attempt"])]


async def attempt_evidence(conn: AConn, job_id: int, attempt: int) -> bool:
    """Was the evidence of the job's ``attempt`` recorded (a file, or a note of what is
    missing)? It is, when the attempt has ended."""
    return any(a["attempt"] == attempt
               for a in await sql.afetch(conn, "job_artifacts", {"id": job_id}))


def unsent(conn: Connection[Any]) -> int:
    """Escalations and portal notices still waiting to be mailed."""
    return int(sql.fetch_value(conn, "unsent_mail") or 0)
