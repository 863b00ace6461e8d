"""What a flow gets from whoever runs it (the scheduler implements this protocol).

Flows know nothing of the service: they see the job's data, a durable checkpoint store,
a browser to open a fresh context in, a folder for evidence, and the base URLs of the
portals. Outcomes other than success are signalled by raising the exceptions in
:mod:`jobs.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from portalq.jobs.submission import Submission


class FlowContext(Protocol):
    job_id: int
    job_type: str
    order_id: str
    portal: str
    attempt: int
    payload: Mapping[str, Any]
    #: checkpoints reached by earlier attempts (and this one), e.g.
    #: {"nr_for_name": "Acme Ltd", "submissions": {...}, "step": "review page"}
    checkpoints: Mapping[str, Any]
    #: where this attempt's screenshots/traces go (created by the runner)
    artifacts_dir: Path
    #: base URL per portal code, e.g. {"irs_ein": "http://127.0.0.1:8765/irs"}
    portal_urls: Mapping[str, str]

    async def save_checkpoint(self, **data: Any) -> None:
        """Merge ``data`` into the job's checkpoints, durably, before returning."""

    def submission(self, name: str, reference: str | None = None) -> Submission:
        """The point of no return named ``name`` (jobs/submission.py): its earlier state,
        and ``async with`` it around the click that files; ``confirmed(...)`` after."""

    async def step(self, text: str) -> None:
        """Report where the flow is ("review page"); the status view shows it."""

    async def account(self) -> Any:
        """One of the portal's accounts, held for this job (``portals.flows.signin.
        HeldAccount``: credentials, kept session); None when the portal has no account
        configured. Raises ``DeferUntil`` when every account is paused or in use."""

    async def approve(self, review: str, evidence: Any = None) -> None:
        """At the review page, before the point of no return: returns if this review is
        approved (or no approval is asked for); else the job waits for an admin (raises
        ``DeferUntil``). ``evidence``: an async callable keeping the page's screenshot."""

    async def ask(self, question: str) -> str:
        """Ask a person (an e-mailed code, a CAPTCHA) and wait for the answer."""

    async def new_browser_context(self) -> Any:
        """A fresh Playwright ``BrowserContext`` (tracing per playwright.config)."""

    def secrets(self) -> list[str]:
        """Strings that must never appear in artifacts, logs or errors (SSNs, passwords)."""

    async def store_document(self, name: str, content_type: str, data: bytes) -> None:
        """Keep an output document (CP 575 PDF, certificate) on the job, durably."""

    async def documents_of(self, job_id: int) -> list[tuple[str, str, bytes]]:
        """(name, content_type, bytes) of the documents another job stored (for ``deliver``)."""

    async def send_mail(self, message: Any) -> None:
        """Send an ``email.message.EmailMessage`` through the configured SMTP server."""
