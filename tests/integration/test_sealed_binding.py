"""Sealed values are bound to their job and field (AES-GCM associated data, format 2): a
database writer who copies one job's sealed secrets into another job's row, or into another
field, gets a job that fails -- never one that runs with someone else's SSN."""

from __future__ import annotations

import asyncio
import base64
import json
import os

import psycopg
import pytest

from portalq.jobs import id_blocks, queue
from portalq.jobs.secrets import crypto
from portalq.jobs.secrets import rotation as keys
from portalq.jobs.secrets import sealing as secrets_at_rest
from portalq.scheduler.config import Settings
from tests.plugins import ledger
from tests.service_helpers import add_local_portal, worker_in_process

COPY_SECRETS = """
UPDATE portalq.job_queue b SET secret_key_id = a.secret_key_id, secret_dek = a.secret_dek,
                       secret_data = a.secret_data
FROM portalq.job_queue a WHERE a.id = %s AND b.id = %s"""


def _secret_job(n: int, conn=None) -> int:
    return queue.enqueue("ledger_secret", f"O-{n}", {"n": n, "ssn": ledger.secret_ssn(n)},
                         conn=conn).id


def _forms(ssn: str) -> list[str]:
    return [ssn, ssn.replace("-", ""), ssn.replace("-", " ")]


def test_a_copied_sealed_value_fails_its_job_and_the_other_runs(db, dsn, tmp_path):
    add_local_portal(dsn)
    a, b = _secret_job(1), _secret_job(2)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(COPY_SECRETS, (a, b))   # b now holds a's sealed SSN

    async def drain() -> None:
        settings = Settings(database_url=db, node_id="w1", workers=2,
                            artifacts_dir=tmp_path / "artifacts")
        async with worker_in_process(settings, dsn), asyncio.timeout(30):
            while {queue.get_job(j)["status"] for j in (a, b)} - {"completed", "failed"}:
                await asyncio.sleep(0.05)   # polling the outcome, under a deadline

    asyncio.run(drain())
    ok, bad = queue.show_job(a), queue.show_job(b)
    assert ok["status"] == "completed" and ok["result"] == {"checked": True, "attempt": 1}
    assert bad["status"] == "failed" and bad["attempts"] == 1
    # failed by the seal, before the handler saw a value (its own check says otherwise)
    assert "do not open for this job" in bad["last_error"]
    assert "did not open to its value" not in bad["last_error"]
    shown = json.dumps(bad, default=str)
    for ssn in (ledger.secret_ssn(1), ledger.secret_ssn(2)):
        assert not any(form in shown for form in _forms(ssn))


def test_swapped_values_and_another_field_do_not_open(conn, db, dsn):
    add_local_portal(dsn)
    a, b = _secret_job(1, conn), _secret_job(2, conn)
    conn.execute("""
        UPDATE portalq.job_queue q SET secret_key_id = o.secret_key_id, secret_dek = o.secret_dek,
                               secret_data = o.secret_data
        FROM portalq.job_queue o WHERE (q.id, o.id) IN ((%s, %s), (%s, %s))""", (a, b, b, a))
    for job_id in (a, b):
        with pytest.raises(secrets_at_rest.SecretsNotTheirs, match="do not open for this job"):
            secrets_at_rest.reveal(queue.get_job(job_id, conn))
    # the same job's value, offered as another field of it (a checkpoint)
    row = queue.get_job(a, conn)
    blob = (crypto._DOC_MAGIC + len(row["secret_dek"]).to_bytes(2, "big")
            + bytes(row["secret_dek"]) + bytes(row["secret_data"]))
    forged = {"cp575_url": f"pqsealed1:{row['secret_key_id']}:"
                           f"{base64.b64encode(blob).decode()}"}
    with pytest.raises(secrets_at_rest.SecretsNotTheirs, match="checkpoint 'cp575_url'"):
        secrets_at_rest.open_checkpoint(a, "obtain_ein", forged)
    # and a value of another job type with the same id does not open either
    with pytest.raises(secrets_at_rest.SecretsNotTheirs):
        secrets_at_rest.reveal({**queue.get_job(b, conn), "job_type": "obtain_ein"})


def test_every_enqueue_path_binds_to_the_job_id(conn, db, dsn):
    add_local_portal(dsn)
    one = queue.enqueue("ledger_secret", "S", {"n": 7, "ssn": ledger.secret_ssn(7)}, conn=conn)
    few = queue.enqueue_many([queue.NewJob("ledger_secret", f"F{n}",
                                           {"n": n, "ssn": ledger.secret_ssn(n)},
                                           idempotency_key=f"k{n}") for n in range(3)], conn)
    copied = queue.enqueue_many([queue.NewJob("ledger_secret", f"C{n}",
                                              {"n": n, "ssn": ledger.secret_ssn(n)})
                                 for n in range(queue.COPY_MIN)], conn)
    again = queue.enqueue_many([queue.NewJob("ledger_secret", "F0", {"n": 0, "ssn": "x"},
                                             idempotency_key="k0")], conn)
    assert again[0].id == few[0].id and not again[0].created
    for e in [one, *few, *copied]:
        row = queue.get_job(e.id, conn)
        assert bytes(row["secret_data"][:4]) == crypto.V3
        assert secrets_at_rest.reveal(row)["ssn"] == ledger.secret_ssn(row["payload"]["n"])


def test_id_blocks_grow_in_a_burst_and_lapse_when_idle(conn, db, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(id_blocks, "monotonic", lambda: now[0])

    def reserved() -> int:   # the sequence's last id handed out
        return conn.execute("SELECT last_value FROM portalq.job_queue_id_seq").fetchone()[0]

    with psycopg.connect(conn.info.dsn, autocommit=True) as c:
        ids = [id_blocks.take(c, 1)[0] for _ in range(30)]
        assert ids == list(range(ids[0], ids[0] + 30))
        assert reserved() == ids[0] + 84   # blocks of 1, 4, 16, 64: four round trips
        now[0] += 2   # idle: the rest of the block is dropped, the next one is small again
        assert id_blocks.take(c, 1)[0] == ids[0] + 85 == reserved()
        assert id_blocks.take(c, 3) == [ids[0] + 86, ids[0] + 87, ids[0] + 88]


def test_older_unbound_values_still_open_and_rotate_binds_them(conn, db, dsn):
    add_local_portal(dsn)
    job_id = _secret_job(5, conn)
    old = crypto.seal(json.dumps({"ssn": ledger.secret_ssn(5)}).encode())  # format 1
    conn.execute("UPDATE portalq.job_queue SET secret_key_id = %s, secret_dek = %s, secret_data = %s "
                 "WHERE id = %s", (old.key_id, old.wrapped_dek, old.data, job_id))
    assert secrets_at_rest.reveal(queue.get_job(job_id, conn))["ssn"] == ledger.secret_ssn(5)
    report = keys.rewrap_all(queue.connect)
    assert report.bound == 1 and report.left == {}
    row = queue.get_job(job_id, conn)
    assert bytes(row["secret_data"][:4]) == crypto.V3
    assert secrets_at_rest.reveal(row)["ssn"] == ledger.secret_ssn(5)
    assert keys.rewrap_all(queue.connect).bound == 0


def test_nonces_never_repeat_under_a_data_key(tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    items = [(f"v{i}".encode(), crypto.place(i, "t", "secrets")) for i in range(1500)]
    sealed = crypto.seal_many(items, ring) + [crypto.seal(b"x", ring, aad=b"a")
                                             for _ in range(600)]
    pairs = {(bytes(s.wrapped_dek), bytes(s.data[4:4 + crypto.NONCE])) for s in sealed}
    assert len(pairs) == len(sealed)   # (data key, nonce) unique
    # a data key per value (issue 35: erasing one must not leave its key in another row)
    assert len({ring.unwrap(s.key_id, s.wrapped_dek) for s in sealed}) == len(sealed)
    for (plain, aad), s in zip(items, sealed, strict=False):
        assert crypto.open_sealed(s.key_id, s.wrapped_dek, s.data, ring, aad=aad) == plain


def test_a_forked_child_never_goes_on_with_the_parents_data_key(tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.seal(b"before the fork", ring, aad=b"a")   # this thread's data key exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child seals one value and reports its (data key, nonce)
        s = crypto.seal(b"child", ring, aad=b"a")
        os.write(write, bytes(s.wrapped_dek) + b"|" + bytes(s.data[4:4 + crypto.NONCE]))
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 4096)
    os.close(read)
    s = crypto.seal(b"parent", ring, aad=b"a")
    ours = bytes(s.wrapped_dek) + b"|" + bytes(s.data[4:4 + crypto.NONCE])
    assert child.split(b"|")[0] != ours.split(b"|")[0]   # a data key of its own


def test_a_batch_failing_midway_hands_out_none_of_its_nonces_again(tmp_path):
    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    items = [(b"a", b"x"), (b"b", b"y"), (None, b"z"), (b"d", b"w")]
    with pytest.raises(TypeError):
        crypto.seal_many(items, ring)   # the third value is not bytes
    after = crypto.seal_many([(b"e", b"v")], ring)[0]
    assert crypto.open_sealed(after.key_id, after.wrapped_dek, after.data, ring,
                              aad=b"v") == b"e"
    with pytest.raises(ValueError, match="one associated data per plaintext"):
        crypto.seal_runs([b"a", b"b"], [b"x"], ring)


def test_the_place_template_gives_the_documented_associated_data():
    # b"portalq-sealed-v2\0<id>\0<job type>\0<field>", a "%" in a name taken as itself
    assert crypto.place(42, "100%_off", "x%d") == b"portalq-sealed-v2\x0042\x00100%_off\x00x%d"
    assert crypto.place_template("t", "secrets") % 7 == crypto.place(7, "t", "secrets")
