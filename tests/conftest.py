"""Test databases: a real PostgreSQL server, one fresh database per test.

By default the same embedded server portalq uses (its own data dir, under
``PORTALQ_TEST_HOME``, default /tmp/portalq-test-<uid>); with ``PORTALQ_TEST_DATABASE_URL``
(a server URL with a superuser-ish role able to CREATE DATABASE) that server instead.
Each test gets a database cloned from a migrated template (CREATE DATABASE ... TEMPLATE).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy.engine import make_url

from portalq.jobs import clock
from portalq.jobs.secrets.key_providers import FileKeyring
from tests import cli_zygote

ROOT = Path(__file__).resolve().parent.parent
_counter = itertools.count()
TEST_HOME = Path(os.environ.get("PORTALQ_TEST_HOME", f"/tmp/portalq-test-{os.getuid()}"))
# one keyring for the tests and the services and CLIs they start (their PORTALQ_HOME differs)
os.environ.setdefault("PORTALQ_KEY_FILE", str(TEST_HOME / "keys.json"))
# made here, as `portalq keys init` makes one: no process makes a keyring by itself
FileKeyring(Path(os.environ["PORTALQ_KEY_FILE"])).init()
# the Delaware flow pays with the secrets provider's payment method (a test card)
os.environ.setdefault("PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_METHOD", json.dumps({
    "type": "CREDITCARD", "name": "Ada Filer", "number": "4111111111111111",
    "expiry": "12/30", "address": "251 Little Falls Dr, Wilmington DE 19808",
    "phone": "302-555-0101"}))
# the stand-in's PayBC takes payments at any hour: a BC incorporation is not deferred by the
# wall clock (tests of PayBC's hours freeze the clock and drop this)
os.environ.setdefault("PORTALQ_STEP_HOURS_BC_CORPORATE_ONLINE_PAYMENT", "Daily 00:00-24:00")
# the deployment is a formation firm: an obtain_ein job that names no designee and does not
# say the responsible party applies in person applies as this one (tests of the refusal at
# enqueue drop these; portals/irs/payload.py)
for _name, _value in {"NAME": "Test Formation Partners LLC", "STREET": "8 Filing Row",
                      "CITY": "Dover", "STATE": "DE", "ZIP": "19904",
                      "PHONE": "302-555-0177", "FAX": "302-555-0178"}.items():
    os.environ.setdefault(f"PORTALQ_IRS_DESIGNEE_{_name}", _value)
# Hypothesis fails an example that takes over 200 ms: a test that depends on the machine
# being idle (seen at load 16: 310 ms for a URL round trip). Speed is the benchmarks' job.
hypothesis_settings.register_profile("portalq", deadline=None, database=None)
hypothesis_settings.load_profile("portalq")


def _migrations_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "migrations").rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:10]


class ServerUsers:
    """Which pytest sessions use the embedded test server: one file per session (its pid)
    in ``<home>/sessions``, changed under a lock. The last session to leave stops the
    server, if a test session started it (not one an operator started by hand), and never
    while another live session (a concurrent pytest with the same home) still uses it."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "sessions"
        self.me = self.dir / str(os.getpid())
        self.marker = self.dir / "started-by-tests"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # the home owner-only, as portalq makes it (the test of its modes runs on it)
        self.dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.dir.mkdir(mode=0o700, exist_ok=True)
        with open(self.dir / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def join(self, running: bool) -> None:
        with self._locked():
            self.me.touch()
            if not running:
                self.marker.touch()

    def others_alive(self) -> bool:
        for f in self.dir.iterdir():
            if not f.name.isdigit() or f == self.me:
                continue
            try:
                os.kill(int(f.name), 0)
                return True
            except ProcessLookupError:
                f.unlink(missing_ok=True)  # a session that died without leaving
            except PermissionError:
                return True
        return False

    def leave(self, stop: Callable[[], None]) -> bool:
        """Deregister; stop the server if this was the last session. True if stopped."""
        with self._locked():
            self.me.unlink(missing_ok=True)
            if self.others_alive() or not self.marker.exists():
                return False
            stop()
            self.marker.unlink(missing_ok=True)
            return True


class TestServer:
    def __init__(self) -> None:
        url = os.environ.get("PORTALQ_TEST_DATABASE_URL")
        self.embedded = None
        self.users: ServerUsers | None = None
        if url:
            self.base = make_url(url).set(drivername="postgresql+psycopg")
        else:
            from portalq.jobs.db.embedded import EmbeddedPostgres

            home = TEST_HOME
            settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
            pg = EmbeddedPostgres(home, settings=settings)
            # registered before it is started: a session ending meanwhile sees this one
            self.users = ServerUsers(home)
            self.users.join(running=pg.is_running())
            try:
                url = pg.ensure_running()
            except subprocess.CalledProcessError:
                # a test cluster runs with fsync=off: after a hard kill its data may not
                # recover; it holds nothing worth keeping, so start over
                shutil.rmtree(pg.pgdata, ignore_errors=True)
                shutil.rmtree(home, ignore_errors=True)
                self.users.join(running=False)
                pg = EmbeddedPostgres(home, settings=settings)
                url = pg.ensure_running()
            self.embedded = pg
            # the tests administer their databases: the owner role (portalq itself runs
            # as the app role; tests/integration/test_data_protection.py checks that)
            self.base = make_url(pg.url(role="postgres"))
        # its stored holidays start last year (by this process's clock): a template built
        # last year would give every test database last year's range
        from portalq.jobs import clock

        self.template = f"portalq_tpl_{_migrations_digest()}_{clock.now().year}"

    def close(self) -> None:
        """End of the session: stop the embedded server if no other session uses it."""
        if self.users is not None and self.embedded is not None:
            self.users.leave(self.embedded.stop)

    def url(self, database: str) -> str:
        return self.base.set(database=database).render_as_string(hide_password=False)

    def dsn(self, database: str) -> str:
        return self.base.set(drivername="postgresql", database=database).render_as_string(
            hide_password=False)

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn("postgres"), autocommit=True)

    def ensure_template(self) -> None:
        with self.admin() as conn:
            # one pytest process at a time builds the template
            conn.execute("SELECT pg_advisory_lock(7262019999)")
            try:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                (self.template,)).fetchone():
                    return
                conn.execute(f'CREATE DATABASE "{self.template}"')
                from portalq.jobs.db.migrate import upgrade
                from portalq.scheduler.calendar_cache import store_holidays

                upgrade(self.url(self.template))           # as `portalq migrate` does
                store_holidays(self.url(self.template))
            finally:
                conn.execute("SELECT pg_advisory_unlock(7262019999)")

    def create(self) -> str:
        name = f"t_{os.getpid()}_{next(_counter)}"
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return name

    def drop(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TestServer]:
    server = TestServer()
    try:
        server.ensure_template()
        yield server
    finally:
        server.close()


@pytest.fixture
def db(pg_server: TestServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh migrated database; its SQLAlchemy URL (also in PORTALQ_DATABASE_URL)."""
    name = pg_server.create()
    url = pg_server.url(name)
    monkeypatch.setenv("PORTALQ_DATABASE_URL", url)
    yield url
    pg_server.drop(name)


@pytest.fixture
def server_home() -> Iterator[Path]:
    """A fresh directory for an embedded server of a test's own. Not under pytest's
    tmp_path: run as root, the server runs as another user that must traverse every parent,
    and each pytest session resets /tmp/pytest-of-<user> to mode 0700 (a concurrent
    session would lock the server out of its data directory mid-test)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="portalq-test-pg-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def dsn(db: str) -> str:
    from portalq.jobs.db.location import libpq_dsn

    return libpq_dsn(db)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture(autouse=True)
def _restore_clock() -> Iterator[None]:
    yield
    clock.set_clock(None)


_FORKS = None if os.environ.get("PORTALQ_TEST_CLI") == "subprocess" else cli_zygote.Client(
    str(ROOT))


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``portalq`` CLI in a process of its own: forked from a server that
    imported its third-party libraries once (tests/cli_zygote.py), else a subprocess."""
    full_env = {**os.environ, **(env or {})}
    if _FORKS is not None and _FORKS.serves(full_env):
        return _FORKS.run(list(args), full_env, str(ROOT), timeout, input)
    return subprocess.run([sys.executable, "-m", "portalq", *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout, input=input, cwd=ROOT)


def _start_rank(item: pytest.Item) -> int:
    """Long tests first: with several pytest processes (``make test`` runs them with
    pytest-xdist) a two-minute drain that starts last is the whole run's tail."""
    if item.get_closest_marker("slow"):
        return 0
    if item.get_closest_marker("browser"):
        return 1
    return 2 if "acceptance" in item.nodeid else 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)   # stable: a module's tests keep their order
