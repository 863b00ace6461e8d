"""What a plugin author needs to test a portal: a stand-in, the service against it, waits.

    with Standin("toy_registry", create_app) as standin, \\
            Service(plugins="toy_portal.flow", portals=[standin]) as service:
        job = service.enqueue("toy_apply", {"company": "Toy Widgets"}, order="ORD-T1")
        with service.node():
            shown = service.wait_for(job, "completed", within=90)

- :class:`Standin` serves a stand-in portal (an ASGI app built from the stand-in kit's
  :class:`PortalState`: its ledger of what was filed, its faults such as
  ``hang_after_submit``) in a thread of the test's own process, so the test reads and
  switches them directly.
- :class:`Service` is the real thing, run as the operator runs it: ``portalq migrate`` on a
  database (``PORTALQ_DATABASE_URL`` if set, else an embedded server of its own in a
  temporary ``PORTALQ_HOME``, stopped at the end), ``portalq`` CLI commands, and
  ``portalq run`` nodes (subprocesses, so one can be killed with SIGKILL mid-filing).
- Every wait has a deadline and says what it waited for when it runs out
  (:func:`wait_until`); jobs are read from the database as the application sees them
  (:func:`portalq.jobs.business.results.result`: secrets scrubbed).
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.types import ASGIApp

from portalq.jobs.business import results
from portalq.jobs.db.embedded import EmbeddedPostgres
from portalq.jobs.db.txn import connect
from portalq.portals.standin.kit.state import Faults, PortalState

__all__ = ["Faults", "Node", "PortalState", "Service", "Standin", "wait_until"]

T = TypeVar("T")

#: what a job's status is once nothing more will happen to it without a person
FINAL = ("completed", "failed", "cancelled")


def wait_until(check: Callable[[], T], within: float, what: str, *,
               every: float = 0.05) -> T:
    """``check()`` once it is truthy, asked every ``every`` seconds; AssertionError naming
    ``what`` if it is not within ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        time.sleep(every)


class Standin:
    """A stand-in portal ``code`` served on a free port of 127.0.0.1 while in ``with``.

    ``create_app(state)`` builds its ASGI app (a Starlette app, as each built-in stand-in's
    ``create_app``); ``state`` keeps its ledger (``state.record(entry)`` numbers and stamps
    an entry, ``state.find(reference=...)`` looks one up) and its faults
    (``state.faults.hang_after_submit``: the answer never comes, ``await
    state.hang_if_asked()``)."""

    def __init__(self, code: str, create_app: Callable[[PortalState], ASGIApp]) -> None:
        self.code = code
        self.state = PortalState(code)
        config = uvicorn.Config(create_app(self.state), host="127.0.0.1", port=0,
                                log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve()),
                                        name=f"standin-{code}", daemon=True)
        self.url = ""

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """What the portal recorded as filed, oldest first."""
        with self.state.lock:
            return list(self.state.ledger)

    @property
    def faults(self) -> Faults:
        return self.state.faults

    def __enter__(self) -> Standin:
        self._thread.start()
        wait_until(lambda: self._server.started or not self._thread.is_alive(), 20,
                   f"the {self.code} stand-in to start", every=0.01)
        if not self._server.started:
            raise RuntimeError(f"the {self.code} stand-in did not start")
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.faults.hang_after_submit = False   # a hanging answer ends
        self._server.should_exit = True
        self._thread.join(timeout=10)


class Node:
    """One ``portalq run`` process, started and ready (it printed ``portalq ready``)."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log: Path,
                 within: float) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE,
                                         stderr=err)
        assert self.proc.stdout is not None
        out, deadline = self.proc.stdout, time.monotonic() + within
        ready = select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]
        if not ready or b"portalq ready" not in out.readline():
            self.kill()
            raise RuntimeError(f"portalq run did not start within {within:g}s:\n"
                               + log.read_text(errors="replace")[-3000:])

    def kill(self) -> None:
        """SIGKILL: no goodbye, its jobs left running (a crash, a pulled plug)."""
        self._end(signal.SIGKILL, 10)

    def stop(self) -> None:
        """SIGTERM: a graceful shutdown (a running flow finishes first)."""
        self._end(signal.SIGTERM, 60)

    def _end(self, sig: int, within: float) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(within)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Service:
    """The database, ``portalq migrate`` and ``portalq run`` nodes for one test.

    ``plugins``: the modules declaring the job types (``PORTALQ_PLUGINS``); ``portals``:
    stand-ins (or ``{code: url}``) the portals are pointed at
    (``PORTALQ_PORTAL_URL_<CODE>``); ``stale_after``: seconds after which a silent node's
    jobs are rescued (a test of the rescue says a few); ``env``: more settings."""

    def __init__(self, *, plugins: str | Iterable[str],
                 portals: Iterable[Standin] | Mapping[str, str] = (),
                 stale_after: float = 10, env: Mapping[str, str] | None = None) -> None:
        urls = dict(portals) if isinstance(portals, Mapping) else {
            s.code: s.url for s in portals}
        self._tmp = tempfile.TemporaryDirectory(prefix="portalq-test-")
        self.home = Path(self._tmp.name)
        self.env = {**os.environ, "PORTALQ_HOME": str(self.home),
                    "PORTALQ_PLUGINS": plugins if isinstance(plugins, str) else ",".join(plugins),
                    "PORTALQ_STALE_AFTER_SECONDS": f"{stale_after:g}",
                    "PORTALQ_HEARTBEAT_SECONDS": "0.5", "PORTALQ_TICK_SECONDS": "1",
                    "PORTALQ_POLL_SECONDS": "0.2",
                    **{f"PORTALQ_PORTAL_URL_{code.upper()}": url for code, url in urls.items()},
                    **(env or {})}
        #: a database of the test's own (an embedded server in ``home``, destroyed at the end)
        self.own_database = not self.env.get("PORTALQ_DATABASE_URL")
        self.url = self.env.get("PORTALQ_DATABASE_URL", "")
        self.nodes: list[Node] = []
        #: what ``portalq migrate`` said (e.g. "portals added: toy_registry")
        self.migrated = ""

    def __enter__(self) -> Service:
        try:
            self.migrated = self.portalq("migrate").stdout
            if self.own_database:   # the embedded server migrate started, in our home
                self.url = EmbeddedPostgres(self.home).ensure_running()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            node.stop()
        if self.own_database:
            EmbeddedPostgres(self.home).destroy()
        self._tmp.cleanup()

    def portalq(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``portalq *args`` (AssertionError with its stderr if it fails and ``check``)."""
        out = subprocess.run([sys.executable, "-m", "portalq", *args], env=self.env,
                             capture_output=True, text=True, timeout=180)
        if check and out.returncode != 0:
            raise AssertionError(f"portalq {' '.join(args[:2])} exited {out.returncode}: "
                                 f"{out.stderr.strip()[-2000:]}")
        return out

    def enqueue(self, job_type: str, payload: Mapping[str, Any] | str, *, order: str) -> int:
        """``portalq enqueue`` (``payload`` given as JSON on its command line); the job's id."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return int(self.portalq("enqueue", job_type, "--order", order, "--payload",
                                text).stdout.strip())

    @contextmanager
    def node(self, name: str = "node-1", *, within: float = 60) -> Iterator[Node]:
        """A ``portalq run`` node while in ``with`` (stopped with SIGTERM at its end,
        unless the test killed it)."""
        started = Node([sys.executable, "-m", "portalq", "run"],
                       {**self.env, "PORTALQ_NODE_ID": name}, self.home / f"{name}.log",
                       within)
        self.nodes.append(started)
        try:
            yield started
        finally:
            started.stop()

    def job(self, job_id: int) -> dict[str, Any]:
        """The job as the application sees it: status, result, last error, timeline."""
        with connect(self.url) as conn:
            return results.result(job_id, conn)

    def wait_for(self, job_id: int, *statuses: str, within: float) -> dict[str, Any]:
        """The job once its status is one of ``statuses``; AssertionError (with its last
        error) if it ends otherwise or not within ``within`` seconds."""
        seen: dict[str, Any] = {}

        def reached() -> bool:
            seen.update(self.job(job_id))
            if seen["status"] in FINAL and seen["status"] not in statuses:
                raise AssertionError(f"job {job_id} is {seen['status']}, not "
                                     f"{' or '.join(statuses)}: {seen['last_error']}")
            return seen["status"] in statuses

        wait_until(reached, within, f"job {job_id} to be {' or '.join(statuses)}", every=0.2)
        return seen
