"""The escalation mail as a message a person reads (issue 39 item 7): a plain-text part and
an HTML alternative rendered from one description of the mail, the job's last screenshot
inline in the HTML (a ``cid:`` related part), links to the job's console page and to the
form that answers, actions per kind (never cancel as the obvious one), checkpoints as
lines, and the job's mails threaded. One mail may stand for several escalations that share
a cause (:func:`cause`): an outage that fails twenty jobs is one incident, one mail.

Nothing here scrubs: the caller scrubs the finished message (mailer.scrub_mail), every
part of it, so no text added here can escape that. The HTML template autoescapes: text a
portal wrote (an error, a question) is shown as text, never as markup."""

from __future__ import annotations

import email.utils
import mimetypes
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import jinja2

from portalq.jobs import clock, types
from portalq.jobs.checkpoints import past_point_of_no_return
from portalq.jobs.secrets.sealing import checkpoint_for_display
from portalq.scheduler.config import Settings

HERE = Path(__file__).resolve().parent
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "mail_templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined)

#: kinds that are one job's own business (its question, its review page): never grouped
PER_JOB = frozenset({"question", "approval", "portal_changed"})
#: the screenshot's Content-ID: no digits, so scrubbing (which removes digit runs shaped
#: like an SSN) can never change the ``cid:`` reference in the HTML and break the image
SHOT_CID = "last-screenshot@portalq"
CHECKPOINT_LINES = 40


def one_line(value: Any, limit: int = 200) -> str:
    """A header-safe rendering of a stored value (no line breaks or control characters:
    an order id written before they were refused must not break the mail)."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return " ".join(text.split())[:limit]


def cause(esc: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """What an escalation shares with others of the same incident: (portal, kind, reason
    with its numbers blanked -- attempt counts, ids, times differ between the jobs one
    outage failed). None: it is mailed on its own (a question, an approval)."""
    if esc["kind"] in PER_JOB:
        return None
    reason = re.sub(r"\d+", "#", one_line(esc["reason"], 400)).casefold()
    return str(esc["portal"]), str(esc["kind"]), reason


def checkpoint_lines(checkpoint: Mapping[str, Any]) -> list[str]:
    """A checkpoint as lines a person reads (``submissions / name_request / state:
    submitted``), not a Python dict; at most :data:`CHECKPOINT_LINES` of them."""
    out: list[str] = []

    def scalar(value: Any) -> str:
        return ("-" if value is None or value == "" else "yes" if value is True
                else "no" if value is False else str(value))

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for key in sorted(value, key=str):
                walk(f"{prefix} / {key}" if prefix else str(key), value[key])
        elif isinstance(value, list | tuple) and value and any(
                isinstance(v, Mapping | list | tuple) for v in value):
            # nested: a line per item, never a Python list printed (issue 48)
            for i, item in enumerate(value, 1):
                walk(f"{prefix} #{i}", item)
        else:
            shown = ("-" if value in ({}, [], ()) else
                     ", ".join(map(scalar, value)) if isinstance(value, list | tuple) else
                     scalar(value))
            out.append(f"{prefix}: {one_line(shown, 160)}")

    walk("", dict(checkpoint))
    if len(out) > CHECKPOINT_LINES:
        out = out[:CHECKPOINT_LINES] + [f"... and {len(out) - CHECKPOINT_LINES} more"]
    return out


@dataclass
class Action:
    label: str                  # what a person does ("It was filed")
    command: str | None = None  # the CLI line that does it
    link: str | None = None     # the console page (and form) that does it
    note: str = ""              # what it does


@dataclass
class Mail:
    """One mail, described once; the text and the HTML part are both rendered from it."""

    subject: str
    headline: str
    warning: str = ""
    facts: list[tuple[str, str]] = field(default_factory=list)
    checkpoint: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)    # an incident's jobs
    job_link: str | None = None
    footer: list[str] = field(default_factory=list)
    shot_caption: str = ""


def _has_names(job_type: str) -> bool:
    """Does the job type's payload name the names a registry examines (a name request)?"""
    try:
        return "names" in types.get(job_type).payload_model.model_fields
    except Exception:  # noqa: BLE001 - an unknown (removed) type: no such field known
        return False


def _in_doubt(checkpoint: Any) -> bool:
    return past_point_of_no_return(checkpoint)


def subject(esc: Mapping[str, Any]) -> str:
    """Why, what, where and what is wanted: ``[portalq] uncertain: obtain_ein job 7 for
    ORD-1001 needs a decision: filed on irs_ein or not?``."""
    kind, portal = one_line(esc["kind"], 30), one_line(esc["portal"], 60)
    why = one_line(esc["reason"], 90)
    tail = {"question": f"needs an answer on {portal}",
            "approval": f"needs approval at {portal}'s review page",
            "uncertain": f"needs a decision: filed on {portal} or not?",
            "business": f"was refused by {portal}: {why}",
            "attempts": f"failed on {portal}: {why}",
            "probe": f"failed as {portal}'s probe: {why}",
            "crashing": f"keeps crashing its worker on {portal}",
            "portal_changed": f"met a page it does not know: {portal} is paused"}.get(
        kind, f"on {portal}: {why}")
    return one_line(f"[portalq] {kind}: {one_line(esc['job_type'], 60)} job {esc['job_id']} "
                    f"for {one_line(esc['order_id'], 80)} {tail}", 200)


def actions(settings: Settings, esc: Mapping[str, Any]) -> list[Action]:
    """What a person can do about this escalation, the recommended first."""
    jid, kind = int(esc["job_id"]), esc["kind"]
    page = settings.job_url(jid)

    def at(anchor: str) -> str | None:
        return f"{page}#{anchor}" if page else None

    if kind == "question":
        return [Action("Answer the question", f"portalq jobs answer {jid} --code ...",
                       at("answer"), "the waiting flow goes on with the answer")]
    if kind == "approval":
        return [Action("Approve: submit what was reviewed", f"portalq jobs approve {jid}",
                       at("approve"), "it runs again and submits"),
                Action("Reject: file nothing", f"portalq jobs reject {jid} --note ...",
                       at("reject"), "the job ends, nothing is submitted")]
    if kind == "portal_changed":
        # the portal is paused for every job until a person resumes it (issue 37)
        base = settings.console_url.strip().rstrip("/")
        return [Action("Resume the portal once the flow is fixed or the page is back",
                       f"portalq portals resume {one_line(esc['portal'], 60)} --reason '...'",
                       f"{base}/portals" if base else None,
                       "its waiting jobs run at once; nothing was submitted by this job")]
    if kind == "uncertain":
        return [Action("It was filed", f"portalq jobs retry {jid} --confirmed-filed "
                       "CONFIRMATION", at("confirm-filed"),
                       "check the portal first; completes the job with its confirmation"),
                Action("It was not filed", f"portalq jobs retry {jid} --not-filed",
                       at("not-filed"), "resumes from just before the submission")]
    if esc.get("status") not in (None, "failed"):
        return [Action("Nothing yet: it goes on by itself", f"portalq jobs show {jid}", page,
                       "look at the job if it stays")]
    if kind == "business" and _has_names(esc["job_type"]):
        # the registry refused the names: the same names are refused again (the console
        # says so too: a retry with the same names reads the finished request again)
        return [Action("Choose new names, then retry",
                       f"portalq jobs retry {jid} --payload-patch "
                       "'{\"names\": [\"New Name Ltd.\"]}'", at("edit"),
                       "a new name request is made for them; a retry with the same names "
                       "is refused the same way"),
                Action("Cancel, only if the order is withdrawn", f"portalq jobs cancel {jid}",
                       at("cancel"), "files nothing")]
    if _in_doubt(esc.get("checkpoint")):
        # past its submission: it may be filed, so it is never offered for cancel; a
        # retry looks it up before it files again (issue 35)
        return [Action("Retry", f"portalq jobs retry {jid}", at("retry"),
                       "looks the filing up on the portal first; files only if not found")]
    return [Action("Retry once the cause is gone", f"portalq jobs retry {jid}", at("retry"),
                   "runs the job again"),
            Action("Cancel, only if the order is withdrawn", f"portalq jobs cancel {jid}",
                   at("cancel"), "files nothing")]


def describe(settings: Settings, esc: Mapping[str, Any]) -> Mail:

    jid = esc["job_id"]
    mail = Mail(subject=subject(esc), job_link=settings.job_url(jid),
                headline=f"Job {jid} ({esc['job_type']}) for order {esc['order_id']} on portal "
                         f"{esc['portal']} needs a person.",
                facts=[("Why", f"{esc['kind']} - {esc['reason']}"),
                       ("Attempts", f"{esc['attempts']} of {esc['max_attempts']}"),
                       ("Last error", str(esc.get("last_error") or "-"))],
                checkpoint=checkpoint_lines(checkpoint_for_display(esc.get("checkpoint"))),
                actions=actions(settings, esc))
    if esc["kind"] == "portal_changed":
        mail.warning = ("The portal showed a page the flow does not know. Its flows are "
                        "paused and its jobs wait (no attempts spent). Compare the attached "
                        "screenshot and aria-page.yaml (the page, data left out) with "
                        "aria-expected.yaml (what the flow expected).")
    if esc["kind"] == "uncertain":
        mail.warning = ("The portal may have accepted the submission. Check the portal "
                        "first, then say what you found: cancelling would lose a real "
                        "filing, a blind retry may file twice.")
    return mail


def describe_incident(settings: Settings, escs: Sequence[Mapping[str, Any]], *,
                      reply_subject: str | None = None) -> Mail:
    """One mail for escalations that share a cause: the cause once, then each job with its
    link and its own recommended action. With ``reply_subject``: the later jobs of a cause
    already mailed, as a reply in its thread ("3 more jobs ...")."""
    first = escs[0]
    portal, kind = one_line(first["portal"], 60), one_line(first["kind"], 30)
    base = settings.console_url.strip().rstrip("/")
    jobs = []
    for esc in escs:
        acts = actions(settings, esc)
        jobs.append({"id": esc["job_id"], "type": esc["job_type"], "order": esc["order_id"],
                     "attempts": f"{esc['attempts']} of {esc['max_attempts']}",
                     "error": str(esc.get("last_error") or "-"),
                     "link": settings.job_url(esc["job_id"]),
                     "action": acts[0].command or "", "action_label": acts[0].label})
    mail = Mail(subject=one_line(f"[portalq] {kind}: {len(escs)} jobs on {portal}, one "
                                 f"cause: {one_line(first['reason'], 100)}", 200),
                headline=f"{len(escs)} jobs on portal {portal} need a person, for one cause.",
                facts=[("Why", f"{first['kind']} - {first['reason']}"),
                       ("Jobs", str(len(escs)))],
                jobs=jobs)
    if reply_subject is not None:
        more = f"{len(escs)} more job{'s' if len(escs) > 1 else ''}"
        mail.subject = reply_subject
        mail.headline = (f"{more} on portal {portal} for the same cause as the first mail "
                         "of this thread.")
        mail.facts[1] = ("Jobs", f"{more} (the earlier ones: the mails above)")
    if base:
        mail.actions.append(Action(f"All failed jobs on {portal}", None,
                                   f"{base}/jobs?status=failed&portal={portal}",
                                   "select them there for one bulk action"))
    if kind == "uncertain":
        mail.warning = ("The portal may have accepted these submissions. Check each on "
                        "the portal first: cancelling would lose a real filing, a blind "
                        "retry may file twice.")
    return mail


def render(settings: Settings, mail: Mail, *, message_id: str, thread_root: str | None,
           screenshot: Path | None) -> EmailMessage:
    """The message: multipart/alternative of text and HTML (the HTML with the screenshot
    as a related part), threaded under ``thread_root`` (the job's first escalation mail)."""
    shot = None
    if screenshot is not None:
        try:
            shot = screenshot.read_bytes()
        except OSError:   # evidence never decides an outcome, nor whether admins are told
            mail.footer.append("(the last screenshot could not be read)")
    msg = EmailMessage()
    msg["Subject"] = mail.subject
    msg["From"] = settings.mail_from
    msg["To"] = ", ".join(settings.admins())
    msg["Date"] = email.utils.format_datetime(clock.now())   # RFC 5322 requires one
    msg["Message-ID"] = message_id
    if thread_root and thread_root != message_id:
        msg["In-Reply-To"] = thread_root
        msg["References"] = thread_root
    msg.set_content(_text(mail))
    msg.add_alternative(_env.get_template("escalation.html").render(
        mail=mail, shot_cid=SHOT_CID if shot is not None else None), subtype="html")
    if shot is not None and screenshot is not None:
        ctype = mimetypes.guess_type(screenshot.name)[0] or "image/png"
        maintype, subtype = ctype.split("/")
        html = msg.get_body(preferencelist=("html",))
        assert html is not None   # added just above
        html.add_related(shot, maintype=maintype, subtype=subtype, cid=f"<{SHOT_CID}>",
                         filename=screenshot.name, disposition="inline")
    return msg


def _text(mail: Mail) -> str:
    lines = [*textwrap.wrap(mail.headline, 76), ""]
    if mail.warning:
        lines += [*textwrap.wrap(f"WARNING: {mail.warning}", 76), ""]
    lines += [f"{k + ':':<12}{v}" for k, v in mail.facts]
    if mail.checkpoint:
        lines += ["", "Checkpoint:"] + [f"  {c}" for c in mail.checkpoint]
    if mail.jobs:
        lines += ["", "Jobs:"]
        for j in mail.jobs:
            lines += [f"  job {j['id']} ({j['type']}) order {j['order']}, attempts "
                      f"{j['attempts']}: {j['error']}",
                      f"    {j['action_label']}: {j['action']}"]
            if j["link"]:
                lines.append(f"    {j['link']}")
    if mail.actions:
        lines += ["", "To act:"]
        for a in mail.actions:
            lines.append(f"  {a.label} ({a.note})" if a.note else f"  {a.label}")
            if a.command:
                lines.append(f"    {a.command}")
            if a.link:
                lines.append(f"    {a.link}")
    if mail.job_link:
        lines += ["", f"In the console: {mail.job_link}"]
    lines += [line for f in mail.footer for line in ("", f)]
    return "\n".join(lines) + "\n"
