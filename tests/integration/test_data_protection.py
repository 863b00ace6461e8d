"""Secrets at rest (issue 15): sealed on every enqueue path, opened only with the key,
erased after use, keyed rate keys, sealed documents, key rotation."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import timedelta

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.errors import InputError
from portalq.jobs.secrets import crypto, key_providers
from portalq.jobs.secrets import rotation as keys
from portalq.jobs.secrets import sealing as secrets_at_rest
from tests import payloads
from tests.plugins import ledger  # noqa: F401 - registers ledger_secret

SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]
FORMS = (SSN, SSN.replace("-", ""), SSN.replace("-", " "))


def _ein(ssn: str, name: str = "Widgets LLC") -> dict:
    return {**payloads.OBTAIN_EIN, "legal_name": name,
            "responsible_party": {**payloads.OBTAIN_EIN["responsible_party"], "ssn": ssn}}


def _row_text(conn, job_id: int) -> str:
    return conn.execute("SELECT q::text FROM portalq.job_queue q WHERE id = %s", (job_id,)).fetchone()[0]


def _run(coro):
    return asyncio.run(coro)


async def _aconn(dsn):
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


def test_every_enqueue_path_seals_the_secret_fields(conn, db):
    one = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN, conn=conn)
    few = queue.enqueue_many([queue.NewJob("obtain_ein", f"O-{i}", _ein(f"123-45-{i:04d}"),
                                           idempotency_key=f"k{i}") for i in range(3)])
    copied = queue.enqueue_many([queue.NewJob("obtain_ein", f"C-{i}", _ein(f"123-46-{i:04d}"))
                                 for i in range(queue.COPY_MIN)])
    ssns = [SSN, *(f"123-45-{i:04d}" for i in range(3)),
            *(f"123-46-{i:04d}" for i in range(queue.COPY_MIN))]
    for e, ssn in zip([one, *few, *copied], ssns, strict=True):
        text = _row_text(conn, e.id)
        # every written form of the job's own number, whole: a shorter probe ("12345") also
        # matches hex digests and ciphertext by chance (about one run in 150)
        forms = (ssn, ssn.replace("-", ""), ssn.replace("-", " "))
        assert not any(f in text for f in forms), e.id
        row = queue.get_job(e.id, conn)
        assert row["payload"]["responsible_party"]["ssn"] == secrets_at_rest.MARKER
        assert row["secret_key_id"] == crypto.provider().current_id()
    assert secrets_at_rest.reveal(queue.get_job(one.id, conn))["responsible_party"]["ssn"] == SSN
    assert secrets_at_rest.reveal(queue.get_job(copied[-1].id, conn))[
        "responsible_party"]["ssn"] == f"123-46-{queue.COPY_MIN - 1:04d}"


def test_sealed_values_open_only_with_their_key(conn, db, tmp_path):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    row = queue.get_job(job.id, conn)
    other = crypto.FileKeyring(tmp_path / "other-keys.json", create=True)
    with pytest.raises(crypto.KeyError_):
        secrets_at_rest.reveal(row, other)
    tampered = {**row, "secret_data": bytes(row["secret_data"][:-1]) + b"\x00"}
    with pytest.raises(secrets_at_rest.SecretsNotTheirs, match="do not open for this job"):
        secrets_at_rest.reveal(tampered)


def test_rate_key_is_an_hmac_not_a_bare_hash(conn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    key = conn.execute("SELECT rate_key FROM portalq.job_queue WHERE id = %s", (job.id,)).fetchone()[0]
    bare = hashlib.sha256(f"obtain_ein:{SSN}".encode()).hexdigest()[:32]
    assert key != bare and key == crypto.keyed_hash(f"obtain_ein:{SSN}")
    other = crypto.EnvKeys("x:" + key_providers.b64(b"\x01" * 32),
                           key_providers.b64(b"\x02" * 32))
    assert key != crypto.keyed_hash(f"obtain_ein:{SSN}", other)   # needs the secret key


def _claim_all(dsn, worker="w1"):
    async def go():
        async with await _aconn(dsn) as c:
            return await worker_api.claim(c, worker=worker, limit=50, capacities=[
                worker_api.Capacity("irs_ein", None)])
    return _run(go())


def test_completion_erases_the_secrets_in_the_same_statement(conn, dsn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    [claimed] = _claim_all(dsn)
    assert secrets_at_rest.reveal(claimed)["responsible_party"]["ssn"] == SSN

    async def complete():
        async with await _aconn(dsn) as c:
            return await worker_api.complete_many(c, worker="w1", results=[(job.id, {"ein": 1})])
    assert _run(complete()) == {job.id}
    row = queue.get_job(job.id, conn)
    assert row["secret_data"] is None and row["secret_dek"] is None
    assert row["secrets_erased_at"] == row["finished_at"]
    with pytest.raises(secrets_at_rest.SecretsErased, match="was erased"):
        secrets_at_rest.reveal(row)


def test_cancel_erases_and_a_retry_asks_for_the_value_again(conn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN,
                        run_at=clock.now() + timedelta(days=1))
    queue.cancel(job.id)
    assert queue.get_job(job.id, conn)["secret_data"] is None
    with pytest.raises(InputError, match=r"responsible_party\.ssn was erased.*--payload-patch"):
        queue.retry(job.id)
    with pytest.raises(InputError, match="was erased"):   # a patch that does not give it
        queue.retry(job.id, payload_patch={"legal_name": "Other LLC"})
    assert queue.get_job(job.id, conn)["status"] == "cancelled"   # nothing written
    queue.retry(job.id, payload_patch={"responsible_party": {"ssn": "987-65-4321"}})
    row = queue.get_job(job.id, conn)
    assert row["status"] == "pending" and row["secrets_erased_at"] is None
    assert "987-65" not in _row_text(conn, job.id)
    assert secrets_at_rest.reveal(row)["responsible_party"]["ssn"] == "987-65-4321"


def test_a_patch_of_a_sealed_job_keeps_its_secret(conn, dsn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    _claim_all(dsn)

    async def fail():
        async with await _aconn(dsn) as c:
            await worker_api.finish_unsuccessful(c, job={"id": job.id}, worker="w1",
                                                 status="failed", error="refused")
    _run(fail())
    queue.retry(job.id, payload_patch={"legal_name": "Renamed LLC"})
    row = queue.get_job(job.id, conn)
    opened = secrets_at_rest.reveal(row)
    assert opened["responsible_party"]["ssn"] == SSN and opened["legal_name"] == "Renamed LLC"
    assert SSN not in _row_text(conn, job.id)


def test_failed_jobs_secrets_are_erased_after_the_retention_and_pruned_later(conn, dsn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    _claim_all(dsn)

    async def fail_then(days: float, fn):
        async with await _aconn(dsn) as c:
            clock.set_clock(lambda: start + timedelta(days=days))
            return await fn(c)
    start = clock.now()
    _run(fail_then(0, lambda c: worker_api.finish_unsuccessful(
        c, job={"id": job.id}, worker="w1", status="failed", error="refused")))
    erase = lambda c: worker_api.erase_failed_secrets(c, older_than=timedelta(days=30))  # noqa: E731
    assert _run(fail_then(29, erase)) == 0
    assert queue.get_job(job.id, conn)["secret_data"] is not None   # an admin may still retry
    assert _run(fail_then(31, erase)) == 1
    assert queue.get_job(job.id, conn)["secret_data"] is None
    prune = lambda c: worker_api.prune_finished(  # noqa: E731
        c, older_than=timedelta(days=30), failed_older_than=timedelta(days=90))
    assert _run(fail_then(89, prune)) == 0
    assert _run(fail_then(91, prune)) == 1


def test_documents_are_stored_sealed(conn, dsn, db):
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    letter = b"%PDF-1.4 CP 575 for Ada Lovelace, SSN " + SSN.encode()

    async def store_and_read():
        async with await _aconn(dsn) as c:
            await worker_api.store_document(c, job_id=job.id, name="CP575.pdf",
                                            content_type="application/pdf", data=letter)
            return await worker_api.documents_of(c, job.id)
    assert _run(store_and_read()) == [("CP575.pdf", "application/pdf", letter)]
    raw, key_id = conn.execute("SELECT data, key_id FROM portalq.job_documents").fetchone()
    assert b"Lovelace" not in raw and SSN.encode() not in raw
    assert key_id == crypto.provider().current_id()


def test_rotation_rewraps_everything_and_the_old_key_can_go(conn, dsn, db, tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    try:
        old = ring.current_id()
        ids = [e.id for e in queue.enqueue_many(
            [queue.NewJob("obtain_ein", f"O-{i}", _ein(f"123-45-{i:04d}")) for i in range(7)])]

        async def store():
            async with await _aconn(dsn) as c:
                await worker_api.store_document(c, job_id=ids[0], name="a.pdf",
                                                content_type="application/pdf", data=b"%PDF-x")
        _run(store())
        before = conn.execute("SELECT secret_data FROM portalq.job_queue WHERE id = %s",
                              (ids[0],)).fetchone()[0]
        new = ring.add_current()

        def connect():
            return queue.connect()
        report = keys.rewrap_all(connect, ring, batch=3)   # several batches
        assert (report.jobs, report.documents, report.left) == (7, 1, {})
        with queue.connect() as c:
            assert keys.usage(c) == {new: 8}
        keys.retire(connect, old, ring)
        assert ring.key_ids() == [new]
        assert json.loads((tmp_path / "keys.json").read_text())["keks"].keys() == {new}
        for i, job_id in enumerate(ids):
            row = queue.get_job(job_id, conn)
            assert secrets_at_rest.reveal(row)["responsible_party"]["ssn"] == f"123-45-{i:04d}"
        # only the wrapping changed, never the sealed data itself
        assert conn.execute("SELECT secret_data FROM portalq.job_queue WHERE id = %s",
                            (ids[0],)).fetchone()[0] == before
        with pytest.raises(crypto.KeyError_, match="current key"):
            ring.remove(new)
    finally:
        crypto.set_provider(None)


def test_jobs_enqueued_before_sealing_are_sealed_by_rotate(conn, dsn, db):
    """A job of an older portalq (plaintext secret field in the payload) is sealed by
    `portalq keys rotate`; the marker replaces the value."""
    job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
    conn.execute("UPDATE portalq.job_queue SET payload = jsonb_set(payload, '{responsible_party,ssn}',"
                 " to_jsonb(%s::text)), secret_key_id = NULL, secret_dek = NULL, "
                 "secret_data = NULL WHERE id = %s", (SSN, job.id))
    report = keys.rewrap_all(queue.connect)
    assert report.legacy_sealed == 1
    row = queue.get_job(job.id, conn)
    assert row["payload"]["responsible_party"]["ssn"] == secrets_at_rest.MARKER
    assert secrets_at_rest.reveal(row)["responsible_party"]["ssn"] == SSN


def test_key_file_is_created_owner_only_whatever_the_umask(tmp_path):
    import os
    import stat

    old = os.umask(0)
    try:
        ring = crypto.FileKeyring(tmp_path / "home" / "keys.json", create=True)
        ring.current_id()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "home" / "keys.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700


def test_secret_checkpoint_values_are_sealed_and_rotated(conn, dsn, db, tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    try:
        job = queue.enqueue("obtain_ein", "O-1", payloads.OBTAIN_EIN)
        [_claimed] = _claim_all(dsn)
        url = "https://irs.example/letters/tok3n/CP575_1.pdf"

        async def save():
            async with await _aconn(dsn) as c:
                return await worker_api.save_checkpoint(
                    c, job_id=job.id, worker="w1", data=secrets_at_rest.seal_checkpoint(
                        job.id, "obtain_ein", {"stage": "assigned", "cp575_url": url}))
        saved = _run(save())
        assert saved["stage"] == "assigned" and saved["cp575_url"].startswith("pqsealed1:")
        assert "tok3n" not in _row_text(conn, job.id)
        assert secrets_at_rest.open_checkpoint(job.id, "obtain_ein", saved)["cp575_url"] == url
        old, new = ring.current_id(), ring.add_current()
        report = keys.rewrap_all(queue.connect, ring)
        assert report.checkpoints == 1 and report.left == {}
        keys.retire(queue.connect, old, ring)
        row = queue.get_job(job.id, conn)
        assert row["checkpoint"]["cp575_url"].startswith(f"pqsealed1:{new}:")
        assert secrets_at_rest.open_checkpoint(job.id, "obtain_ein", row["checkpoint"])[
            "cp575_url"] == url
    finally:
        crypto.set_provider(None)
