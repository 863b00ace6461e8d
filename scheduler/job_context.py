"""The FlowContext a running job gets (see portals/flows/context.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from email.message import EmailMessage
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from portalq.jobs import clock, types, worker_api
from portalq.jobs.errors import AccountError, DeferUntil
from portalq.jobs.operations import approvals, questions
from portalq.jobs.secrets import sealing
from portalq.jobs.submission import Reporting
from portalq.scheduler import holds, live_frames
from portalq.scheduler.people import AccountHold, Asker

if TYPE_CHECKING:
    from portalq.jobs.db.pool import Pool
from portalq.portals.flows.context import HeldAccount, KeepEvidence

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext

    from portalq.jobs.db.pool import Pool
    from portalq.scheduler.config import Settings
    from portalq.scheduler.people import AccountHold

#: opens a fresh browser context for (portal, artifacts folder)
ContextOpener = Callable[[str, Path], Awaitable["BrowserContext"]]


log = logging.getLogger("portalq.worker")
#: the evidence folders that could not be made were logged (once per process)
_said_no_folder: list[bool] = []


def said_no_folder() -> None:
    """The service said at its start that the artifacts folder cannot be made: the runs
    need not say it again."""
    _said_no_folder.append(True)

#: how long a "target closed" error waits for the browser's disconnect to show
BROWSER_GONE_WAIT_S = 3.0


def secret_values(job_type: str, payload: Mapping[str, Any]) -> list[str]:
    """The payload's secret field values (SSNs, ITINs) for redaction."""
    return sealing.values(job_type, payload)


class JobContext(Reporting):
    # submission() and step() come from jobs.submission.Reporting
    """What a running job's handler may use, built from narrow parts: the connection
    ``pool`` (its writes are guarded by ``node``'s lock on the job), the ``settings``
    (portal addresses, mail), a ``browsers`` opener, and ``lease_fresh`` -- whether this
    node's lease on the job is fresh enough to go past a point of no return."""

    def __init__(self, job: Mapping[str, Any], artifacts_dir: Path | Callable[[], Path], *,
                 pool: Pool, node: str, settings: Settings,
                 browsers: ContextOpener,
                 lease_fresh: Callable[[int], bool] = lambda _job_id: True,
                 stored_urls: Mapping[str, str | None] | None = None) -> None:
        self._pool = pool
        self._stored_urls = stored_urls or {}  # each portal's own address (read only)
        self._node = node
        self._settings = settings
        self._open_context = browsers
        self._lease_fresh = lease_fresh
        self.job_id: int = job["id"]
        self.job_type: str = job["job_type"]
        self.order_id: str = job["order_id"]
        self.portal: str = job["portal"]
        self.attempt: int = job["attempts"]
        # opened at once (the data key is unwrapped while the KEK that wraps it certainly
        # exists: a rotation may retire that KEK moments later); a failure is raised when
        # the handler asks for the payload, so it is classified like any other
        self._payload: Mapping[str, Any] | None = None
        self._payload_error: BaseException | None = None
        try:
            self._payload = sealing.reveal(job)
        except Exception as exc:  # noqa: BLE001 - raised to the handler, see payload
            self._payload_error = exc
        self._checkpoints: dict[str, Any] = {}
        try:
            self._checkpoints = sealing.open_checkpoint(
                self.job_id, self.job_type, job["checkpoint"])
        except Exception as exc:  # noqa: BLE001 - raised to the handler, see payload
            self._payload_error = self._payload_error or exc
        # this run's evidence folder, or what finds it (a look at the disk): found when
        # first asked for, so a job that never asks (no browser, no file) costs none
        self._artifacts: Path | Callable[[], Path] = artifacts_dir
        self._scratch: Path | None = None
        #: evidence that could not be kept at all, as (what, why): recorded as missing
        self.evidence_missing: list[tuple[str, str]] = []
        self._browser_contexts: list[BrowserContext] = []
        self._browser_gone = asyncio.Event()
        # browser -> its "disconnected" listener
        self._watched: dict[Browser, Callable[..., None]] = {}
        self.failed = False
        self._account: AccountHold | None = None   # the portal account, once asked for

    @property
    def artifacts_dir(self) -> Path:
        """This run's evidence folder, made when first asked for. One that cannot be made
        (the artifacts folder is a file, unwritable, a disk full) never fails the job
        (evidence never decides an outcome): the run gets a scratch folder instead, whose
        files are dropped when it ends, and the evidence is recorded as missing."""
        if not isinstance(self._artifacts, Path):
            self._artifacts = self._folder(self._artifacts)
        return self._artifacts

    def _folder(self, find: Callable[[], Path]) -> Path:
        folder: Path | str = "?"
        try:
            folder = find()
            folder.mkdir(parents=True, exist_ok=True)
            return folder
        except OSError as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
            self.evidence_missing.append(("evidence folder", reason))
            if not _said_no_folder:
                _said_no_folder.append(True)   # once per process, not once per job
                log.error("evidence folder %s cannot be made (%s): jobs run, their "
                          "evidence is recorded as missing", folder, reason)
            self._scratch = Path(tempfile.mkdtemp(prefix=f"portalq-job{self.job_id}-"))
            return self._scratch

    def drop_scratch(self) -> None:
        """The run is over: its scratch folder (if it had one) goes."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @property
    def artifacts_asked(self) -> bool:
        """Whether anything asked for the evidence folder (only then can it hold any)."""
        return isinstance(self._artifacts, Path)

    @property
    def checkpoints(self) -> dict[str, Any]:
        """The job's checkpoints, sealed values opened (a checkpoint that cannot be opened
        raises: a flow must never take "no checkpoint" for "nothing done yet")."""
        if self._payload_error is not None:
            raise self._payload_error
        return self._checkpoints

    @checkpoints.setter
    def checkpoints(self, value: dict[str, Any]) -> None:
        self._checkpoints = value

    @property
    def payload(self) -> Mapping[str, Any]:
        """The payload with its sealed secret fields opened, in memory only (raises
        SecretsErased -- a business error -- if one the job needs was erased)."""
        if self._payload_error is not None:
            raise self._payload_error
        assert self._payload is not None
        return self._payload

    @cached_property
    def args(self) -> BaseModel:
        """The payload as its job type's model (what the flow's ``FlowContext[P]`` names):
        validated as at enqueue, secret fields opened. A payload that no longer fits the
        model raises InputError, its one-line reason naming the field, never its value."""
        return types.validate(types.get(self.job_type), self.payload)

    @cached_property
    def portal_urls(self) -> dict[str, str]:
        return self._settings.portal_urls(self._stored_urls)

    # -- a portal account and a person (scheduler/people.py) -----------------------------
    async def account(self) -> HeldAccount | None:
        """One of the portal's accounts, held for this job (one session per account on
        every node): its credentials and kept browser session (scheduler/people.py
        HeldAccount); None when the portal has no account configured."""
        if self._account is None:
            self._account = AccountHold(self._pool, holder=f"{self._node}:{self.job_id}",
                                        portal=self.portal,
                                        hold_seconds=self._settings.job_timeout_seconds,
                                        name=types.get(self.job_type).account)
        return await self._account.take()

    async def account_refused(self, exc: AccountError) -> None:
        if self._account is not None:
            await self._account.refused(exc)

    async def release_account(self) -> None:
        if self._account is not None:
            await self._account.release()

    async def approve(self, review: str, evidence: KeepEvidence | None = None) -> None:
        """The flow is at its review page (``review``: what it shows). Without approval for
        exactly this review (jobs/operations/approvals.py), the page's screenshot is kept,
        admins are told, and the job waits -- deferred, its attempt refunded, the browser freed."""
        wanted = {w.strip() for w in self._settings.approval.split(",") if w.strip()}
        if not wanted & {self.job_type, self.portal}:
            return
        review_digest = approvals.digest(review)
        if approvals.approved(self.checkpoints, review_digest):
            return
        record = approvals.pending(self.checkpoints, review_digest)
        await self.save_checkpoint(**{approvals.KEY: record})
        await self.step("waiting for approval")
        if evidence is not None:
            await evidence()
        async with self._pool.connection() as conn:
            await questions.tell_admins(
                conn, job_id=self.job_id, attempt=self.attempt, kind="approval",
                reason=("the data changed since it was approved; " if record["changed"]
                        else "") + "at the review page: approve with portalq jobs approve "
                f"{self.job_id}, or reject with portalq jobs reject {self.job_id} --note ...")
        raise DeferUntil("waiting for approval at the review page",
                         when=clock.now() + approvals.WAIT)

    async def tell_admins(self, kind: str, reason: str) -> None:
        """An escalation mailed once (e.g. a registry slower than it says); the job goes on."""
        async with self._pool.connection() as conn:
            await questions.tell_admins(conn, job_id=self.job_id, attempt=self.attempt,
                                        kind=kind, reason=reason)

    async def ask(self, question: str) -> str:
        """Ask a person (an e-mailed code, a CAPTCHA) and wait for ``portalq jobs answer``."""
        await self.step(f"waiting for a person: {question[:120]}")
        wait = timedelta(seconds=self._settings.question_deadline_seconds)
        return await Asker(self._pool, job_id=self.job_id, attempt=self.attempt).ask(
            question, wait)

    async def save_checkpoint(self, **data: object) -> None:
        """Durably, before returning. The write is guarded by this worker's lock on the job
        and renews its heartbeat: a flow that saved "submitting" holds a fresh lease for
        the click that follows. A node whose lease is going stale (it could not renew its
        heartbeats) writes no checkpoint, so it never starts a submission."""
        if not self._lease_fresh(self.job_id):
            raise LostJob(f"job {self.job_id}: this node's lease is stale (database "
                          "unreachable); not going on")
        async with self._pool.connection() as conn:
            saved = await worker_api.save_checkpoint(
                conn, job_id=self.job_id, worker=self._node,
                data=sealing.seal_checkpoint(self.job_id, self.job_type, data))
        if saved is None:
            raise LostJob(f"job {self.job_id} is no longer held by this worker")
        self.checkpoints = sealing.open_checkpoint(self.job_id, self.job_type,
                                                              saved)

    async def hold_browser(self, why: str) -> str | None:
        """Keep this job's browser for a person to take over (scheduler/holds.py); what
        ended the hold (None: holding is off)."""
        return await holds.hold(self.job_id, self._pool, self.step, why=why,
                                seconds=self._settings.browser_hold_seconds,
                                limit=self._settings.held_browsers)

    async def new_browser_context(self) -> BrowserContext:
        with contextlib.suppress(OSError):   # if it cannot be, the browser notes it missing
            self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        context = await self._open_context(self.portal, self.artifacts_dir)
        self._browser_contexts.append(context)
        # the console's live view of the job's page (masked; never decides an outcome)
        await live_frames.cast(context, self.job_id, self.secrets(), self._pool)
        b = context.browser
        if b is not None and b not in self._watched:
            def gone(*_: object) -> None:
                self._browser_gone.set()

            b.on("disconnected", gone)
            self._watched[b] = gone
            if not b.is_connected():
                self._browser_gone.set()
        return context

    def unwatch_browsers(self) -> None:
        """The job is over: stop listening to its browsers (a local one lives on)."""
        for b, gone in self._watched.items():
            with contextlib.suppress(Exception):
                b.remove_listener("disconnected", gone)
        self._watched.clear()

    async def browser_lost(self, exc: BaseException | None = None) -> bool:
        """A browser this job used is gone (its remote server died or was restarted).

        A page call can fail ("Target ... has been closed") a moment before the client
        sees the connection's end: for that error the disconnect is awaited briefly."""
        if not self._browser_contexts:
            return False
        if self._browser_gone.is_set():
            return True
        if exc is not None and "has been closed" in str(exc):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._browser_gone.wait(), BROWSER_GONE_WAIT_S)
        return self._browser_gone.is_set()

    def secrets(self) -> list[str]:
        try:
            return secret_values(self.job_type, self.payload)
        except Exception:  # noqa: BLE001 - nothing opened: nothing to redact
            return []

    async def store_document(self, name: str, content_type: str, data: bytes) -> None:
        async with self._pool.connection() as conn:
            await worker_api.store_document(conn, job_id=self.job_id, name=name,
                                            content_type=content_type, data=data)

    async def documents_of(self, job_id: int) -> list[tuple[str, str, bytes]]:
        async with self._pool.connection() as conn:
            return await worker_api.documents_of(conn, job_id)

    async def send_mail(self, message: EmailMessage) -> None:
        # imported here: only a flow that mails loads the mailer (jinja2, smtplib, ~2.6 MiB
        # of an idle worker's 60; issue 49.2, measured with python -X importtime)
        from portalq.scheduler.mailer import send

        await send(self._settings, message)


class LostJob(Exception):
    """The job was rescued and handed to another worker while this one ran it."""
