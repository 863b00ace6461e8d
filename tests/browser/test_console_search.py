"""The console's search and a failed job's evidence in Chromium (issue 39): a payload search
finds a job far below the id window on the first page, with the searched value shown; `%`,
`_` and `%00` are searched for as text (no 500); a secret field is refused; the counts per
status are shown as estimates; a failed job opens with its failure screenshot beside the
error, at 1440 px side by side."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consolekit import console_env

from portalq.jobs import queue, search_index
from portalq.jobs.admin.reads import WINDOW
from tests import payloads
from tests.needs_seed import png

pytestmark = pytest.mark.browser


def _prepare(dsn: str, artifacts: Path) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                           created_at, updated_at, finished_at)
            SELECT 'file_entity', 'O-' || g, 'delaware_icis',
                   jsonb_build_object('legal_name', CASE g WHEN 3 THEN 'Okapi Research Inc.'
                                                           WHEN 4 THEN '100%% Okapi Inc.'
                                                           WHEN 5 THEN 'Okapi_Labs LLC'
                                                           ELSE 'Company ' || g || ' LLC' END),
                   'completed', now(), now(), now(), now()
            FROM generate_series(1, %s) g""", (WINDOW + 500,))
        masked = queue.enqueue("file_entity", "ORD-MASKED", {
            **payloads.FILE_ENTITY_DE, "legal_name": "Zed 987-65-4321 Trust"}, conn=c).id
        failed = queue.enqueue("obtain_ein", "ORD-FAILED", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 2, "
                  "finished_at = now(), last_error = 'PortalUnavailable: IRS answered 503' "
                  "WHERE id = %s", (failed,))
        for attempt, name in ((1, "04-failure.png"), (2, "02-form.png"), (2, "04-failure.png")):
            folder = artifacts / str(failed) / f"attempt-{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(png(1000, 560))
            c.execute("INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, "
                      "created_at) VALUES (%s, %s, 'screenshot', %s, now())",
                      (failed, attempt, str(folder / name)))
        c.execute("ANALYZE portalq.job_queue")
    return {"failed": failed, "masked": masked}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("search-artifacts"),
                     _prepare) as found:
        yield found


def _rows(run: Any, page: Any) -> list[tuple[str, str]]:
    rows = page.locator("table.jobs tbody tr[data-job]")
    return [(run(r.get_attribute("data-job")), run(r.locator("td.matched").inner_text()))
            for r in run(rows.all())]


def test_a_search_finds_the_oldest_jobs_in_one_page(env, signin, run):
    page = signin("viewer")
    run(page.goto("/jobs?field=legal_name&value=OKAPI"))
    assert _rows(run, page) == [("5", "Okapi_Labs LLC"), ("4", "100% Okapi Inc."),
                                ("3", "Okapi Research Inc.")]
    assert run(page.locator("#next-page").count()) == 0          # nothing further
    assert "Searched" not in run(page.locator(".pager").inner_text())
    estimates = run(page.locator(".estimates").inner_text())
    assert estimates.startswith("About ") and "completed" in estimates, estimates
    for value, expected in (("100%25", ["4"]), ("okapi_", ["5"]), ("%2500", [])):
        resp = run(page.goto(f"/jobs?field=legal_name&value={value}"))
        assert resp.status == 200, value
        assert [job for job, _ in _rows(run, page)] == expected, value
    resp = run(page.goto("/jobs?field=responsible_party.ssn&value=6789"))
    assert resp.status == 400
    assert "secret field" in run(page.content())


def test_a_viewer_cannot_recover_masked_digits_by_prefix_search(env, signin, run):
    """Issue 48 #13: the list shows the legal name as 'Zed *** Trust'; the 13 prefix
    searches of /jobs.json that recovered its digits find nothing now."""
    page = signin("viewer")
    resp = run(page.goto("/jobs.json?field=legal_name&value=zed"))
    assert [(j["id"], j["matched"]) for j in run(resp.json())["jobs"]] == [
        (env["masked"], "Zed *** Trust")]
    secret = "987-65-4321"
    for end in range(1, len(secret) + 1):
        resp = run(page.goto(f"/jobs.json?field=legal_name&value=zed%20{secret[:end]}"))
        assert resp.status == 200 and run(resp.json())["jobs"] == [], secret[:end]
    resp = run(page.goto("/jobs.json?field=legal_name&value=987-65-4"))
    assert run(resp.json())["jobs"] == []


def test_a_failed_job_opens_with_its_failure_screenshot_beside_the_error(env, signin, run):
    page = signin("viewer")
    run(page.set_viewport_size({"width": 1440, "height": 900}))
    run(page.goto(f"/jobs/{env['failed']}"))
    section = page.locator("#failure")
    assert "IRS answered 503" in run(section.locator("#last-error").inner_text())
    # the last attempt's failure shot (not its form, not attempt 1's), loaded, large
    assert run(section.locator("figcaption").inner_text()) == "04-failure.png, attempt 2"
    image = section.locator("img")
    assert run(image.evaluate("i => i.complete && i.naturalWidth")) == 1000
    error_box = run(section.locator("#last-error").bounding_box())
    shot_box = run(image.bounding_box())
    assert shot_box["width"] >= 640 and shot_box["x"] > error_box["x"] + error_box["width"]
    assert abs(shot_box["y"] - error_box["y"]) < 120          # beside it, at the top
    run(page.set_viewport_size({"width": 390, "height": 844}))
    assert run(image.bounding_box())["width"] <= 390


def test_the_search_says_how_far_its_index_reaches(env, signin, run):
    """Issue 49.1: the index is filled by the service's indexer, a moment after the
    enqueue; the list says up to which job it reaches (newer jobs are searched on the queue
    itself), and says so again once the indexer has moved on."""
    page = signin("viewer")
    run(page.goto("/jobs?field=legal_name&value=okapi"))
    hint = run(page.locator("#search-index").inner_text())
    assert "not indexed yet" in hint and "searched on the queue" in hint, hint
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        search_index.catch_up(c, settle_seconds=0)
        top = search_index.mark(c).indexed_to
    run(page.goto("/jobs?field=legal_name&value=okapi"))
    hint = run(page.locator("#search-index").inner_text())
    assert f"indexed up to job {top:,}" in hint, hint
    assert [job for job, _ in _rows(run, page)] == ["5", "4", "3"]   # the same results
