"""Escalation mail over SMTP (smtplib; TLS and auth from PORTALQ_SMTP_URL).

Durability: escalation rows are written in the same transaction as the job's ``failed``
transition (a trigger NOTIFYs ``portalq_outbox``, and the leader sends at once); each
message is sent in a transaction of its own, holding its row's lock while it goes out and
committed as sent as soon as the server accepted it. A mail server that is down leaves
the row due again a few seconds later. The one window where a mail can go twice is a
crash after the SMTP server accepted that one message and before its commit; the
Message-ID is stable (``<escalation-ID@portalq>``) so mail clients collapse such a
duplicate. A row whose mail cannot be built, or that the server refuses for good (5xx),
is marked with its error and tried again later with a growing delay; the other rows go on.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import smtplib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from portalq.jobs import clock, outbox
from portalq.jobs.kinds import NoticeKind
from portalq.jobs.rows import EscalationRow, NoticeRow
from portalq.scheduler import metrics
from portalq.scheduler.config import Settings

log = logging.getLogger("portalq.mail")


class SmtpUrlError(ValueError):
    """PORTALQ_SMTP_URL is not a usable URL (the message never quotes its password)."""


def smtp_target(url_text: str) -> tuple[str, int, bool, dict[str, list[str]], str, str]:
    """(host, port, tls, options, user, password) of an ``smtp[s]://[user:pass@]host:port``
    URL; user and password percent-decoded (write ``/``, ``#``, ``@`` or ``:`` in them as
    %2F, %23, %40, %3A). A malformed URL raises :class:`SmtpUrlError` without its text."""
    try:
        url = urlparse(url_text)
        port = url.port
    except ValueError:
        raise SmtpUrlError("PORTALQ_SMTP_URL is not a valid URL (percent-encode '/', '#', "
                           "'@' and ':' in the user name and password)") from None
    if url.scheme not in ("smtp", "smtps") or url.path not in ("", "/") or url.fragment:
        raise SmtpUrlError("PORTALQ_SMTP_URL must look like smtp[s]://[user:password@]host"
                           "[:port][?starttls=1] (percent-encode '/', '#', '@' and ':' in "
                           "the user name and password)")
    tls = url.scheme == "smtps"
    return (url.hostname or "127.0.0.1", port or (465 if tls else 25), tls,
            parse_qs(url.query), unquote(url.username or ""), unquote(url.password or ""))


def _send_sync(settings: Settings, message: EmailMessage) -> None:
    host, port, tls, options, user, password = smtp_target(settings.smtp_url)
    context = ssl.create_default_context()
    if options.get("insecure", ["0"])[0] == "1":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    smtp_cls = smtplib.SMTP_SSL if tls else smtplib.SMTP
    kwargs: dict[str, Any] = {"context": context} if tls else {}
    with smtp_cls(host, port, timeout=15, **kwargs) as smtp:
        if not tls and options.get("starttls", ["0"])[0] == "1":
            smtp.starttls(context=context)
        if user:
            smtp.login(user, password)
        smtp.send_message(message)


async def send(settings: Settings, message: EmailMessage) -> None:
    if "From" not in message:
        message["From"] = settings.mail_from
    await asyncio.to_thread(_send_sync, settings, message)


def _one_line(value: Any, limit: int = 200) -> str:
    """A header-safe rendering of a stored value (no line breaks or control characters:
    an order id written before they were refused must not break the mail)."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return " ".join(text.split())[:limit]


def _in_doubt(checkpoint: Any) -> bool:
    from portalq.jobs.checkpoints import past_point_of_no_return

    return past_point_of_no_return(checkpoint)


def build_escalation(settings: Settings, esc: Mapping[str, Any],
                     screenshot: Path | None, files: tuple[Path, ...] = ()) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = (f"[portalq] {_one_line(esc['kind'])}: {_one_line(esc['job_type'])} job "
                      f"{esc['job_id']} (order {_one_line(esc['order_id'])}) needs attention")
    msg["From"] = settings.mail_from
    msg["To"] = ", ".join(settings.admins())
    msg["Message-ID"] = f"<escalation-{esc['id']}@portalq>"
    from portalq.jobs.secrets_at_rest import checkpoint_for_display

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
    ]
    if esc["kind"] == "portal_changed":
        # the portal is paused for every job until a person resumes it (issue 37)
        lines += [
            "The portal showed a page the flow does not know. Its flows are paused and its",
            "jobs wait (no attempts spent); nothing irreversible was done by this job.",
            "Compare the attached screenshot and aria-page.yaml (the page, data left out)",
            "with aria-expected.yaml (what the flow expected); once the flow is fixed or the",
            "page is back:",
            "",
            "To act:",
            f"  portalq portals resume {esc['portal']} --reason '...'"
            "   # or on the console's portals page",
        ]
    elif esc["kind"] == "uncertain":
        lines += [
            "WARNING: the portal may have accepted the submission. Check the portal first,",
            "then say what you found; cancelling would lose a real filing, a blind retry",
            "may file twice.",
            "",
            "To act:",
            f"  portalq jobs show {esc['job_id']}",
            f"  portalq jobs retry {esc['job_id']} --confirmed-filed CONFIRMATION"
            "   # it was filed",
            f"  portalq jobs retry {esc['job_id']} --not-filed"
            "   # it was not: resume from just before the submission",
        ]
    elif _in_doubt(esc.get("checkpoint")):
        # past its submission on a portal with a lookup: it may be filed, so it is never
        # offered for cancel; a retry looks it up before it files again (issue 35)
        lines += ["To act:", f"  portalq jobs show {esc['job_id']}",
                  f"  portalq jobs retry {esc['job_id']}"
                  "   # looks the filing up on the portal first; files only if not found"]
    else:
        lines += ["To act:", f"  portalq jobs show {esc['job_id']}",
                  f"  portalq jobs retry {esc['job_id']}",
                  f"  portalq jobs cancel {esc['job_id']}"]
    link = settings.job_url(esc["job_id"])
    if link:
        lines += ["", f"In the console: {link}"]
    lines += _erasure_note(settings, esc["job_type"])
    shot = None
    if screenshot is not None:
        try:
            shot = screenshot.read_bytes()
        except OSError:   # evidence never decides an outcome, nor whether admins are told
            lines += ["", "(the last screenshot could not be read)"]
    msg.set_content("\n".join(lines) + "\n")
    if shot is not None and screenshot is not None:
        ctype = mimetypes.guess_type(screenshot.name)[0] or "image/png"
        maintype, subtype = ctype.split("/")
        msg.add_attachment(shot, maintype=maintype, subtype=subtype, filename=screenshot.name)
    for path in files:   # the aria snapshots (data left out; scrubbed again with the mail)
        try:
            msg.add_attachment(path.read_text(encoding="utf-8"), subtype="plain",
                               filename=path.name)
        except OSError:
            pass   # evidence never decides whether admins are told
    return msg


def scrub_mail(msg: EmailMessage, secrets: list[str]) -> EmailMessage:
    """``msg`` with every written form of each of ``secrets`` (the job's own values) and
    anything shaped like an SSN/ITIN replaced by ``***`` in every text of it: the subject
    and each text part (plain and HTML), whatever put it there -- a portal echoing the
    number into an error, a flow's checkpoint, a reason, a payload field. Applied to the
    finished message, so no line added to the mail later can escape it."""
    from portalq.jobs.masking import scrub_all

    def clean(text: str) -> str:
        return str(scrub_all(text, secrets))

    if msg["Subject"] is not None:
        msg.replace_header("Subject", clean(str(msg["Subject"])))
    for part in msg.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        text = part.get_content()
        scrubbed = clean(text)
        if scrubbed != text:
            name = part.get_filename()
            extra: dict[str, Any] = ({"disposition": part.get_content_disposition()
                                      or "attachment", "filename": name} if name else {})
            if part.get("Content-ID"):
                extra["cid"] = part["Content-ID"]
            part.set_content(scrubbed, subtype=part.get_content_subtype(), **extra)
    return msg


#: a mail server that is down is tried again this soon (one connection attempt)
SERVER_RETRY = timedelta(seconds=5)


def _poison_delay(send_attempts: int) -> timedelta:
    """A row that cannot be sent (its mail cannot be built, or is refused for good) is
    tried again later and later: 1 min, 2, 4 ... 6 h."""
    return timedelta(seconds=min(60 * 2 ** min(send_attempts, 12), 6 * 3600))


def _server_down(exc: BaseException) -> bool:
    """Is this the mail server's trouble (try the rest later) rather than one message's?"""
    if isinstance(exc, SmtpUrlError):
        return True   # the configuration's trouble: every row would fail alike
    if isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500:
        return isinstance(exc, smtplib.SMTPAuthenticationError)
    return isinstance(exc, OSError | smtplib.SMTPException)
def _erasure_note(settings: Settings, job_type: str) -> list[str]:
    from portalq.jobs import types

    try:
        fields = types.get(job_type).secret_fields
    except Exception:  # noqa: BLE001 - an unknown (removed) type: nothing declared
        return []
    if not fields:
        return []
    return ["", f"Its secret values ({', '.join(fields)}) are erased "
            f"{settings.secret_retention_days:g} days after the failure "
            "(PORTALQ_SECRET_RETENTION_DAYS); a retry after that asks for them again."]


async def _send_due(settings: Settings, conn: Any, *, box: outbox.Box[outbox.R],
                    build: Callable[[outbox.R], Awaitable[EmailMessage]], limit: int) -> Round:
    """Send the due rows of one outbox (escalations or portal notices), one transaction
    per message: the row locked while its mail goes out, marked sent and committed as
    soon as the server took it. A server that is down stops the round (one connection
    attempt); a row that cannot be sent is marked with its error and skipped."""
    if not settings.admins():
        return Round(0, False)
    sent = 0
    done: list[int] = []
    for _ in range(limit):
        async with conn.transaction():
            row = await outbox.next_due(conn, box, skip=done)
            if row is None:
                break
            done.append(row["id"])
            try:
                message = await build(row)
                await send(settings, message)
            except Exception as exc:  # noqa: BLE001 - classified: server down or bad row
                down = _server_down(exc)
                delay = SERVER_RETRY if down else _poison_delay(row["send_attempts"])
                error = (f"{type(exc).__name__}: {_one_line(exc, 400)}" if not isinstance(
                    exc, SmtpUrlError) else str(exc))
                await outbox.mark_failed(conn, box, row["id"], error=error,
                                         next_try_at=clock.now() + delay)
                if not down:
                    metrics.OUTBOX_ERRORS.labels(box.due).inc()
                log.warning("%s %s not sent (%s); next try in %ss", box.due, row["id"],
                            error[:200], int(delay.total_seconds()))
                if down:
                    return Round(sent, True)
                continue
            await outbox.mark_sent(conn, box, row["id"])
            sent += 1
    return Round(sent, False)


@dataclass(frozen=True)
class Round:
    sent: int
    server_down: bool   # stopped because the mail server is unreachable: try again soon


async def send_outbox(settings: Settings, conn: Any) -> tuple[int, int, bool]:
    """Escalations, then portal notices: (escalations sent, notices sent, server down)."""
    esc = await send_due_escalations(settings, conn)
    if esc.server_down:
        return esc.sent, 0, True
    notes = await send_due_notices(settings, conn)
    return esc.sent, notes.sent, notes.server_down


async def next_try(conn: Any) -> Any:
    """When the next unsent message is due (None: nothing waits)."""
    return await outbox.next_try(conn)


async def send_due_escalations(settings: Settings, conn: Any, limit: int = 20) -> Round:
    """Send due escalations (with the job's last screenshot); returns how many went out."""

    async def build(esc: EscalationRow) -> EmailMessage:
        from portalq.jobs.masking import job_secrets

        shots = await outbox.screenshots(conn, esc["job_id"])
        files = tuple(Path(p) for p in await outbox.page_snapshots(conn, esc["job_id"])) \
            if esc["kind"] == "portal_changed" else ()
        job = await outbox.job_secret_columns(conn, esc["job_id"])
        message = scrub_mail(build_escalation(settings, esc, Path(shots[-1]) if shots
                                              else None, files),
                             job_secrets(job) if job is not None else [])
        if "From" not in message:
            message["From"] = settings.mail_from
        # kept in this send's transaction: the console shows the mail itself
        await outbox.store_message(conn, esc["id"], message.as_bytes())
        return message

    sent = await _send_due(settings, conn, box=outbox.ESCALATIONS, build=build, limit=limit)
    metrics.ESCALATIONS.inc(sent.sent)
    return sent


def build_notice(settings: Settings, note: NoticeRow) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = f"[portalq] portal {_one_line(note['portal'])} {_one_line(note['kind'])}"
    msg["To"] = ", ".join(settings.admins())
    msg["Message-ID"] = f"<portal-notice-{note['id']}@portalq>"
    if note["kind"] == NoticeKind.PASSWORD_EXPIRING:
        msg.replace_header("Subject",
                           f"[portalq] portal {_one_line(note['portal'])}: a password expires")
        msg.set_content(f"Portal {note['portal']}: {note['reason']}\n\n"
                        "  portalq accounts list\n  portalq accounts check "
                        f"{note['portal']} <account>\n")
        return msg
    action = ("Its jobs are deferred (no attempts spent) and one probe job tests it "
              "periodically; it resumes by itself when a probe passes."
              if note["kind"] == NoticeKind.PAUSED else "Its deferred jobs run again.")
    other = "resume" if note["kind"] == NoticeKind.PAUSED else "pause"
    msg.set_content(f"Portal {note['portal']} was {note['kind']}: {note['reason']}\n\n"
                    f"{action}\n\n  portalq portals list\n"
                    f"  portalq portals {other} {note['portal']}\n")
    return msg


async def send_due_notices(settings: Settings, conn: Any, limit: int = 20) -> Round:
    """Portal paused/resumed notices (one each per breaker trip), same durability."""

    async def build(note: NoticeRow) -> EmailMessage:
        return build_notice(settings, note)

    return await _send_due(settings, conn, box=outbox.NOTICES, build=build, limit=limit)
