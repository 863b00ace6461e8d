"""Browser-test fixtures: the stand-in portals, one Chromium per session, a real FlowContext.

    def test_x(make_ctx, portals, run):
        portals.control("irs_ein", dialog=True)
        ctx = make_ctx("obtain_ein", ein_payload())
        result = run(obtain_ein(ctx))

``run`` drives coroutines on the session's event loop (the one Playwright lives on).
``LocalFlowContext`` is a complete implementation of ``portals.flows.context.FlowContext``
(in-memory checkpoints and documents, artifacts under tmp_path, mail through a real local
SMTP server) — not a mock: the worker runs the same flows through its own implementation.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import smtplib
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from consolekit import sign_in_page
from flowkit import SSN
from pydantic import BaseModel

from portalq.jobs import clock
from portalq.jobs.errors import BusinessError, InputError
from portalq.jobs.submission import Reporting
from portalq.jobs.types import get, validate, validate_payload
from portalq.portals.flows.browser import BrowserConfig, load_config, new_context
from portalq.portals.standin.server import StandinServer
from tests.mailbox import Mailbox

_job_ids = itertools.count(1001)


class DocumentStore:
    """Documents per job id (what the queue keeps durably in production)."""

    def __init__(self) -> None:
        self.by_job: dict[int, list[tuple[str, str, bytes]]] = {}

    def put(self, job_id: int, name: str, content_type: str, data: bytes) -> None:
        docs = self.by_job.setdefault(job_id, [])
        docs[:] = [d for d in docs if d[0] != name] + [(name, content_type, data)]


class LocalFlowContext(Reporting):
    """FlowContext for tests and local runs."""

    def __init__(self, job_type: str, payload: dict[str, Any], *, browser: Any,
                 config: BrowserConfig, artifacts_root: Path, portal_urls: dict[str, str],
                 documents: DocumentStore, smtp: tuple[str, int], job_id: int | None = None,
                 attempt: int = 1, checkpoints: dict[str, Any] | None = None) -> None:
        self.job_id = job_id if job_id is not None else next(_job_ids)
        self.job_type = job_type
        self.order_id = f"ORD-{self.job_id}"
        self.attempt = attempt
        try:  # what the queue would store: the schema-normalised payload, and its portal
            _, self.payload, self.portal = validate_payload(job_type, payload)
        except InputError:  # tests may hand a flow what the queue would have refused
            self.payload, self.portal = payload, ""
        self.checkpoints: dict[str, Any] = checkpoints if checkpoints is not None else {}
        self.artifacts_root = artifacts_root
        self.artifacts_dir = artifacts_root / f"job{self.job_id}" / f"attempt{attempt}"
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        self.portal_urls = portal_urls
        self.browser, self.config = browser, config
        self.documents, self.smtp = documents, smtp
        self.sent: list[EmailMessage] = []
        #: (kind, reason) of what the flow told the admins (shared by its retries)
        self.told: list[tuple[str, str]] = []
        self.contexts_opened = 0
        #: awaited with each new browser context (tests use it to install routes)
        self.context_hooks: list[Callable[[Any], Awaitable[None]]] = []

    def retry(self) -> LocalFlowContext:
        """The next attempt of the same job: same checkpoints and documents."""
        nxt = LocalFlowContext(
            self.job_type, self.payload, browser=self.browser, config=self.config,
            artifacts_root=self.artifacts_root, portal_urls=self.portal_urls,
            documents=self.documents, smtp=self.smtp, job_id=self.job_id,
            attempt=self.attempt + 1, checkpoints=copy.deepcopy(self.checkpoints))
        nxt.told = self.told
        return nxt

    @property
    def args(self) -> BaseModel:
        """The payload as its type's model, validated at each use: a test may change
        ``payload`` between attempts (as ``jobs retry --payload-patch`` does)."""
        return validate(get(self.job_type), self.payload)

    async def save_checkpoint(self, **data: Any) -> None:
        json.dumps(data)  # checkpoints are stored as JSON in production
        self.checkpoints.update(data)

    async def account(self) -> Any:
        return None   # no portal account configured: flows sign in with none

    async def approve(self, review: str, evidence: Any = None) -> None:
        return None   # local runs ask nobody's approval

    async def tell_admins(self, kind: str, reason: str) -> None:
        self.told.append((kind, reason))

    async def ask(self, question: str) -> str:
        raise BusinessError(f"no person to ask in a local run: {question}")

    async def new_browser_context(self) -> Any:
        self.contexts_opened += 1
        context = await new_context(self.browser, self.config, self.artifacts_dir)
        for hook in self.context_hooks:
            await hook(context)
        return context

    def secrets(self) -> list[str]:
        rp = self.payload.get("responsible_party") or {}
        return [v for v in (rp.get("ssn"), rp.get("itin")) if v]

    async def store_document(self, name: str, content_type: str, data: bytes) -> None:
        self.documents.put(self.job_id, name, content_type, data)

    async def documents_of(self, job_id: int) -> list[tuple[str, str, bytes]]:
        return list(self.documents.by_job.get(job_id, []))

    async def send_mail(self, message: Any) -> None:
        if "From" not in message:
            message["From"] = "portalq@portalq.local"
        host, port = self.smtp

        def send() -> None:
            with smtplib.SMTP(host, port, timeout=10) as smtp:
                smtp.send_message(message)

        await asyncio.to_thread(send)
        self.sent.append(message)


class Portals:
    """The running stand-ins and their control API."""

    def __init__(self, server: StandinServer) -> None:
        self.server = server

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server.base_url + path, data=data,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def control(self, portal: str, **faults: Any) -> None:
        self._call(f"/_control/{portal}", faults)

    def ledger(self, portal: str) -> list[dict[str, Any]]:
        return self._call(f"/_ledger/{portal}")  # type: ignore[no-any-return]

    def arrivals(self, portal: str) -> dict[str, int]:
        """POSTs that reached the portal, by path (the kit counts them)."""
        return self._call(f"/_ledger/{portal}/arrivals")  # type: ignore[no-any-return]

    def reset(self) -> None:
        self._call("/_reset", {})

    def url(self, prefix: str) -> str:
        return self.server.url(prefix)


# --- fixtures -----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def standin_server() -> Iterator[StandinServer]:
    with StandinServer() as server:
        yield server


@pytest.fixture
def portals(standin_server: StandinServer) -> Iterator[Portals]:
    p = Portals(standin_server)
    p.reset()
    yield p
    clock.set_clock(None)
    p.reset()


@pytest.fixture(scope="session")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.run_until_complete(lp.shutdown_asyncgens())
    lp.close()


@pytest.fixture(scope="session")
def run(loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    return loop.run_until_complete


@pytest.fixture(scope="session")
def browser_config() -> BrowserConfig:
    return load_config()


@pytest.fixture(scope="session")
def playwright(loop: asyncio.AbstractEventLoop) -> Iterator[Any]:
    from playwright.async_api import async_playwright

    manager = async_playwright()
    pw = loop.run_until_complete(manager.start())
    yield pw
    loop.run_until_complete(manager.__aexit__(None, None, None))


@pytest.fixture(scope="session")
def browser(loop: asyncio.AbstractEventLoop, playwright: Any,
            browser_config: BrowserConfig) -> Iterator[Any]:
    from portalq.portals.flows.browser import launch

    b = loop.run_until_complete(launch(playwright, browser_config))
    yield b
    loop.run_until_complete(b.close())


@pytest.fixture(scope="session")
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture
def make_ctx(request: pytest.FixtureRequest, browser_config: BrowserConfig, portals: Portals,
             tmp_path: Path, mailbox: Mailbox) -> Callable[..., LocalFlowContext]:
    """``make_ctx(job_type, payload, trace_policy=..., config=..., browser=..., smtp=...)``;
    one document store per test. ``deliver`` contexts get no browser (none is launched)."""
    documents = DocumentStore()
    urls = portals.server.portal_urls()

    def factory(job_type: str, payload: dict[str, Any], *, trace_policy: str | None = None,
                config: BrowserConfig | None = None, browser: Any = None,
                smtp: tuple[str, int] | None = None) -> LocalFlowContext:
        cfg = config or browser_config
        if trace_policy:
            cfg = cfg.with_(trace_policy=trace_policy)
        if browser is None and job_type != "deliver":
            browser = request.getfixturevalue("browser")
        return LocalFlowContext(job_type, payload, browser=browser, config=cfg,
                                artifacts_root=tmp_path / "artifacts", portal_urls=urls,
                                documents=documents,
                                smtp=smtp or (mailbox.host, mailbox.port))

    return factory


# --- payloads and checks shared by the test modules --------------------------------------



@pytest.fixture
def ein_payload() -> Callable[..., dict[str, Any]]:
    def build(**overrides: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "legal_structure": "LLC", "members": 1, "state": "DE", "reason": "NEW_BUSINESS",
            "responsible_party": {"first_name": "Jane", "last_name": "Founder", "ssn": SSN},
            "address": {"street": "1 Main St", "city": "Dover", "region": "DE",
                        "postal_code": "19901"},
            "phone": "302-555-0100", "legal_name": "Acme Widgets LLC", "start_month": 3,
            "start_year": 2026, "principal_activity": "Consulting",
        }
        payload.update(overrides)
        return payload

    return build


@pytest.fixture
def de_payload() -> Callable[..., dict[str, Any]]:
    def build(**overrides: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "jurisdiction": "DE", "entity_type": "LLC", "legal_name": "Blue Heron Ventures LLC",
            "completing_party": {"first_name": "Ada", "last_name": "Filer"},
            "registered_office": {"street": "251 Little Falls Dr", "city": "Wilmington",
                                  "region": "DE", "postal_code": "19808"},
            "registered_agent": "Corporation Service Company",
            "contact_email": "ops@example.test", "contact_phone": "+1 302 555 0101",
        }
        payload.update(overrides)
        return payload

    return build


@pytest.fixture
def signin(env: dict[str, Any], browser: Any, run: Callable[..., Any]) -> Iterator[Any]:
    """``signin(role)``: a console page signed in as ``role`` (the console modules' own
    ``env`` fixture says where the console is); its browser contexts closed afterwards."""
    contexts: list[Any] = []

    def sign_in(role: str) -> Any:
        return run(sign_in_page(browser, env["base"], role, contexts))

    yield sign_in
    for ctx in contexts:
        run(ctx.close())
