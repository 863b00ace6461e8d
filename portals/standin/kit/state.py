"""The state of one stand-in portal: opening hours, faults, ledger, sessions store.

Every stand-in keeps a **ledger** of the submissions it accepted (what tests read to prove
"filed exactly once") and a set of **faults** tests switch on through the control API:

    POST /_control/<portal>   JSON merged into that portal's Faults; its ``signin`` object
                              configures accounts and sign-in (see :mod:`.accounts`)
    POST /_reset              all portals back to normal, ledgers emptied, sign-in off
    GET  /_ledger/<portal>    the ledger, a JSON list
    GET  /_ledger/<portal>/signins   sign-in attempts and per-account counts

Faults: ``maintenance`` (maintenance page), ``slow_ms`` (delay every page), ``error_code``
(e.g. "109": a system error page) for the next ``error_times`` submissions (-1 = always),
``expire_session`` (the next step after the first answers "session expired"),
``dialog`` (an unexpected alert on the form pages), ``changed_selector`` (the Continue
control renamed, as after a portal redesign), ``hours`` ("always" | "closed" | "calendar"),
``drop_after_submit`` / ``drop_before_submit`` (the connection dies after / before the
submission is recorded), ``hang_after_submit`` (recorded, then no answer at all),
``answer_after_submit`` (recorded, then an error answer in these words),
``drop_after_acting`` (a path: acted on, then the connection closes bare, :mod:`.network`);
``decide_after_seconds`` (a registry that queues: a submission is acknowledged with its
number or receipt and decided by staff that long after it was recorded -- its lookup does
not list it before) and ``staff_outcome`` (what staff decide, where the portal knows
several outcomes); ``processing_ms`` / ``app_timeout_ms`` / ``idle_ms`` (a single-page
app's processing time, its own request timeout and idle-modal timer); ``review_changed``
("label" | "field": the review page redesigned, as the real application may be any day);
``renamed_text`` ({old: new}: a text of a single-page app's content renamed).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from portalq.jobs import clock
from portalq.portals.calendar import is_open
from portalq.portals.presets import calendar_from_preset
from portalq.portals.standin.kit.portal_accounts import Accounts


def drop_connection(request: Request) -> Response:
    """The ``drop_after_submit`` / ``drop_before_submit`` faults: the connection breaks
    before an answer, so the client cannot know the outcome.

    A bare close (or reset) is not enough: Chromium silently re-sends a POST whose reused
    connection closed without a byte, so the line is broken mid-answer instead (the browser
    reports ``net::ERR_INVALID_HTTP_RESPONSE`` and does not resend).
    """
    cycle = getattr(request.receive, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:  # not uvicorn: the best we can do is an unusable answer
        raise ConnectionAbortedError("answer dropped")
    transport.write(b"XX\r\n\r\n")
    transport.close()
    return Response(b"", status_code=500)  # never reaches the client


@dataclass
class Faults:
    maintenance: bool = False
    slow_ms: int = 0
    error_code: str | None = None
    error_times: int = 0
    expire_session: bool = False
    dialog: bool = False
    changed_selector: bool = False
    hours: str = "always"  # "always" | "closed" | "calendar"
    # crash the connection right after recording a submission (response never arrives)
    drop_after_submit: bool = False
    # crash the connection just before recording: the submission never arrived
    drop_before_submit: bool = False
    # record the submission, then never answer (a worker can be killed "after submit")
    hang_after_submit: bool = False
    # a path (e.g. "/api/e-filing"): a POST there acts, then its connection closes with no
    # answer, as a real network drops it (kit/network.py; Chromium may resend by itself)
    drop_after_acting: str | None = None
    # record the submission, then answer with these words as an error (a real portal's
    # answer after acting may say anything: a flow must not read a refusal into it)
    answer_after_submit: str | None = None
    # staff decide a queued submission this long after it was recorded (0: at once)
    decide_after_seconds: float = 0.0
    # a registry that publishes its decisions (the CRTC's registration list, "within 24
    # hours" of the confirmation letter): this long after staff decided (0: at once)
    list_after_seconds: float = 0.0
    # what staff decide (each stand-in knows its own words: "approve", "reject", ...)
    staff_outcome: str = "approve"
    # the portal's payment service fails every payment (where it has one: BC's PayBC)
    payment_down: bool = False
    # single-page apps (IRS): how long the submission's answer takes, the app's own request
    # timeout and its idle timer (0 = the real portal's own: IRS 90 s and 10 + 5 min)
    processing_ms: int = 0
    app_timeout_ms: int = 0
    idle_ms: int = 0
    # a redesigned review page (IRS): "label" (a row's label renamed) or "field" (an extra
    # required question before the submission), as a real redesign would bring
    review_changed: str | None = None
    # a text of the app renamed (IRS: {"Limited Liability Company (LLC)": "..."}), as an
    # overnight content change would: every text the app shows that equals a key
    renamed_text: dict[str, str] | None = None

    def update(self, data: dict[str, Any]) -> None:
        for key, value in data.items():
            if not hasattr(self, key):
                raise ValueError(f"unknown fault {key!r}")
            setattr(self, key, value)


@dataclass
class PortalState:
    code: str
    faults: Faults = field(default_factory=Faults)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: POSTs that reached the portal, by path (:mod:`.network`)
    arrivals: dict[str, int] = field(default_factory=dict)
    #: accounts and sign-in (off by default; ``{"signin": {...}}`` through the control API)
    accounts: Accounts = field(default_factory=Accounts)

    def is_open(self) -> bool:
        mode = self.faults.hours
        if mode == "always":
            return True
        if mode == "closed":
            return False
        return is_open(calendar_from_preset(self.code), clock.now())

    def take_error(self) -> str | None:
        """The configured error code if one is due for this submission, else None."""
        with self.lock:
            f = self.faults
            if f.error_code and f.error_times != 0:
                if f.error_times > 0:
                    f.error_times -= 1
                return f.error_code
            return None

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            entry = {"seq": len(self.ledger) + 1, "at": clock.now().isoformat(), **entry}
            self.ledger.append(entry)
            return entry

    def queue(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Stamp ``entry`` (before :meth:`record`) with when staff decide it, per the
        ``decide_after_seconds`` fault: ``decide_at`` (None: decided at once)."""
        delay = self.faults.decide_after_seconds
        at = clock.now() + timedelta(seconds=delay) if delay > 0 else None
        return {**entry, "decide_at": at.isoformat() if at else None,
                "staff_outcome": self.faults.staff_outcome}

    @staticmethod
    def decided(entry: dict[str, Any]) -> bool:
        """Have staff decided ``entry`` by now?"""
        at = entry.get("decide_at")
        return at is None or clock.now() >= datetime.fromisoformat(at)

    def find(self, **match: Any) -> dict[str, Any] | None:
        """The first ledger entry whose fields equal ``match`` (a document's owner)."""
        with self.lock:
            return next((e for e in self.ledger
                         if all(e.get(k) == v for k, v in match.items())), None)

    async def hang_if_asked(self) -> None:
        """The ``hang_after_submit`` fault: the answer never comes (until a reset)."""
        if self.faults.hang_after_submit:
            while self.faults.hang_after_submit:
                await asyncio.sleep(0.05)

    def reset(self) -> None:
        with self.lock:
            self.faults = Faults()
            self.ledger.clear()
            self.sessions.clear()
            self.arrivals.clear()
        self.accounts.reset()

    def snapshot(self) -> dict[str, Any]:
        return {"code": self.code, "faults": asdict(self.faults), "submissions": len(self.ledger),
                "signin": self.accounts.snapshot()}

    def control(self, data: dict[str, Any]) -> None:
        """A control body: fault switches, and ``signin`` settings and accounts. Checked
        whole before anything changes (ValueError)."""
        data = dict(data)
        signin = data.pop("signin", None)
        Faults().update(data)  # raises on an unknown fault before anything changes
        if signin is not None:
            self.accounts.configure(signin)
        self.faults.update(data)


class StandinState:
    """All stand-in portals of one server."""

    def __init__(self, codes: list[str], smtp_url: str | None = None) -> None:
        self.portals = {code: PortalState(code, accounts=Accounts(smtp_url)) for code in codes}

    def __getitem__(self, code: str) -> PortalState:
        return self.portals[code]
