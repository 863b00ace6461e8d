"""``portalq jobs show --json`` carries what the text form shows (issue 48 #5: its ETA and
its waiting line), and ``portalq jobs list --waiting`` lists the jobs waiting on a portal's
decision, since when and expected by when, apart from the other deferred ones (#6). Real
PostgreSQL, the real CLI, a frozen clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from portalq.jobs import clock, queue
from tests import event_kinds, payloads
from tests.conftest import run_cli
from tests.order_inputs import DELAWARE_LLC

NOW = "2026-12-07T15:00:00Z"   # Monday 10:00 ET: Delaware and the IRS open
T0 = datetime(2026, 12, 7, 15, 0, tzinfo=UTC)
FROZEN = {"PORTALQ_FROZEN_NOW": NOW}


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


def _text_lines(job_id: int) -> dict[str, str]:
    shown = run_cli("jobs", "show", str(job_id), env=FROZEN)
    assert shown.returncode == 0, shown.stderr
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(": ") for line in shown.stdout.splitlines() if ": " in line)}


def _json(job_id: int) -> dict:
    shown = run_cli("jobs", "show", str(job_id), "--json", env=FROZEN)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_jobs_show_json_carries_the_eta_the_text_prints(db):
    assert run_cli("enqueue-order", "delaware_llc", "--order", "ORD-2", "--input",
                   json.dumps(DELAWARE_LLC), env=FROZEN).returncode == 0
    text, data = _text_lines(2), _json(2)
    assert text["eta"].startswith("EIN expected Tue 08 Dec 12:03 EST")
    assert data["eta"]["text"] == text["eta"]
    # the times themselves, for a program (the text's p50 and p90, in UTC)
    assert data["eta"]["expected"].startswith("2026-12-08T17:03")
    assert data["eta"]["latest"] > data["eta"]["expected"]
    assert data["waiting"] is None
    done = queue.list_jobs(order_id="ORD-2")[-1]["id"]     # the filing, cancelled: no ETA
    queue.cancel(done)
    assert "eta" not in _text_lines(done) and _json(done)["eta"] is None


def test_a_job_waiting_on_its_portal_is_listed_since_and_expected_by(db, dsn, frozen):
    waits = queue.enqueue("deliver", "ORD-W", payloads.DELIVER).id
    other = queue.enqueue("deliver", "ORD-D", payloads.DELIVER).id    # deferred, not waiting
    queue.enqueue("deliver", "ORD-P", payloads.DELIVER)               # pending
    mark = event_kinds.check_portal(dsn, waits)
    from psycopg import connect
    with connect(dsn, autocommit=True) as c:
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', run_at = %s "
                  "WHERE id = %s", (T0.replace(day=9), other))
    # jobs show: the text's waiting line is in the JSON too
    assert _text_lines(waits)["waiting"].startswith("waiting on email since 2026-12-07 15:00 UTC")
    shown = _json(waits)
    assert shown["waiting"]["since"] == mark["since"]
    assert shown["waiting"]["expected_by"] == mark["expected_by"]
    assert shown["waiting"]["text"] == _text_lines(waits)["waiting"]

    out = run_cli("jobs", "list", "--waiting", env=FROZEN)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["ID", "TYPE", "ORDER", "PORTAL", "SINCE", "EXPECTED", "BY",
                                "NEXT", "CHECK"]
    assert [line.split()[0] for line in lines[1:]] == [str(waits)]
    row = lines[1].split()
    assert row[1:4] == ["deliver", "ORD-W", "email"]
    assert " ".join(row[4:]) == "2026-12-07 15:00Z 2026-12-07 17:00Z 2026-12-07 15:10Z"
    as_json = json.loads(run_cli("jobs", "list", "--waiting", "--json", env=FROZEN).stdout)
    assert [(j["id"], j["since"], j["expected_by"], j["overdue"]) for j in as_json] == [
        (waits, mark["since"], mark["expected_by"], False)]
    # past its expected time: said so
    late = run_cli("jobs", "list", "--waiting", env={"PORTALQ_FROZEN_NOW": "2026-12-07T18:00:00Z"})
    assert late.stdout.splitlines()[1].endswith("overdue"), late.stdout
    # the portal filter holds; a status other than deferred cannot be waiting
    assert run_cli("jobs", "list", "--waiting", "--portal", "crtc").stdout.splitlines()[1:] == []
    bad = run_cli("jobs", "list", "--waiting", "--status", "failed")
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "portalq: error: --waiting lists deferred jobs waiting on a portal: "
        "it cannot be combined with --status"]
