"""portalq.scheduler.mailer.scrub_mail (issue 39): the finished escalation mail holds no written
form of the job's secret -- the ones shaped like an SSN and, when the job's own value is
known, any other spacing of its digits -- in its subject, text, HTML or a text attachment."""

from __future__ import annotations

import re

from portalq.scheduler.config import Settings
from portalq.scheduler.mailer import build_escalation, scrub_mail

SSN = "123-45-6789"


def _esc(text: str) -> dict[str, object]:
    return {"id": 1, "job_id": 7, "job_type": "obtain_ein", "order_id": f"ORD {text}",
            "portal": "irs_ein", "kind": "business", "reason": f"refused {text}",
            "attempts": 1, "max_attempts": 5, "last_error": f"echoed {text}",
            "checkpoint": {"step": f"typed {text}"}}


def _texts(msg) -> str:
    out = [str(v) for _k, v in msg.items()]
    for part in msg.walk():
        if part.get_content_maintype() == "text":
            out.append(part.get_content())
    return "\n".join(out)


def test_every_form_of_the_ssn_shape_is_scrubbed_without_knowing_the_value():
    for form in (SSN, "123456789", "123 45 6789", "123.45.6789"):
        msg = scrub_mail(build_escalation(Settings(admin_emails="o@x.org"), _esc(form),
                                          None), [])
        text = _texts(msg)
        assert form not in text and text.count("***") >= 4, form
        assert "Job 7 (obtain_ein)" in text   # the rest of the mail is untouched


def test_other_spacings_go_when_the_jobs_value_is_known():
    odd = "1 2 3 - 4 5 - 6 7 8 9"
    msg = build_escalation(Settings(admin_emails="o@x.org"), _esc(odd), None)
    msg.add_alternative(f"<p>{odd}</p>", subtype="html")
    msg.add_attachment(f"note {odd}", filename="note.txt")
    assert "123456789" in re.sub(r"\D", "", _texts(msg))
    scrubbed = scrub_mail(msg, [SSN])
    assert "123456789" not in re.sub(r"\D", "", _texts(scrubbed))
    assert [p.get_filename() for p in scrubbed.iter_attachments()] == ["note.txt"]
