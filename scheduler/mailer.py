"""Escalation mail over SMTP (smtplib; TLS and auth from PORTALQ_SMTP_URL).

Durability: escalation rows are written in the same transaction as the job's ``failed``
transition; the tick sends the due ones, holding each row's lock while it sends and
marking it sent in that transaction. A mail server that is down leaves the row due again
later (backoff). The one window where a mail can go twice is a crash after the SMTP
server accepted the message and before the commit; the Message-ID is stable
(``<escalation-ID@portalq>``) so mail clients collapse such a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import smtplib
import ssl
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from jobs import clock, sql
from scheduler import metrics
from scheduler.config import Settings

log = logging.getLogger("portalq.mail")


def _send_sync(settings: Settings, message: EmailMessage) -> None:
    url = urlparse(settings.smtp_url)
    options = parse_qs(url.query)
    host = url.hostname or "127.0.0.1"
    tls = url.scheme == "smtps"
    port = url.port or (465 if tls else 25)
    context = ssl.create_default_context()
    if options.get("insecure", ["0"])[0] == "1":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    smtp_cls = smtplib.SMTP_SSL if tls else smtplib.SMTP
    kwargs: dict[str, Any] = {"context": context} if tls else {}
    with smtp_cls(host, port, timeout=15, **kwargs) as smtp:
        if not tls and options.get("starttls", ["0"])[0] == "1":
            smtp.starttls(context=context)
        if url.username:
            smtp.login(unquote(url.username), unquote(url.password or ""))
        smtp.send_message(message)


async def send(settings: Settings, message: EmailMessage) -> None:
    if "From" not in message:
        message["From"] = settings.mail_from
    await asyncio.to_thread(_send_sync, settings, message)


def build_escalation(settings: Settings, esc: dict[str, Any],
                     screenshot: Path | None) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = (f"[portalq] {esc['kind']}: {esc['job_type']} job {esc['job_id']} "
                      f"(order {esc['order_id']}) needs attention")
    msg["From"] = settings.mail_from
    msg["To"] = ", ".join(settings.admins())
    msg["Message-ID"] = f"<escalation-{esc['id']}@portalq>"
    from jobs.secrets_at_rest import checkpoint_for_display

    checkpoint = checkpoint_for_display(esc.get("checkpoint"))
    lines = [
        f"Job {esc['job_id']} ({esc['job_type']}) for order {esc['order_id']} on portal "
        f"{esc['portal']} needs a human.",
        "",
        f"Why:        {esc['kind']} - {esc['reason']}",
        f"Attempts:   {esc['attempts']} of {esc['max_attempts']}",
        f"Last error: {esc['last_error'] or '-'}",
        f"Checkpoint: {', '.join(f'{k}={v}' for k, v in sorted(checkpoint.items())) or '-'}",
        "",
        "To act:",
        f"  portalq jobs show {esc['job_id']}",
        f"  portalq jobs retry {esc['job_id']}",
        f"  portalq jobs cancel {esc['job_id']}",
    ]
    lines += _erasure_note(settings, esc["job_type"])
    if esc["kind"] == "uncertain":
        lines += ["", "The portal may have accepted the submission. Check the portal first; "
                  "retrying may file twice."]
    msg.set_content("\n".join(lines) + "\n")
    if screenshot is not None and screenshot.is_file():
        ctype = mimetypes.guess_type(screenshot.name)[0] or "image/png"
        maintype, subtype = ctype.split("/")
        msg.add_attachment(screenshot.read_bytes(), maintype=maintype, subtype=subtype,
                           filename=screenshot.name)
    return msg


def _erasure_note(settings: Settings, job_type: str) -> list[str]:
    from jobs import types

    try:
        fields = types.get(job_type).secret_fields
    except Exception:  # noqa: BLE001 - an unknown (removed) type: nothing declared
        return []
    if not fields:
        return []
    return ["", f"Its secret values ({', '.join(fields)}) are erased "
            f"{settings.secret_retention_days:g} days after the failure "
            "(PORTALQ_SECRET_RETENTION_DAYS); a retry after that asks for them again."]


async def _send_due(settings: Settings, conn: Any, *, due_query: str, sent_query: str,
                    failed_query: str, build: Any, limit: int) -> int:
    """Send the due rows of one outbox (escalations or portal notices): each row locked
    while its mail goes out and marked sent in the same transaction; a mail server that is
    down leaves the rest for a later tick (one connection attempt per tick)."""
    if not settings.admins():
        return 0
    sent = 0
    async with conn.transaction():
        for row in await sql.afetch(conn, due_query, {"now": clock.now(), "limit": limit}):
            try:
                await send(settings, await build(row))
            except (OSError, smtplib.SMTPException) as exc:
                delay = timedelta(seconds=min(settings.tick_seconds / 2, 300))
                await sql.afetch(conn, failed_query, {
                    "id": row["id"], "error": str(exc)[:500],
                    "next_try_at": clock.now() + delay})
                log.warning("%s %s not sent (%s); next try in %s", due_query, row["id"], exc,
                            delay)
                break
            await sql.afetch(conn, sent_query, {"id": row["id"], "now": clock.now()})
            sent += 1
    return sent


async def send_due_escalations(settings: Settings, conn: Any, limit: int = 20) -> int:
    """Send due escalations (with the job's last screenshot); returns how many went out."""

    async def build(esc: dict[str, Any]) -> EmailMessage:
        shots = [a for a in await sql.afetch(conn, "job_artifacts", {"id": esc["job_id"]})
                 if a["kind"] == "screenshot"]
        return build_escalation(settings, esc, Path(shots[-1]["path"]) if shots else None)

    sent = await _send_due(settings, conn, due_query="due_escalations",
                           sent_query="escalation_sent", failed_query="escalation_send_failed",
                           build=build, limit=limit)
    metrics.ESCALATIONS.inc(sent)
    return sent


def build_notice(settings: Settings, note: dict[str, Any]) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = f"[portalq] portal {note['portal']} {note['kind']}"
    msg["To"] = ", ".join(settings.admins())
    msg["Message-ID"] = f"<portal-notice-{note['id']}@portalq>"
    action = ("Its jobs are deferred (no attempts spent) and one probe job tests it "
              "periodically; it resumes by itself when a probe passes."
              if note["kind"] == "paused" else "Its deferred jobs run again.")
    other = "resume" if note["kind"] == "paused" else "pause"
    msg.set_content(f"Portal {note['portal']} was {note['kind']}: {note['reason']}\n\n"
                    f"{action}\n\n  portalq portals list\n"
                    f"  portalq portals {other} {note['portal']}\n")
    return msg


async def send_due_notices(settings: Settings, conn: Any, limit: int = 20) -> int:
    """Portal paused/resumed notices (one each per breaker trip), same durability."""

    async def build(note: dict[str, Any]) -> EmailMessage:
        return build_notice(settings, note)

    return await _send_due(settings, conn, due_query="due_notices", sent_query="notice_sent",
                           failed_query="notice_send_failed", build=build, limit=limit)
