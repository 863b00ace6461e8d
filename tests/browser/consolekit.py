"""The admin console under test: a real uvicorn server (in a thread of the test process, so
``jobs.clock`` moves its time too) on a fresh database, users made with the real CLI, and
a job with an SSN and evidence to look at."""

from __future__ import annotations

import contextlib
import json
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flowkit import SSN, secret_forms

from portalq.jobs import clock, queue
from portalq.scheduler.config import Settings
from portalq.scheduler.console.app import create_app
from portalq.scheduler.console.signing_key import ConsoleSettings
from tests import payloads
from tests.checkpoints import in_doubt
from tests.conftest import run_cli
from tests.ports import free_port
from tests.service_helpers import start_server_thread

PASSWORD = "correct horse battery staple"
ROLES = ("viewer", "operator", "admin")


class ConsoleServer:
    def __init__(self, dsn: str, artifacts: Path, port: int | None = None,
                 **settings: Any) -> None:
        from portalq.scheduler.console.app import server

        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = ConsoleSettings(port=self.port, secret="test-secret-" + "x" * 20,
                                 **settings)
        self.app = create_app(dsn, config, Settings(artifacts_dir=artifacts))
        self.server = server(self.app, "127.0.0.1", self.port)

    def __enter__(self) -> ConsoleServer:
        self.thread = start_server_thread(self.server, "the console")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    @property
    def console(self) -> Any:
        return self.app.console


@contextlib.contextmanager
def console_env(pg_server: Any, artifacts: Path,
                prepare: Callable[[str, Path], dict[str, Any]] | None = None,
                ) -> Iterator[dict[str, Any]]:
    """A database of its own with the console's users (``prepare(dsn, artifacts)`` seeds it
    and returns more keys), a console serving it, ``PORTALQ_DATABASE_URL`` pointing at it;
    all undone afterwards. Yields url, dsn, artifacts, server, base."""
    name = pg_server.create()
    url, dsn = pg_server.url(name), pg_server.dsn(name)
    patch = pytest.MonkeyPatch()
    patch.setenv("PORTALQ_DATABASE_URL", url)
    try:
        add_users(url)
        extra = prepare(dsn, artifacts) if prepare else {}
        with ConsoleServer(dsn, artifacts, live_refresh_seconds=30) as server:
            yield {"url": url, "dsn": dsn, "artifacts": artifacts, "server": server,
                   "base": server.base, **extra}
    finally:
        patch.undo()
        pg_server.drop(name)


def add_users(dsn_url: str) -> None:
    for role in ROLES:
        out = run_cli("users", "add", role, "--role", role, input=PASSWORD + "\n",
                      env={"PORTALQ_DATABASE_URL": dsn_url})
        assert out.returncode == 0, out.stderr


def seed(dsn: str, artifacts: Path) -> dict[str, int]:
    """Jobs to look at: an EIN job with an SSN, failed with an uncertain outcome (its last
    error even carries the SSN, as a careless flow might write it), escalated, with a
    screenshot, a trace and a document; a failed name search; a pending BC filing."""
    ids: dict[str, int] = {}
    with psycopg.connect(dsn, autocommit=True) as c:
        ids["ein"] = queue.enqueue("obtain_ein", "ORD-EIN-1", payloads.OBTAIN_EIN, conn=c).id
        ids["name"] = queue.enqueue("name_search", "ORD-NS-1", payloads.NAME_SEARCH, conn=c).id
        ids["bc"] = queue.enqueue("file_entity", "ORD-BC-1", payloads.FILE_ENTITY_BC, conn=c).id
        ids["bc2"] = queue.enqueue("file_entity", "ORD-BC-2", payloads.FILE_ENTITY_BC,
                                   conn=c).id
        now = clock.now()
        c.execute("""UPDATE portalq.job_queue SET status = 'failed', attempts = 1, finished_at = %s,
                        checkpoint = %s,
                        last_error = %s WHERE id = %s""",
                  (now, json.dumps({**in_doubt("ein_application"), "step": "submit"}),
                   f"portal did not answer after submit for SSN {SSN.replace('-', '')}",
                   ids["ein"]))
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 5, finished_at = %s, "
                  "last_error = 'name rejected' WHERE id = %s", (now, ids["name"]))
        c.execute("""INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status,
                        error, worker) VALUES (%s, %s, 1, 'running', 'failed', %s, 'w1')""",
                  (ids["ein"], now, f"uncertain: SSN {SSN.replace('-', ' ')} maybe filed"))
        for key, kind in (("ein", "uncertain"), ("name", "business")):
            queue.escalate(c, ids[key], 1, kind, f"{kind} outcome")
        folder = artifacts / str(ids["ein"]) / "attempt-1"
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / "after-submit.png"
        shot.write_bytes(_png())
        trace = folder / "trace.zip"
        with zipfile.ZipFile(trace, "w") as z:
            z.writestr("trace.trace", json.dumps({"type": "context-options"}))
        for path, kind in ((shot, "screenshot"), (trace, "trace")):
            c.execute("""INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, created_at)
                         VALUES (%s, 1, %s, %s, %s)""", (ids["ein"], kind, str(path), now))
        c.execute("""INSERT INTO portalq.job_documents (job_id, name, content_type, data, created_at)
                     VALUES (%s, 'confirmation.pdf', 'application/pdf', %s, %s)""",
                  (ids["ein"], b"%PDF-1.4 stand-in", now))
    return ids


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    raw = b"".join(b"\x00" + b"\x80\x90\xa0" * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def assert_no_ssn(text: str | bytes, where: str) -> None:
    data = text.encode() if isinstance(text, str) else text
    for form in secret_forms(SSN):
        assert form not in data, f"{form!r} found in {where}"


class MovableClock:
    """Real time plus an offset the test can move (the server thread reads it too)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def sign_in_page(browser: Any, base: str, role: str, contexts: list[Any],
                       **context_options: Any) -> Any:
    """A fresh browser context signed in to the console at ``base`` as ``role``; the page
    collects Content-Security-Policy complaints in ``page.csp_errors``. The context is
    added to ``contexts`` before signing in, so the caller closes it whatever happens."""
    ctx = await browser.new_context(base_url=base, **context_options)
    ctx.set_default_timeout(10_000)
    contexts.append(ctx)
    page = await ctx.new_page()
    page.csp_errors = []
    page.on("console", lambda m: page.csp_errors.append(m.text)
            if "Content Security Policy" in m.text else None)
    await page.goto("/login")
    await page.fill("input[name=name]", role)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url(base + "/")
    return page
