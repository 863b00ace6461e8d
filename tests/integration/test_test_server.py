"""The suite stops the embedded PostgreSQL it started, and only when no other pytest
session (a concurrent run with the same PORTALQ_TEST_HOME) still uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from portalq.jobs.db.embedded import EmbeddedPostgres
from tests.conftest import ROOT, ServerUsers


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_last_session_out_stops_a_server_tests_started(tmp_path):
    users = ServerUsers(tmp_path)
    stopped: list[bool] = []
    users.join(running=False)            # this session starts it
    other = users.dir / str(os.getppid())  # a live process: another session
    other.touch()
    assert users.leave(lambda: stopped.append(True)) is False and stopped == []
    other.unlink()
    users.join(running=True)
    ghost = users.dir / str(dead_pid())  # a session that was killed: it does not count
    ghost.touch()
    assert users.leave(lambda: stopped.append(True)) is True and stopped == [True]
    assert not ghost.exists()


def test_a_server_started_by_hand_is_left_running(tmp_path):
    users = ServerUsers(tmp_path)
    users.join(running=True)  # running already, and no test session started it
    assert users.leave(lambda: (_ for _ in ()).throw(AssertionError("stopped"))) is False


def test_a_whole_pytest_session_leaves_no_server_behind(tmp_path, server_home):
    """A real session on a fresh test home: its server runs during the test, not after."""
    home = server_home
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent("""
        def test_uses_the_database(conn):
            assert conn.execute("SELECT 1").fetchone() == (1,)
    """))
    env = {**os.environ, "PORTALQ_TEST_HOME": str(home)}
    env.pop("PORTALQ_TEST_DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "tests.conftest", "-c", str(ROOT / "pyproject.toml"),
                          str(probe)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    pg = EmbeddedPostgres(home)
    assert (pg.pgdata / "PG_VERSION").exists()  # it did run there
    assert not pg.is_running() and not (pg.pgdata / "postmaster.pid").exists()
