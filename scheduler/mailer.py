"""Escalation mail over SMTP (smtplib; TLS and auth from PORTALQ_SMTP_URL).

Durability: escalation rows are written in the same transaction as the job's ``failed``
transition (a trigger NOTIFYs ``portalq_outbox``, and the leader sends at once); each
message is sent in a transaction of its own, holding its row's lock while it goes out and
committed as sent as soon as the server accepted it. A mail server that is down leaves
the row due again a few seconds later. The one window where a mail can go twice is a
crash after the SMTP server accepted that one message and before its commit; the
Message-ID is stable (``<escalation-ID.TOKEN@portalq>``, scheduler/mail_threads.py) so
mail clients collapse such a duplicate. A row whose mail cannot be built, or that the server
refuses for good (5xx), is marked with its error and tried again later with a growing
delay; the other rows go on.

One mail per incident: due escalations that share a cause (one portal, one kind, one
reason but for its numbers) are locked together and go as one mail that lists their jobs,
marked sent together in its transaction; while that cause keeps recurring, its later jobs
go as replies in that mail's thread (scheduler/mail_threads.py). What a mail looks like:
scheduler/mail_compose.py.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import smtplib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from portalq.jobs import clock, types
from portalq.jobs.kinds import NoticeKind
from portalq.jobs.operations import outbox
from portalq.jobs.rows import EscalationRow, NoticeRow
from portalq.jobs.secrets.redaction import job_secrets, scrub_all
from portalq.scheduler import mail_compose, mail_threads, metrics
from portalq.scheduler.config import Settings
from portalq.scheduler.mail_threads import Thread, message_id

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
    if "Date" not in message:
        message["Date"] = email.utils.format_datetime(clock.now())
    await asyncio.to_thread(_send_sync, settings, message)


def _one_line(value: Any, limit: int = 200) -> str:
    return mail_compose.one_line(value, limit)


def build_escalation(settings: Settings, esc: Mapping[str, Any], screenshot: Path | None,
                     files: tuple[Path, ...] = (), *, thread_root: str | None = None,
                     footer: list[str] | None = None) -> EmailMessage:
    """One escalation's mail (text and HTML, the screenshot inline), threaded under the
    Message-ID ``thread_root`` (the job's first escalation's); ``files`` attached (a changed
    portal's aria snapshots). The caller scrubs it (:func:`scrub_mail`), attachments
    included."""
    mail = mail_compose.describe(settings, esc)
    mail.footer += (footer or []) + _erasure_note(settings, esc["job_type"])
    msg = mail_compose.render(settings, mail,
                              message_id=message_id(esc["id"], esc.get("mail_token")),
                              thread_root=thread_root, screenshot=screenshot)
    for path in files:   # the aria snapshots (data left out; scrubbed again with the mail)
        try:
            msg.add_attachment(path.read_text(encoding="utf-8"), subtype="plain",
                               filename=path.name)
        except OSError:   # evidence never decides whether admins are told
            pass
    return msg


def build_incident(settings: Settings, escs: list[EscalationRow],
                   screenshot: Path | None, *, thread: Thread | None = None) -> EmailMessage:
    """One mail for escalations that share a cause (mail_compose.cause): it lists the
    jobs, each with its link and action; its Message-ID is its first escalation's. With
    ``thread``: the cause's later jobs (one or more), a reply in the thread it started."""
    if len(escs) == 1 and thread is None:
        raise ValueError("one escalation is mailed with build_escalation")
    reply = None
    if thread is not None:
        reply = thread.reply_subject(mail_compose.subject(escs[0]))
    mail = mail_compose.describe_incident(settings, escs, reply_subject=reply)
    notes = {line for e in escs for line in _erasure_note(settings, e["job_type"])}
    mail.footer += sorted(notes)
    return mail_compose.render(settings, mail,
                               message_id=message_id(escs[0]["id"], escs[0]["mail_token"]),
                               thread_root=thread.message_id if thread else None,
                               screenshot=screenshot)


def scrub_mail(msg: EmailMessage, secrets: list[str]) -> EmailMessage:
    """``msg`` with every written form of each of ``secrets`` (the job's own values) and
    anything shaped like an SSN/ITIN replaced by ``***`` in every text of it: the subject
    and each text part (plain and HTML), whatever put it there -- a portal echoing the
    number into an error, a flow's checkpoint, a reason, a payload field. Applied to the
    finished message, so no line added to the mail later can escape it."""

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


#: an approval's mail waits this long at most for its attempt's evidence (the review
#: page's screenshot, recorded as the attempt ends), looking again this often
EVIDENCE_WAIT = timedelta(seconds=60)
EVIDENCE_LOOK = timedelta(seconds=1)
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
    try:
        fields = types.get(job_type).secret_fields
    except Exception:  # noqa: BLE001 - an unknown (removed) type: nothing declared
        return []
    if not fields:
        return []
    return [f"Its secret values ({', '.join(fields)}) are erased "
            f"{settings.secret_retention_days:g} days after the failure "
            "(PORTALQ_SECRET_RETENTION_DAYS); a retry after that asks for them again."]


async def _send_due(settings: Settings, conn: Any, *, box: outbox.Box[outbox.R],
                    build: Callable[[list[outbox.R]], Awaitable[EmailMessage]], limit: int,
                    gather: Callable[[outbox.R, list[int]], Awaitable[list[outbox.R]]]
                    | None = None) -> Round:
    """Send the due rows of one outbox (escalations or portal notices), one transaction
    per message: the rows locked while their mail goes out, marked sent and committed as
    soon as the server took it. ``gather`` adds to a row the other due rows its one mail
    stands for (locked in the same transaction, marked sent with it). A server that is
    down stops the round (one connection attempt); rows that cannot be sent are marked
    with their error and skipped. ``Round.sent`` counts rows, not messages."""
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
            rows = [row]
            try:
                if gather is not None:
                    rows = await gather(row, done)
                    if not rows:
                        continue   # held back (not due yet), nothing sent nor counted
                    done.extend(r["id"] for r in rows[1:])
                message = await build(rows)
                await send(settings, message)
            except Exception as exc:  # noqa: BLE001 - classified: server down or bad row
                down = _server_down(exc)
                error = (f"{type(exc).__name__}: {_one_line(exc, 400)}" if not isinstance(
                    exc, SmtpUrlError) else str(exc))
                now = clock.now()   # one instant: the rows of one mail stay due together
                for r in rows:
                    delay = SERVER_RETRY if down else _poison_delay(r["send_attempts"])
                    await outbox.mark_failed(conn, box, r["id"], error=error,
                                             next_try_at=now + delay)
                if not down:
                    metrics.OUTBOX_ERRORS.labels(box.due).inc()
                log.warning("%s %s not sent (%s); next try in %ss", box.due, row["id"],
                            error[:200], int(delay.total_seconds()))
                if down:
                    return Round(sent, True)
                continue
            for r in rows:
                await outbox.mark_sent(conn, box, r["id"])
            sent += len(rows)
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
    """Send due escalations (with the job's last screenshot); returns how many rows went
    out. Due escalations that share a cause (mail_compose.cause: one portal, one kind, one
    reason but for its numbers) go as one mail listing their jobs -- one outage, one mail
    -- and are marked sent together in its transaction. While that cause keeps recurring,
    its later jobs go as replies in the first mail's thread (scheduler/mail_threads.py)."""
    #: a mail's first escalation -> the thread its cause is mailed in (a reply in it)
    threads: dict[int, Thread] = {}

    async def gather(first: EscalationRow, skip: list[int]) -> list[EscalationRow]:
        if first["kind"] == "approval" and first["send_attempts"] == 0:
            # written while its attempt runs; the review page's screenshot is recorded when
            # the attempt ends: the mail waits for it (issue 48), a while at most
            until = first["created_at"] + EVIDENCE_WAIT
            now = clock.now()
            if until > now and not await outbox.attempt_evidence(conn, first["job_id"],
                                                                 first["attempt"]):
                await outbox.hold(conn, first["id"], min(until, now + EVIDENCE_LOOK))
                return []
        key = mail_compose.cause(first)
        if key is None:
            return [first]
        thread = await mail_threads.open_thread(settings, conn, first)
        wait = settings.mail_reply_seconds if thread else settings.mail_gather_seconds
        until = first["created_at"] + timedelta(seconds=wait)
        if (thread is not None or first["status"] == "failed") \
                and first["send_attempts"] == 0 and until > clock.now():
            # the first failure of a possible incident waits a while for the rest of it (a
            # job that goes on -- waiting on a registry -- is told about at once); the later
            # jobs of a cause already mailed wait longer, to go as one reply in its thread
            await outbox.hold(conn, first["id"], until)
            return []
        like = await outbox.due_like(conn, first, skip=skip)
        threads.pop(first["id"], None)
        if thread is not None:
            threads[first["id"]] = thread
        return [first] + [e for e in like if mail_compose.cause(e) == key]

    async def build(escs: list[EscalationRow]) -> EmailMessage:

        secrets: list[str] = []
        for esc in escs:
            job = await outbox.job_secret_columns(conn, esc["job_id"])
            secrets += job_secrets(job) if job is not None else []
        approval = escs[0]["kind"] == "approval"   # its attempt's own: the review page
        shots = await outbox.screenshots(conn, escs[0]["job_id"],
                                         escs[0]["attempt"] if approval else None)
        shot = Path(shots[-1]) if shots else None
        thread = threads.get(escs[0]["id"])
        if thread is not None:   # a cause mailed lately: a reply in its thread
            message = build_incident(settings, escs, shot, thread=thread)
            await outbox.in_thread(conn, [e["id"] for e in escs], thread.root)
        elif len(escs) == 1:
            esc = escs[0]
            files = tuple(Path(p) for p in await outbox.page_snapshots(conn, esc["job_id"])) \
                if esc["kind"] == "portal_changed" else ()
            first = await outbox.first_escalation(conn, esc["job_id"])
            root = mail_threads.message_id(*first) if first else None
            message = build_escalation(settings, esc, shot, files, thread_root=root,
                                       footer=["(no screenshot of the review page was "
                                               "recorded)"] if approval and not shot else [])
            if mail_compose.cause(esc) is not None:   # it starts its cause's thread
                await outbox.in_thread(conn, [esc["id"]], esc["id"])
        else:
            message = build_incident(settings, escs, shot)
            await outbox.in_thread(conn, [e["id"] for e in escs], escs[0]["id"])
        message = scrub_mail(message, secrets)
        if "From" not in message:
            message["From"] = settings.mail_from
        # kept in this send's transaction: the console shows the mail itself (an incident's
        # mail is kept on each escalation it stands for)
        raw = message.as_bytes()
        for esc in escs:
            await outbox.store_message(conn, esc["id"], raw)
        return message

    sent = await _send_due(settings, conn, box=outbox.ESCALATIONS, build=build, limit=limit,
                           gather=gather)
    metrics.ESCALATIONS.inc(sent.sent)
    return sent


def build_notice(settings: Settings, note: NoticeRow) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = f"[portalq] portal {_one_line(note['portal'])} {_one_line(note['kind'])}"
    msg["To"] = ", ".join(settings.admins())
    msg["Date"] = email.utils.format_datetime(clock.now())   # RFC 5322 requires one
    msg["Message-ID"] = mail_threads.notice_message_id(note["id"], note.get("mail_token"))
    kind = NoticeKind(note["kind"])   # the row's word as the enum (a str Literal is no enum)
    if kind == NoticeKind.PASSWORD_EXPIRING:
        msg.replace_header("Subject",
                           f"[portalq] portal {_one_line(note['portal'])}: a password expires")
        msg.set_content(f"Portal {note['portal']}: {note['reason']}\n\n"
                        "  portalq accounts list\n  portalq accounts check "
                        f"{note['portal']} <account>\n")
        return msg
    action = ("Its jobs are deferred (no attempts spent) and one probe job tests it "
              "periodically; it resumes by itself when a probe passes."
              if kind == NoticeKind.PAUSED else "Its deferred jobs run again.")
    other = "resume" if kind == NoticeKind.PAUSED else "pause"
    msg.set_content(f"Portal {note['portal']} was {note['kind']}: {note['reason']}\n\n"
                    f"{action}\n\n  portalq portals list\n"
                    f"  portalq portals {other} {note['portal']}\n")
    return msg


async def send_due_notices(settings: Settings, conn: Any, limit: int = 20) -> Round:
    """Portal paused/resumed notices (one each per breaker trip), same durability."""

    async def build(notes: list[NoticeRow]) -> EmailMessage:
        return build_notice(settings, notes[0])

    return await _send_due(settings, conn, box=outbox.NOTICES, build=build, limit=limit)
