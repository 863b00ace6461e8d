"""``deliver``: mail the documents other jobs stored (CP 575, certificates). No browser.

Checkpoints: ``message_id`` (fixed before the first send, so a resend after a crash carries
the same Message-ID and mail clients show one message) and ``sent_at`` once the SMTP server
accepted it — a retry after that returns the result without sending again.
The sender (From) is the service's business: ``ctx.send_mail`` sets it when missing.
"""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from portalq.jobs import clock
from portalq.jobs.business import supplied
from portalq.jobs.errors import BusinessError, RetryableError
from portalq.portals.deliver.payload import DeliverPayload
from portalq.portals.flows.context import FlowContext


async def collect(ctx: FlowContext[DeliverPayload], p: DeliverPayload
                  ) -> list[tuple[str, str, bytes]]:
    """The attachments, in payload order; missing ones are an error (retried: the source
    job may not have finished)."""
    found: list[tuple[str, str, bytes]] = []
    for ref in p.documents:
        docs = await ctx.documents_of(ref.source_job_id)
        if ref.name is not None:
            docs = [d for d in docs if d[0] == ref.name]
        else:   # outputs only, never what the business supplied with the job
            docs = [d for d in docs if not supplied.is_supplied(d[0])]
        if not docs:
            what = f"document {ref.name!r}" if ref.name else "documents"
            raise RetryableError(f"job {ref.source_job_id} has no {what} (yet)")
        found.extend(d for d in docs if d[0] not in {f[0] for f in found})
    return found


def build_message(p: DeliverPayload, documents: list[tuple[str, str, bytes]],
                  message_id: str) -> EmailMessage:
    msg = EmailMessage()
    msg["To"] = p.to
    msg["Subject"] = p.subject
    msg["Message-ID"] = message_id
    msg.set_content(p.body)
    for name, content_type, data in documents:
        maintype, _, subtype = (content_type or "application/octet-stream").partition("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype or "octet-stream",
                           filename=name)
    return msg


async def deliver(ctx: FlowContext[DeliverPayload]) -> dict[str, Any]:
    p = ctx.args
    cp = ctx.checkpoints
    if cp.get("sent_at"):
        sent = cp.get("documents")
        return {"sent_to": cp.get("sent_to", p.to),
                "documents": list(sent) if isinstance(sent, list) else [],
                "message_id": cp.get("message_id")}
    await ctx.step("collecting documents")
    documents = await collect(ctx, p)
    message_id = str(cp.get("message_id") or make_msgid(domain="portalq.local"))
    await ctx.save_checkpoint(message_id=message_id, step="sending")
    msg = build_message(p, documents, message_id)
    try:
        await ctx.send_mail(msg)
    except smtplib.SMTPRecipientsRefused as exc:
        raise BusinessError(f"recipient refused: {p.to} ({_first(exc.recipients)})") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise RetryableError(f"mail not sent: {type(exc).__name__}: {exc}") from None
    names = [d[0] for d in documents]
    await ctx.save_checkpoint(sent_at=clock.now().isoformat(), sent_to=p.to, documents=names)
    return {"sent_to": p.to, "documents": names, "message_id": message_id}


def _first(recipients: dict[str, Any]) -> str:
    for code, text in recipients.values():
        return f"{code} {text.decode(errors='replace') if isinstance(text, bytes) else text}"
    return ""
