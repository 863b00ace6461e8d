"""Every class of bad input through the Python API (issue 13): InputError (or its documented
subclass BatchInputError), nothing written, no payload value in the message, and the
caller's transaction still usable (nothing reached PostgreSQL)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from portalq.jobs import limits, queue
from portalq.jobs.errors import BatchInputError, InputError
from tests import payloads

SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]


def count_jobs(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0]


def changed(base: dict, path: str, value: object) -> dict:
    out = json.loads(json.dumps(base))
    node = out
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    return out


EIN = "obtain_ein"
NS = "name_search"
BAD_JOBS = {
    "nul in a payload string": (EIN, "O", changed(payloads.OBTAIN_EIN, "responsible_party.ssn",
                                                  SSN + "\0"), {}, "NUL character"),
    "nul in a payload key": (NS, "O", {**payloads.NAME_SEARCH, "x\0": 1}, {}, "NUL"),
    "bell in a payload string": (NS, "O", changed(payloads.NAME_SEARCH, "applicant.name",
                                                  "A\x07"), {}, "U+0007"),
    "C1 control in a payload string": (NS, "O", changed(payloads.NAME_SEARCH, "applicant.name",
                                                        "A\x85"), {}, "U+0085"),
    "delete in a payload string": (NS, "O", changed(payloads.NAME_SEARCH, "applicant.name",
                                                    "A\x7f"), {}, "U+007F"),
    "line separator in a payload string": (NS, "O", changed(
        payloads.NAME_SEARCH, "applicant.name", "A\u2029"), {}, "a line break (U+2029)"),
    "tab in a payload key": (NS, "O", {**payloads.NAME_SEARCH, "x\ty": 1}, {}, "U+0009"),
    "lone surrogate": (EIN, "O", changed(payloads.OBTAIN_EIN, "legal_name", "W\ud800"), {},
                       "unpaired surrogate"),
    "nul in the order id": (NS, "A\0B", payloads.NAME_SEARCH, {}, "order id must not contain"),
    "line break in the order id": (NS, "A\nB", payloads.NAME_SEARCH, {}, "U+000A"),
    "unicode line separator": (NS, "A\u2028B", payloads.NAME_SEARCH, {}, "a line break (U+2028)"),
    "order id too long": (NS, "O" * 201, payloads.NAME_SEARCH, {}, "at most 200"),
    "order id not a string": (NS, 1001, payloads.NAME_SEARCH, {}, "must be a string"),
    "nul in the idempotency key": (NS, "O", payloads.NAME_SEARCH,
                                   {"idempotency_key": "k\0"}, "idempotency key must not"),
    "idempotency key too long": (NS, "O", payloads.NAME_SEARCH,
                                 {"idempotency_key": "k" * 201}, "at most 200"),
    "idempotency key not a string": (NS, "O", payloads.NAME_SEARCH, {"idempotency_key": 42},
                                     "must be a string"),
    "priority a string": (NS, "O", payloads.NAME_SEARCH, {"priority": "high"},
                          "priority must be an integer"),
    "priority a boolean": (NS, "O", payloads.NAME_SEARCH, {"priority": True}, "integer"),
    "max attempts a string": (NS, "O", payloads.NAME_SEARCH, {"max_attempts": "5"}, "integer"),
    "run_at overflows UTC": (NS, "O", payloads.NAME_SEARCH, {"run_at": datetime(
        9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))}, "years 1..9999"),
    "run_at before 2000": (NS, "O", payloads.NAME_SEARCH,
                           {"run_at": datetime(1999, 12, 31, tzinfo=UTC)}, "out of range"),
    "run_at too far ahead": (NS, "O", payloads.NAME_SEARCH,
                             {"run_at": datetime.now(UTC) + timedelta(days=3700)},
                             "out of range"),
    "run_at not a datetime": (NS, "O", payloads.NAME_SEARCH, {"run_at": "2026-12-01"},
                              "must be a datetime"),
    "payload too large": ("process_crtc", "O", changed(
        payloads.PROCESS_CRTC, "letter_text", "x" * (limits.DEFAULT_MAX_PAYLOAD_BYTES + 1)),
        {}, "(at most 262144; PORTALQ_MAX_PAYLOAD_BYTES)"),
    "another type's portal": (EIN, "O", payloads.OBTAIN_EIN, {"portal": "crtc"},
                              "obtain_ein jobs go to portal irs_ein, not 'crtc'"),
    "a BC filing to Delaware": ("file_entity", "O", payloads.FILE_ENTITY_BC,
                                {"portal": "delaware_icis"}, "not 'delaware_icis'"),
}


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_bad_job_raises_input_error_and_writes_nothing(conn, db, case):
    job_type, order, payload, options, message = BAD_JOBS[case]
    with pytest.raises(InputError, match=re.escape(message)) as e:
        queue.enqueue(job_type, order, payload, **options)
    assert SSN not in str(e.value)
    # in a batch: the subclass that says which job
    good = queue.NewJob(NS, "GOOD", payloads.NAME_SEARCH)
    with pytest.raises(BatchInputError) as batch_error:
        queue.enqueue_many([good, queue.NewJob(job_type, order, payload, **options)])
    assert batch_error.value.index == 1 and str(batch_error.value).startswith("job 2: ")
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("how", ["own", "autocommit", "transaction"])
@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_bad_job_late_in_a_large_batch_writes_nothing(conn, db, dsn, case, how):
    """A large batch is COPYed, on a connection of portalq's own or an autocommit one while
    it is validated: a bad job after the first rows aborts the COPY. The same error, nothing
    written, the connection (or the caller's transaction) still usable."""
    job_type, order, payload, options, message = BAD_JOBS[case]
    n = 3 * queue.COPY_MIN
    batch = [queue.NewJob(NS, f"GOOD-{i}", payloads.NAME_SEARCH) for i in range(n - 1)]
    batch.append(queue.NewJob(job_type, order, payload, **options))
    with psycopg.connect(dsn, autocommit=how == "autocommit") as c:
        with pytest.raises(BatchInputError, match=re.escape(message)) as e:
            queue.enqueue_many(batch, conn=None if how == "own" else c)
        assert e.value.index == n - 1 and str(e.value).startswith(f"job {n}: ")
        assert SSN not in str(e.value)
        assert count_jobs(conn) == 0
        queue.enqueue(NS, "AFTER", payloads.NAME_SEARCH, conn=c)   # still usable
        c.commit()
    assert count_jobs(conn) == 1


def test_bad_input_in_a_large_batch_leaves_a_transaction_block_usable(dsn):
    """An autocommit connection inside ``conn.transaction()`` is in a transaction: a bad
    job must not abort it (the batch is validated before any statement there too)."""
    n = 3 * queue.COPY_MIN
    batch = [queue.NewJob(NS, f"GOOD-{i}", payloads.NAME_SEARCH) for i in range(n - 1)]
    batch.append(queue.NewJob(NS, "BAD", changed(payloads.NAME_SEARCH, "names", ["A\0"])))
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE orders (id text)")
        with c.transaction():
            c.execute("INSERT INTO orders VALUES ('ORD-1')")
            with pytest.raises(BatchInputError, match="NUL"):
                queue.enqueue_many(batch, conn=c)
            queue.enqueue(NS, "ORD-1", payloads.NAME_SEARCH, conn=c)   # nothing was aborted
        assert c.execute("SELECT count(*) FROM orders").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == 1


def test_payload_strings_that_only_look_odd_in_json_are_kept(conn, db):
    """Quotes, backslashes, tabs and line breaks are escaped in JSON, and allowed."""
    odd = changed(payloads.NAME_SEARCH, "applicant.name", 'A "quoted" \\ name\twith\r\nlines')
    job = queue.enqueue(NS, "O", odd)
    assert queue.get_job(job.id)["payload"]["applicant"]["name"] == odd["applicant"]["name"]


def test_bad_input_leaves_the_callers_transaction_usable(dsn):
    with psycopg.connect(dsn) as c:
        c.execute("CREATE TABLE orders (id text)")
        c.execute("INSERT INTO orders VALUES ('ORD-1')")
        with pytest.raises(InputError):
            queue.enqueue(NS, "ORD-1", changed(payloads.NAME_SEARCH, "names", ["A\0"]), conn=c)
        queue.enqueue(NS, "ORD-1", payloads.NAME_SEARCH, conn=c)  # nothing was aborted
        c.commit()
        assert c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == 1


def test_payload_limit_from_the_environment(conn, db, monkeypatch):
    monkeypatch.setenv("PORTALQ_MAX_PAYLOAD_BYTES", "50")
    with pytest.raises(InputError, match="at most 50"):
        queue.enqueue(NS, "O", payloads.NAME_SEARCH)
    monkeypatch.setenv("PORTALQ_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(InputError, match="PORTALQ_MAX_PAYLOAD_BYTES must be"):
        queue.enqueue(NS, "O", payloads.NAME_SEARCH)
    assert count_jobs(conn) == 0


def test_idempotency_keys_belong_to_one_job_type(conn, db):
    crtc = queue.NewJob("process_crtc", "O", payloads.PROCESS_CRTC, idempotency_key="k")
    name = queue.NewJob(NS, "O", payloads.NAME_SEARCH, idempotency_key="k")
    with pytest.raises(BatchInputError, match="job 2: idempotency key already used by job 1"):
        queue.enqueue_many([name, crtc])
    assert count_jobs(conn) == 0
    first = queue.enqueue_many([name])[0]
    with pytest.raises(InputError, match=f"already used by job {first.id}, a name_search job"):
        queue.enqueue_many([crtc])
    # in a batch on an autocommit connection: checked before the INSERT commits anything
    with psycopg.connect(conn.info.dsn, autocommit=True) as auto:
        with pytest.raises(BatchInputError, match="job 2: idempotency key already used"):
            queue.enqueue_many([queue.NewJob(NS, "P", payloads.NAME_SEARCH), crtc], auto)
    assert count_jobs(conn) == 1
    assert queue.enqueue_many([name, name]) == [queue.Enqueued(first.id, False)] * 2


def test_admin_functions_refuse_bad_input(conn, db):
    job = queue.enqueue(EIN, "O", payloads.OBTAIN_EIN)
    queue.cancel(job.id)
    before = conn.execute("SELECT count(*) FROM portalq.job_events").fetchone()[0]
    for call, message in [
        (lambda: queue.list_jobs(limit=-1), "limit must be 1..100000"),
        (lambda: queue.list_jobs(limit="10"), "limit must be an integer"),
        (lambda: queue.list_jobs(order_id="O\0"), "order id must not contain"),
        (lambda: queue.retry(job.id, note="why\0"), "note must not contain"),
        (lambda: queue.retry(job.id, payload_patch={"legal_name": "X\0"}), "payload patch"),
        (lambda: queue.retry(job.id, payload_patch=["x"]), "must be a JSON object"),
        # (the cancelled job's SSN was erased: a patch must give it again)
        (lambda: queue.retry(job.id, payload_patch={
            "principal_activity": "x" * 300_000,
            "responsible_party": {"ssn": "123-45-6789"}}), "patched payload is"),
        (lambda: queue.resolve_filed(job.id, "CONF\n1"), "confirmation number must not"),
        (lambda: queue.pause_portal("irs_ein", reason="r\0"), "reason must not contain"),
        (lambda: queue.pause_portal("irs\0", reason="r"), "portal must not contain"),
        (lambda: queue.cancel("1"), "a job id must be an integer"),
        (lambda: queue.get_job(True), "a job id must be an integer"),
        (lambda: queue.show_job(2**70), f"no job with id {2**70}"),
        (lambda: queue.retry(job.id, extra_attempts=0), "extra attempts must be 1..100"),
    ]:
        with pytest.raises(InputError, match=message):
            call()
    assert conn.execute("SELECT count(*) FROM portalq.job_events").fetchone()[0] == before
    assert queue.get_job(job.id)["status"] == "cancelled"
    assert conn.execute("SELECT count(*) FROM portalq.portals WHERE paused_at IS NOT NULL"
                        ).fetchone()[0] == 0


def test_a_copy_aborted_by_a_bad_job_tells_the_server_log_nothing_of_the_job(conn, db,
                                                                             pg_server):
    """The streamed COPY is ended from inside its rows; what the server logs of that end
    is a fixed sentence, never the job's error or values (issue 15: no secret in a log)."""
    if pg_server.embedded is None:
        pytest.skip("reads the embedded server's log; an external server's is not ours")
    log = pg_server.embedded.pgdata / "server.log"
    start = log.stat().st_size
    bad = changed(payloads.OBTAIN_EIN, "responsible_party.ssn", SSN + "\0")
    batch = [queue.NewJob(EIN, f"O-{i}", payloads.OBTAIN_EIN) for i in range(2 * queue.COPY_MIN)]
    batch.append(queue.NewJob(EIN, "O-BAD", bad))
    with pytest.raises(BatchInputError, match="NUL character"):
        queue.enqueue_many(batch)
    assert count_jobs(conn) == 0
    with log.open("rb") as f:
        f.seek(start)
        written = f.read().decode(errors="replace")
    # the lines of the aborts (other tests' lines may be in the log too: xdist)
    lines = written.splitlines()
    ends = [i for i, line in enumerate(lines) if "COPY from stdin failed" in line]
    assert ends   # the abort reached the server, and was logged
    for i in ends:
        assert lines[i].endswith("a job of the batch was refused")
        block = "\n".join(lines[i:i + 3])   # with its CONTEXT and STATEMENT lines
        for form in (SSN, SSN.replace("-", ""), "NUL", "O-BAD", "responsible_party"):
            assert form not in block
