"""Erased is gone (issue 35, item 5): every job's secrets are sealed with a data key of their
own, so erasing a job (deleting its wrapped key) leaves nothing in the database that opens a
copy of its ciphertext -- not the other jobs of its batch -- and once the key-encryption key
it was wrapped under is retired, not even a full copy of its old row (heap, WAL, backup)."""

from __future__ import annotations

import base64
import json
import os
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from portalq.jobs import clock, queue
from portalq.jobs.secrets import crypto
from portalq.jobs.secrets import rotation as keys
from portalq.jobs.secrets import sealing as secrets_at_rest
from tests.plugins import ledger  # noqa: F401 - registers ledger_secret
from tests.service_helpers import add_local_portal

FIELD = secrets_at_rest.SECRETS_FIELD


def _batch(dsn: str, n: int) -> list[int]:
    add_local_portal(dsn)
    later = clock.now() + timedelta(days=1)   # waiting, so that cancelling erases them
    return [e.id for e in queue.enqueue_many([
        queue.NewJob("ledger_secret", f"B-{i}", {"n": i, "ssn": ledger.secret_ssn(i)},
                     run_at=later) for i in range(n)])]


def _copy(conn, job_id: int) -> tuple[str, bytes, bytes]:
    """What an attacker with a heap page, the WAL or a backup holds of the row."""
    key_id, dek, data = conn.execute("SELECT secret_key_id, secret_dek, secret_data "
                                     "FROM portalq.job_queue WHERE id = %s", (job_id,)).fetchone()
    return key_id, bytes(dek), bytes(data)


def _opens(key_id: str, dek: bytes, data: bytes, job_id: int, p) -> bool:
    try:
        crypto.open_sealed(key_id, dek, data, p,
                           aad=crypto.place(job_id, "ledger_secret", FIELD))
    except (crypto.NotItsPlace, crypto.KeyError_):
        return False
    return True


def _live_keys(conn) -> list[tuple[str, bytes]]:
    return [(k, bytes(d)) for k, d in conn.execute(
        "SELECT secret_key_id, secret_dek FROM portalq.job_queue WHERE secret_dek IS NOT NULL")]


def _ssns(conn, ids: list[int]) -> list[str]:
    return [secrets_at_rest.reveal(queue.get_job(i, conn))["ssn"] for i in ids]


@pytest.fixture
def ring(tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    yield ring
    crypto.set_provider(None)


def test_an_erased_job_of_a_batch_no_longer_opens(conn, dsn, ring):
    ids = _batch(dsn, 20)
    victim, others = ids[7], ids[:7] + ids[8:]
    stolen = _copy(conn, victim)
    queue.cancel(victim)   # erases its secrets
    assert conn.execute("SELECT secret_dek FROM portalq.job_queue WHERE id = %s",
                        (victim,)).fetchone() == (None,)
    # no key the database still holds opens the copied ciphertext (the batch's others: no)
    live = _live_keys(conn)
    assert len(live) == 19
    assert not any(_opens(k, d, stolen[2], victim, ring) for k, d in live)
    assert _ssns(conn, others) == [ledger.secret_ssn(i) for i in range(20) if i != 7]
    # the full old row opens while its key-encryption key lives; rotate + retire: gone
    assert _opens(*stolen, victim, ring)
    old = ring.current_id()
    ring.add_current()
    keys.retire(queue.connect, old, ring)
    thief = crypto.FileKeyring(ring.path)   # the key file as it is now, in another process
    for p in (ring, thief):
        assert not _opens(*stolen, victim, p)
        assert not any(_opens(k, d, stolen[2], victim, p) for k, d in _live_keys(conn))
    assert _ssns(conn, others) == [ledger.secret_ssn(i) for i in range(20) if i != 7]


def test_every_value_of_a_batch_has_a_data_key_of_its_own(conn, dsn, ring):
    ids = _batch(dsn, queue.COPY_MIN + 5)   # the COPY path of the batch enqueue too
    deks = {ring.unwrap(*_copy(conn, i)[:2]) for i in ids}
    assert len(deks) == len(ids)
    assert {_copy(conn, i)[2][:4] for i in ids} == {crypto.V3}


def _seal_sharing_one_key(conn, ids: list[int], ring) -> None:
    """Rows as an older portalq sealed a batch: one data key, format 2."""
    dek = AESGCM.generate_key(256)
    key_id, wrapped = ring.wrap(dek)
    for i in ids:
        n = queue.get_job(i, conn)["payload"]["n"]
        nonce = os.urandom(crypto.NONCE)
        data = crypto.V2 + nonce + AESGCM(dek).encrypt(
            nonce, json.dumps({"ssn": ledger.secret_ssn(n)}).encode(),
            crypto.place(i, "ledger_secret", FIELD))
        conn.execute("UPDATE portalq.job_queue SET secret_key_id = %s, secret_dek = %s, "
                     "secret_data = %s WHERE id = %s", (key_id, wrapped, data, i))


def test_values_sealed_sharing_a_key_still_open_and_rotate_gives_each_its_own(conn, dsn,
                                                                               ring):
    ids = _batch(dsn, 6)
    _seal_sharing_one_key(conn, ids, ring)
    assert _ssns(conn, ids) == [ledger.secret_ssn(i) for i in range(6)]   # still open
    stolen = _copy(conn, ids[2])
    old = ring.current_id()
    ring.add_current()
    report = keys.rewrap_all(queue.connect, ring)
    assert report.left == {}
    assert len({ring.unwrap(*_copy(conn, i)[:2]) for i in ids}) == 6
    queue.cancel(ids[2])
    keys.retire(queue.connect, old, ring)
    thief = crypto.FileKeyring(ring.path)
    for p in (ring, thief):
        assert not _opens(*stolen, ids[2], p)
        assert not any(_opens(k, d, stolen[2], ids[2], p) for k, d in _live_keys(conn))
    assert _ssns(conn, ids[:2] + ids[3:]) == [ledger.secret_ssn(i) for i in (0, 1, 3, 4, 5)]


def _old_checkpoint_values(conn, ids: list[int], ring) -> None:
    """Checkpoint values as an older portalq sealed them in one burst: one data key."""
    dek = AESGCM.generate_key(256)
    key_id, wrapped = ring.wrap(dek)
    for i in ids:
        nonce = os.urandom(crypto.NONCE)
        data = crypto.V2 + nonce + AESGCM(dek).encrypt(
            nonce, json.dumps(f"secret-{i}").encode(),
            crypto.place(i, "ledger_secret", "checkpoint:token"))
        blob = b"PQE1" + len(wrapped).to_bytes(2, "big") + wrapped + data
        value = f"{secrets_at_rest.CHECKPOINT_PREFIX}{key_id}:{base64.b64encode(blob).decode()}"
        conn.execute("UPDATE portalq.job_queue SET checkpoint = jsonb_build_object('token', %s::text) "
                     "WHERE id = %s", (value, i))


def _checkpoint_key(conn, job_id: int, ring) -> tuple[bytes, bytes]:
    """(the data key, the sealed data's first bytes) of a job's checkpoint value."""
    value = queue.get_job(job_id, conn)["checkpoint"]["token"]
    key_id, b64 = value[len(secrets_at_rest.CHECKPOINT_PREFIX):].split(":", 1)
    wrapped, data = crypto.split_blob(base64.b64decode(b64))
    return ring.unwrap(key_id, wrapped), data[:4]


def test_checkpoint_values_sealed_sharing_a_key_get_a_key_each_at_rotate(conn, dsn, ring):
    ids = _batch(dsn, 3)
    _old_checkpoint_values(conn, ids, ring)
    assert len({_checkpoint_key(conn, i, ring)[0] for i in ids}) == 1
    ring.add_current()
    assert keys.rewrap_all(queue.connect, ring).left == {}
    after = [_checkpoint_key(conn, i, ring) for i in ids]
    assert len({k for k, _ in after}) == 3 and {m for _, m in after} == {crypto.V3}
    for i in ids:
        assert secrets_at_rest.open_checkpoint(i, "ledger_secret", queue.get_job(
            i, conn)["checkpoint"])["token"] == f"secret-{i}"
