"""What a flow gets from whoever runs it (the scheduler implements this protocol).

Flows know nothing of the service: they see the job's data, a durable checkpoint store,
a browser to open a fresh context in, a folder for evidence, and the base URLs of the
portals. Outcomes other than success are signalled by raising the exceptions in
:mod:`jobs.errors`.

A flow names its job type's payload model, and gets that model's instance as ``ctx.args``::

    async def obtain_ein(ctx: FlowContext[ObtainEinPayload]) -> dict[str, str]:
        ctx.args.responsible_party.ssn        # validated, its secret fields opened

A helper that does not read the payload takes ``FlowContext[BaseModel]`` (the parameter is
covariant, so any flow's context fits).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, JsonValue

from portalq.jobs.submission import Submission

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext

#: the payload model of the job type a flow runs
P_co = TypeVar("P_co", bound=BaseModel, covariant=True)
#: keeps the review page's screenshot (``approve``'s evidence)
KeepEvidence = Callable[[], Awaitable[object]]
#: a browser's storage state (cookies, origins), as Playwright gives and takes it
SessionState = dict[str, Any]


@dataclass(frozen=True)
class Credentials:
    """A portal account's sign-in, from the secrets provider."""

    user: str
    password: str = field(repr=False)
    totp_seed: str | None = field(default=None, repr=False)

    def secrets(self) -> list[str]:
        return [s for s in (self.password, self.totp_seed) if s]


class HeldAccount(Protocol):
    """What ``ctx.account()`` gives: credentials and the account's kept browser session."""

    @property
    def credentials(self) -> Credentials: ...

    async def session(self) -> SessionState | None: ...

    async def keep_session(self, state: SessionState) -> None: ...

    async def drop_session(self) -> None: ...

    async def password_expires_in(self, days: int) -> None: ...


class FlowContext(Protocol[P_co]):
    job_id: int
    job_type: str
    order_id: str
    portal: str
    attempt: int

    @property
    def args(self) -> P_co:
        """The job's payload as its type's model: validated, secret fields opened (in
        memory only; raises SecretsErased -- a business error -- if one was erased)."""

    #: the same payload as plain JSON (what a plugin written before ``args`` reads)
    @property
    def payload(self) -> Mapping[str, JsonValue]: ...

    #: checkpoints reached by earlier attempts (and this one), e.g.
    #: {"nr_for_name": "Acme Ltd", "submissions": {...}, "step": "review page"}
    checkpoints: Mapping[str, JsonValue]
    #: where this attempt's screenshots/traces go (created by the runner)
    artifacts_dir: Path
    #: base URL per portal code, e.g. {"irs_ein": "http://127.0.0.1:8765/irs"}
    portal_urls: Mapping[str, str]

    async def save_checkpoint(self, **data: object) -> None:
        """Merge ``data`` (JSON values) into the job's checkpoints, durably, before
        returning."""

    def submission(self, name: str, reference: str | None = None) -> Submission:
        """The point of no return named ``name`` (jobs/submission.py): its earlier state,
        and ``async with`` it around the click that files; ``confirmed(...)`` after."""

    async def step(self, text: str) -> None:
        """Report where the flow is ("review page"); the status view shows it."""

    async def account(self) -> HeldAccount | None:
        """One of the portal's accounts, held for this job (credentials, kept session);
        None when the portal has no account configured. Raises ``DeferUntil`` when every
        account is paused or in use."""

    async def approve(self, review: str, evidence: KeepEvidence | None = None) -> None:
        """At the review page, before the point of no return: returns if this review is
        approved (or no approval is asked for); else the job waits for an admin (raises
        ``DeferUntil``). ``evidence``: an async callable keeping the page's screenshot."""

    async def tell_admins(self, kind: str, reason: str) -> None:
        """Tell the admins once (an escalation mail) without failing the job."""

    async def ask(self, question: str) -> str:
        """Ask a person (an e-mailed code, a CAPTCHA) and wait for the answer."""

    async def new_browser_context(self) -> BrowserContext:
        """A fresh Playwright ``BrowserContext`` (tracing per playwright.config)."""

    def secrets(self) -> list[str]:
        """Strings that must never appear in artifacts, logs or errors (SSNs, passwords)."""

    async def store_document(self, name: str, content_type: str, data: bytes) -> None:
        """Keep an output document (CP 575 PDF, certificate) on the job, durably."""

    async def documents_of(self, job_id: int) -> list[tuple[str, str, bytes]]:
        """(name, content_type, bytes) of the documents another job stored (for ``deliver``)."""

    async def send_mail(self, message: EmailMessage) -> None:
        """Send ``message`` through the configured SMTP server (its From set when missing)."""
