"""`portalq keys retire` and the other databases on the same key file (issue 35, item 4):
``portalq`` and ``portalq_demo`` share one by default; retiring a key after rotating one of
them deleted a key the other still needed, and its values were lost."""

from __future__ import annotations

import json

import psycopg
import pytest

from portalq.jobs import queue
from portalq.jobs.db.location import libpq_dsn
from portalq.jobs.errors import IllegalTransition
from portalq.jobs.secrets import crypto, key_record
from portalq.jobs.secrets import rotation as keys
from portalq.jobs.secrets import sealing as secrets_at_rest
from tests.conftest import run_cli
from tests.plugins import ledger
from tests.service_helpers import add_local_portal


def _sealed(dsn: str, n: int) -> list[int]:
    add_local_portal(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        return [e.id for e in queue.enqueue_many([
            queue.NewJob("ledger_secret", f"R-{i}", {"n": i, "ssn": ledger.secret_ssn(i)})
            for i in range(n)], c)]


def _ssns(dsn: str, ids: list[int], p) -> list[str]:
    with psycopg.connect(dsn) as c:
        return [secrets_at_rest.reveal(queue.get_job(i, c), p)["ssn"] for i in ids]


@pytest.fixture
def ring(tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    yield ring
    crypto.set_provider(None)


@pytest.fixture
def other(pg_server):
    """A second database on the same key file (as portalq_demo is)."""
    name = pg_server.create()
    other_urls[name] = pg_server.url(name)
    yield libpq_dsn(pg_server.url(name))
    pg_server.drop(name)


#: the other databases' URLs, by name (for --also)
other_urls: dict[str, str] = {}


def _rotate_here(ring) -> str:
    """`portalq keys rotate` against this database only; the key it made old."""
    old = ring.current_id()
    ring.add_current()
    assert keys.rewrap_all(queue.connect, ring).left == {}
    return old


def test_retire_rewraps_the_other_database_on_the_key_file(dsn, other, ring):
    here, there = _sealed(dsn, 3), _sealed(other, 4)
    old = _rotate_here(ring)
    keys.retire(queue.connect, old, ring)
    assert old not in ring.key_ids()
    # the other database's values were re-wrapped too, not lost
    assert _ssns(other, there, crypto.FileKeyring(ring.path)) == [
        ledger.secret_ssn(i) for i in range(4)]
    assert _ssns(dsn, here, ring) == [ledger.secret_ssn(i) for i in range(3)]


def _break_record(ring, other: str) -> None:
    """The other database's recorded way in no longer works (moved, another password)."""
    name = psycopg.conninfo.conninfo_to_dict(other)["dbname"]
    data = key_record.read(ring.path)
    [ident] = [i for i, e in data["databases"].items() if e["name"] == name]
    data["databases"][ident]["dsn"] = "host=/nonexistent dbname=gone user=nobody"
    key_record.write(ring.path, data)


def test_an_unreachable_other_database_refuses_in_one_line(dsn, db, other, ring, tmp_path):
    _sealed(dsn, 2)
    there = _sealed(other, 2)
    old = _rotate_here(ring)
    _break_record(ring, other)
    name = psycopg.conninfo.conninfo_to_dict(other)["dbname"]
    env = {"PORTALQ_KEY_FILE": str(ring.path), "PORTALQ_DATABASE_URL": db}
    out = run_cli("keys", "retire", old, env=env)
    assert out.returncode != 0
    assert name in out.stderr and "--also" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert old in json.loads(ring.path.read_text())["keks"]   # nothing deleted
    # given its URL, it is checked (and re-wrapped) there, and the key goes
    out = run_cli("keys", "retire", old, "--also", other_urls[name], env=env)
    assert out.returncode == 0, out.stderr
    assert old not in json.loads(ring.path.read_text())["keks"]
    assert _ssns(other, there, crypto.FileKeyring(ring.path)) == [
        ledger.secret_ssn(i) for i in range(2)]


def test_a_dropped_database_is_forgotten_and_one_gone_elsewhere_is_forgotten_by_name(
        dsn, db, pg_server, ring):
    _sealed(dsn, 1)
    name = pg_server.create()
    _sealed(libpq_dsn(pg_server.url(name)), 1)
    pg_server.drop(name)   # dropped on a cluster portalq reaches: its record goes by itself
    data = key_record.read(ring.path)   # and one on a server that is gone for good
    data["databases"]["42/elsewhere"] = {"name": "elsewhere", "dsn": "host=/nonexistent"}
    key_record.write(ring.path, data)
    old = _rotate_here(ring)
    with pytest.raises(IllegalTransition, match="database elsewhere .*forget-database"):
        keys.retire(queue.connect, old, ring)
    assert name not in json.dumps(key_record.read(ring.path))
    env = {"PORTALQ_KEY_FILE": str(ring.path), "PORTALQ_DATABASE_URL": db}
    out = run_cli("keys", "forget-database", "elsewhere", env=env)
    assert out.returncode == 0, out.stderr
    out = run_cli("keys", "status", env=env)
    assert "elsewhere" not in out.stdout and "database using this key file" in out.stdout
    keys.retire(queue.connect, old, ring)
    assert old not in ring.key_ids()


def test_a_key_older_than_the_record_needs_the_operators_word(dsn, db, tmp_path):
    path = tmp_path / "keys.json"
    ring = crypto.FileKeyring(path, create=True)
    old = ring.current_id()
    key_record.record_path(path).unlink()   # a key file of an older portalq
    crypto.set_provider(ring)
    try:
        _sealed(dsn, 1)
        ring.add_current()
        env = {"PORTALQ_KEY_FILE": str(path), "PORTALQ_DATABASE_URL": db}
        out = run_cli("keys", "retire", old, env=env)
        assert out.returncode != 0 and "--only-recorded" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert old in ring.key_ids()
        out = run_cli("keys", "retire", old, "--only-recorded", env=env)
        assert out.returncode == 0, out.stderr
        assert old not in crypto.FileKeyring(path).key_ids()
    finally:
        crypto.set_provider(None)


def test_retire_refuses_while_the_other_database_still_has_busy_rows(dsn, other, ring):
    _sealed(dsn, 1)
    there = _sealed(other, 2)
    old = _rotate_here(ring)
    with psycopg.connect(other) as lock:   # a worker holds the other database's rows
        lock.execute("SELECT 1 FROM portalq.job_queue WHERE id = ANY(%s) FOR UPDATE", (there,))
        with pytest.raises(IllegalTransition, match="still use key"):
            keys.retire(queue.connect, old, ring)
    assert old in ring.key_ids()


def test_a_record_that_cannot_be_read_stops_retire_not_the_enqueue(dsn, db, tmp_path):
    path = tmp_path / "keys.json"
    ring = crypto.FileKeyring(path, create=True)
    old = ring.current_id()
    key_record.record_path(path).write_text("not json")
    crypto.set_provider(ring)
    try:
        assert len(_sealed(dsn, 2)) == 2   # sealed and stored all the same
        ring.add_current()
        env = {"PORTALQ_KEY_FILE": str(path), "PORTALQ_DATABASE_URL": db}
        out = run_cli("keys", "retire", old, env=env)
        assert out.returncode != 0 and "record of the databases" in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert old in crypto.FileKeyring(path).key_ids()
    finally:
        crypto.set_provider(None)
