"""What ``deliver`` carries: where to, and which stored documents."""

from __future__ import annotations

from pydantic import Field

from portalq.portals.payloads import Model


class DocumentRef(Model):
    source_job_id: int = Field(gt=0, le=2**63 - 1,
                               description="the job whose stored documents to send")
    name: str | None = Field(default=None, description="only this document (default: all)")


class DeliverPayload(Model):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    subject: str = "Your documents"
    body: str = "Please find your documents attached."
    documents: list[DocumentRef] = Field(min_length=1)
