"""``portalq demo``: the whole product on the zero-setup defaults, in one command.

It starts the embedded PostgreSQL (a fresh ``portalq_demo`` database), the stand-in
portals, a local SMTP server that keeps what it receives in ``$PORTALQ_HOME/demo-mailbox``,
and the scheduler service; enqueues a realistic set of orders and shows them flow through
to their outcomes. To make the demo work at any hour, the stand-in portals' hours are
shifted: every portal is open 24/7 except Delaware, which is closed for a short
maintenance window at start-up, so its filing is deferred and then runs when it reopens
(then, no page being known to show Delaware's decision, a person is asked to check it).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.policy
import os
import re
import secrets
import shlex
import shutil
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from portalq.jobs import clock, files, queue
from portalq.jobs.audit import Actor
from portalq.jobs.db.location import embedded, home
from portalq.jobs.db.migrate import upgrade
from portalq.jobs.operations import accounts, portal_rows, questions
from portalq.jobs.secrets import crypto
from portalq.portals.standin.server import StandinServer
from portalq.scheduler import status as st
from portalq.scheduler.cli.common import ExitCode
from portalq.scheduler.config import Settings
from portalq.scheduler.demo_orders import samples
from portalq.scheduler.service import serve

DEMO_DB = "portalq_demo"
DELAWARE_CLOSED_FOR = timedelta(seconds=45)


class MailboxDir:
    """aiosmtpd handler: each message as an .eml file in a folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.count += 1
        (self.folder / f"{self.count:03d}.eml").write_bytes(envelope.content)
        return "250 OK"


def second_terminal(url: str, artifacts: Path) -> str:
    """The shell line that points another terminal's ``portalq`` at the demo database
    (without it, ``portalq status`` there looks at ``portalq``, not ``portalq_demo``) and
    at the demo's evidence folder (without it, ``portalq console`` there looks in
    ``$PORTALQ_HOME/artifacts`` and shows every screenshot as a broken image)."""
    return (f"export PORTALQ_DATABASE_URL={shlex.quote(url)} "
            f"PORTALQ_ARTIFACTS_DIR={shlex.quote(str(artifacts))}")


def _fresh_database() -> str:
    pg = embedded()
    pg.ensure_running()
    pg.recreate_database(DEMO_DB)
    url = pg.url(DEMO_DB)
    upgrade(url)
    return url


def _shift_hours(url: str) -> None:
    """Every portal 24/7, no holidays; Delaware closed for a short maintenance window."""
    now = clock.now()
    with queue.connect(url) as c:
        portal_rows.open_around_the_clock(c)
        portal_rows.add_closure(c, "delaware_icis", now - timedelta(minutes=1),
                                 now + DELAWARE_CLOSED_FOR, "demo: scheduled maintenance")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(*, exit_when_done: bool, timeout: float, console: Any) -> int:
    # the demo extra (portalq[demo]): not installed with the base package
    from aiosmtpd.controller import Controller


    files.owner_only_process()
    base = files.private_dir(home())
    keys = crypto.provider()
    if isinstance(keys, crypto.FileKeyring):
        keys.init()   # the demo sets up everything it needs: its keyring too, if none yet
    mailbox = base / "demo-mailbox"
    shutil.rmtree(mailbox, ignore_errors=True)
    files.private_dir(mailbox)
    console.print("[bold]portalq demo[/] — starting the embedded PostgreSQL, stand-in portals, "
                  "a local mailbox and the scheduler service")
    url = await asyncio.to_thread(_fresh_database)
    await asyncio.to_thread(_shift_hours, url)
    smtp_port = _free_port()
    smtp = Controller(MailboxDir(mailbox), hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    standins = StandinServer(smtp_url=f"smtp://127.0.0.1:{smtp_port}").start()
    settings = Settings(
        database_url=url, standin_url=standins.base_url, admin_emails="ops@example.com",
        smtp_url=f"smtp://127.0.0.1:{smtp_port}", tick_seconds=3, poll_seconds=0.5,
        retry_base_seconds=1, retry_cap_seconds=4, workers=4, node_id="demo",
        artifacts_dir=base / "demo-artifacts", breaker_threshold=50,
        # its incidents last seconds (retries too): mail gathered for seconds, not minutes
        mail_gather_seconds=5, mail_reply_seconds=10)
    shutil.rmtree(settings.artifacts(), ignore_errors=True)
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop=stop, install_signals=False))
    console.print(f"  database   {url}\n  portals    {standins.base_url}\n"
                  f"  mailbox    {mailbox} (SMTP on 127.0.0.1:{smtp_port})\n"
                  f"  artifacts  {settings.artifacts()}\n")
    # whole, never wrapped: it is copied into another terminal as it is
    console.print("  in another terminal, first (for portalq status, jobs show, and the "
                  "console's screenshots and traces):", markup=False)
    console.print(f"    {second_terminal(url, settings.artifacts())}\n", markup=False,
                  soft_wrap=True, highlight=False)
    os.environ["PORTALQ_DATABASE_URL"] = url
    # the CRTC's lost answer (ORD-1006) waits on the portal; the demo shortens the window
    # after which a person is asked, so that the whole story fits in a minute
    os.environ.setdefault("PORTALQ_PORTAL_CHECK_SECONDS", "1")
    os.environ.setdefault("PORTALQ_LOST_ANSWER_WINDOW_SECONDS", "6")
    # the stand-in's PayBC takes payments at any hour: the demo runs at night too
    os.environ.setdefault("PORTALQ_STEP_HOURS_BC_CORPORATE_ONLINE_PAYMENT", "Daily 00:00-24:00")
    # the demo is a formation firm: its EIN applications go in as its third-party designee
    for name, value in DEMO_DESIGNEE.items():
        os.environ.setdefault(f"PORTALQ_IRS_DESIGNEE_{name}", value)
    await asyncio.to_thread(_crtc_account, standins)
    try:
        return await _timeline(settings, standins, mailbox, exit_when_done, timeout, console)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(service, timeout=60)
        standins.stop()
        smtp.stop()


DEMO_ACCOUNT, DEMO_EMAIL = "demo", "filings@demo.example"
#: PORTALQ_IRS_DESIGNEE_* of the demo's firm (jobs/settings/irs.py)
DEMO_DESIGNEE = {"NAME": "Demo Formation Services Inc", "STREET": "251 Little Falls Dr",
                 "CITY": "Wilmington", "STATE": "DE", "ZIP": "19808", "PHONE": "302-555-0101"}


def _crtc_account(standins: Any) -> None:
    """The CRTC stand-in asks for a GCKey sign-in with an e-mailed code: the demo's CRTC
    job waits for a person, and the demo answers it the way an operator would."""
    password = secrets.token_urlsafe(12)
    standins.state["crtc"].accounts.configure({"enabled": True, "accounts": {
        "demo-filings": {"password": password, "mfa": "email", "email": DEMO_EMAIL}}})
    os.environ["PORTALQ_ACCOUNT_CRTC_DEMO_PASSWORD"] = password   # the secrets provider
    # the Delaware flow pays with the payment method the secrets provider holds: a test card
    os.environ.setdefault("PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_METHOD", (
        '{"type": "CREDITCARD", "name": "Demo Filer", "number": "4111111111111111", '
        '"expiry": "12/30", "address": "251 Little Falls Dr, Wilmington DE 19808", '
        '"phone": "302-555-0101"}'))
    with queue.connect() as conn:
        accounts.add(conn, Actor("demo", None, "demo"), "crtc", DEMO_ACCOUNT, "demo-filings")


def _answer_waiting(ids: dict[str, int], mailbox: Path, answered: set[int],
                    console: Any) -> None:
    """A job waiting for an e-mailed code: say how to answer it, and answer it."""
    for job_id in ids.values():
        job = queue.get_job(job_id)
        if job_id in answered or job["status"] != "running" or not str(
                (job["checkpoint"] or {}).get("step", "")).startswith("waiting for a person"):
            continue
        for path in sorted(mailbox.glob("*.eml")):
            msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            body = msg.get_body(("plain",)) if DEMO_EMAIL in str(msg["To"]) else None
            code = re.search(r"\b(\d{6})\b", str(body.get_content())) if body else None
            if code:
                console.print(f"\n[bold]job {job_id} waits for the code the CRTC e-mailed[/]"
                              f" ({path.name}); an operator answers with:\n  portalq jobs "
                              f"answer {job_id} --code {code.group(1)}   (the demo does it)\n")
                with queue.connect() as conn:
                    questions.answer(conn, job_id, code.group(1), by="demo operator")
                answered.add(job_id)
                break


async def _timeline(settings: Settings, standins: Any, mailbox: Path, exit_when_done: bool,
                    timeout: float, console: Any) -> int:
    orders = samples()
    ids: dict[str, int] = {}
    for key, (job_type, order, payload) in orders.items():
        if key in ("deliver", "crtc_down"):
            continue  # enqueued later in the story
        ids[key] = (await asyncio.to_thread(queue.enqueue, job_type, order, payload)).id
    console.print(f"enqueued {len(ids)} orders; the rest follow as the story unfolds\n")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    answered: set[int] = set()
    with Live(st.render(await asyncio.to_thread(st.snapshot)), console=console,
              refresh_per_second=4, transient=False) as live:
        while True:
            snap = await asyncio.to_thread(st.snapshot)
            live.update(st.render(snap))
            done = {k: (await asyncio.to_thread(queue.get_job, v))["status"]
                    for k, v in ids.items()}
            await asyncio.to_thread(_answer_waiting, ids, mailbox, answered, live.console)
            if "deliver" not in ids and done.get("ein") == "completed":
                job_type, order, payload = orders["deliver"]
                payload = {**payload, "documents": [{"source_job_id": ids["ein"]}]}
                ids["deliver"] = (await asyncio.to_thread(queue.enqueue, job_type, order,
                                                          payload)).id
            if "crtc_down" not in ids and done.get("crtc") == "completed":
                # the CRTC portal starts failing at the registration: the answer is lost
                # after the click, so the job waits on the portal (never submits again)
                # and, past the window, asks a person
                standins.state["crtc"].faults.update({"error_code": "500", "error_times": -1})
                job_type, order, payload = orders["crtc_down"]
                ids["crtc_down"] = (await asyncio.to_thread(queue.enqueue, job_type, order,
                                                            payload)).id
            # done: every job final AND every escalation / portal notice mailed (a failed
            # job's escalation row exists from the moment it failed; the tick mails it)
            finished = (len(ids) == len(orders) and st.final(snap)
                        and await asyncio.to_thread(st.unsent_mail) == 0)
            if finished and exit_when_done:
                break
            if loop.time() > deadline:
                console.print("[red]demo timed out[/]")
                return ExitCode.ERROR
            await asyncio.sleep(0.5)
    _summary(ids, mailbox, console)
    return ExitCode.OK


def _summary(ids: dict[str, int], mailbox: Path, console: Any) -> None:
    table = Table(title="outcomes", title_justify="left")
    for col in ("order", "job", "type", "status", "attempts", "result / error"):
        table.add_column(col)
    for job_id in ids.values():
        j = queue.get_job(job_id)
        detail = j["result"] if j["status"] == "completed" else j["last_error"]
        table.add_row(j["order_id"], str(job_id), j["job_type"], j["status"],
                      str(j["attempts"]), escape(str(detail)[:80]))
    console.print(table)
    console.print(f"\nmailbox {mailbox}:")
    for path in sorted(mailbox.glob("*.eml")):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        console.print(f"  {path.name}  {escape(str(msg['Subject']))}")
    console.print("\nTry: portalq jobs show <job>   (in another terminal: after the export "
                  "line printed above)")
