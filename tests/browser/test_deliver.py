"""deliver: documents of earlier jobs mailed through a real (local) SMTP server."""

from __future__ import annotations

import pytest

from portalq.jobs.errors import BusinessError, RetryableError
from portalq.portals.deliver.flow import deliver
from tests.ports import free_port

PDF = b"%PDF-1.4\n% test document\n"


def deliver_payload(*refs: dict, to: str = "client@example.test") -> dict:
    return {"to": to, "subject": "Your company documents", "body": "Attached.",
            "documents": list(refs)}


@pytest.mark.browser
def test_delivers_the_certificate_a_filing_job_stored(run, make_ctx, mailbox):
    # a filing job's stored certificate (Delaware's flow stores none since no page known to
    # exist hands it out, issue 53: the document as a filing job keeps it)
    number = "7100037"
    job = make_ctx("deliver", deliver_payload({"source_job_id": 21}))
    job.documents.put(21, f"Certificate_{number}.pdf", "application/pdf", PDF)
    before = len(mailbox.messages)

    result = run(deliver(job))

    assert result["sent_to"] == "client@example.test"
    assert result["documents"] == [f"Certificate_{number}.pdf"]
    assert len(mailbox.messages) == before + 1
    assert mailbox.envelopes[-1].rcpt_tos == ["client@example.test"]
    msg = mailbox.parsed()
    assert msg["Subject"] == "Your company documents" and msg["Message-ID"] == result["message_id"]
    [attachment] = list(msg.iter_attachments())
    assert attachment.get_filename() == f"Certificate_{number}.pdf"
    assert attachment.get_content().startswith(b"%PDF-")


def test_several_sources_and_a_named_document(run, make_ctx, mailbox):
    job = make_ctx("deliver", deliver_payload({"source_job_id": 11},
                                              {"source_job_id": 12, "name": "CP575_1.pdf"}))
    job.documents.put(11, "supplied_signed.pdf", "application/pdf", PDF)   # input, not output
    job.documents.put(11, "Certificate_7100037.pdf", "application/pdf", PDF)
    job.documents.put(12, "CP575_1.pdf", "application/pdf", PDF)
    job.documents.put(12, "notes.txt", "text/plain", b"not this one")
    result = run(deliver(job))
    assert result["documents"] == ["Certificate_7100037.pdf", "CP575_1.pdf"]
    names = [a.get_filename() for a in mailbox.parsed().iter_attachments()]
    assert names == ["Certificate_7100037.pdf", "CP575_1.pdf"]


def test_a_retry_after_sending_does_not_send_again(run, make_ctx, mailbox):
    job = make_ctx("deliver", deliver_payload({"source_job_id": 21}))
    job.documents.put(21, "a.pdf", "application/pdf", PDF)
    first = run(deliver(job))
    count = len(mailbox.messages)
    assert run(deliver(job.retry())) == first
    assert len(mailbox.messages) == count


def test_missing_documents_are_retryable(run, make_ctx):
    job = make_ctx("deliver", deliver_payload({"source_job_id": 31, "name": "x.pdf"}))
    with pytest.raises(RetryableError, match="no document 'x.pdf'"):
        run(deliver(job))


def test_refused_recipient_is_a_business_error(run, make_ctx):
    job = make_ctx("deliver", deliver_payload({"source_job_id": 41}, to="refuse@example.test"))
    job.documents.put(41, "a.pdf", "application/pdf", PDF)
    with pytest.raises(BusinessError, match="recipient refused"):
        run(deliver(job))
    assert "sent_at" not in job.checkpoints


def test_mail_server_down_is_retryable_and_the_resend_keeps_the_message_id(run, make_ctx,
                                                                            mailbox):
    job = make_ctx("deliver", deliver_payload({"source_job_id": 51}),
                   smtp=("127.0.0.1", free_port()))
    job.documents.put(51, "a.pdf", "application/pdf", PDF)
    with pytest.raises(RetryableError, match="mail not sent"):
        run(deliver(job))
    message_id = job.checkpoints["message_id"]
    retry = job.retry()
    retry.smtp = (mailbox.host, mailbox.port)
    assert run(deliver(retry))["message_id"] == message_id
    assert mailbox.parsed()["Message-ID"] == message_id
