"""Message-IDs and threads of the escalation mail (issue 48 items 7 and 8).

A Message-ID is ``<escalation-ID.TOKEN@portalq>``: the row's id, and a random token drawn
with the row (migration 0029). The id alone repeats in every new database (a demo rerun, a
restore, staging beside production sharing an inbox) and mail clients dropped or
mis-threaded the later mails; the token is the row's, so the resend of one row after a crash
keeps its Message-ID and is collapsed. Rows mailed before 0029 have no token and keep the
Message-ID they were sent with.

One incident, one thread: an escalation whose cause (mail_compose.cause) was mailed lately
-- a sent escalation of that cause within PORTALQ_MAIL_THREAD_MINUTES before it -- is not a
new incident: it is mailed as a reply in that cause's thread ("3 more jobs ..."), gathered
with the others of its cause for PORTALQ_MAIL_REPLY_SECONDS. Real incidents last minutes
(30 name rejections over 73 s, an IRS error hitting EIN jobs one after another), longer
than any gather window a first mail can wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from email import policy
from email.parser import BytesHeaderParser
from typing import Any

from portalq.jobs.operations import outbox
from portalq.jobs.rows import EscalationRow
from portalq.scheduler import mail_compose
from portalq.scheduler.config import Settings


def message_id(escalation_id: int, token: str | None = None) -> str:
    """The Message-ID of an escalation's mail: stable for the row (a resend after a crash
    is collapsed by mail clients), repeated by no other database (its random token)."""
    tail = f".{token}" if token else ""
    return f"<escalation-{int(escalation_id)}{tail}@portalq>"


def notice_message_id(notice_id: int, token: str | None = None) -> str:
    tail = f".{token}" if token else ""
    return f"<portal-notice-{int(notice_id)}{tail}@portalq>"


@dataclass(frozen=True)
class Thread:
    """The thread a cause's later jobs are mailed in: its first escalation, that mail's
    Message-ID and subject (a reply says ``Re:`` to it: clients thread on both)."""

    root: int
    message_id: str
    subject: str | None

    def reply_subject(self, fallback: str) -> str:
        base = self.subject or fallback
        return base if base.casefold().startswith("re: ") else f"Re: {base}"


async def open_thread(settings: Settings, conn: Any, esc: EscalationRow) -> Thread | None:
    """The thread ``esc``'s cause is still being mailed in, if that cause was mailed within
    PORTALQ_MAIL_THREAD_MINUTES before it (None: a new incident, or a kind never grouped)."""
    key = mail_compose.cause(esc)
    if key is None or settings.mail_thread_minutes <= 0:
        return None
    since = esc["created_at"] - timedelta(minutes=settings.mail_thread_minutes)
    for row in await outbox.threads(conn, kind=esc["kind"], portal=esc["portal"], since=since):
        if mail_compose.cause({**esc, "reason": row["reason"]}) == key:
            return Thread(int(row["mail_thread"]),
                          message_id(row["mail_thread"], row["thread_token"]),
                          _subject(row["thread_message"]))
    return None


def _subject(message: bytes | None) -> str | None:
    if not message:
        return None
    parsed = BytesHeaderParser(policy=policy.default).parsebytes(bytes(message))
    value = parsed["Subject"]
    return mail_compose.one_line(value, 200) if value else None
