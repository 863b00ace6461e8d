"""The enqueue sample of the README and of the Getting started page runs (so neither can rot)."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.conftest import ROOT

PAGES = ("README.md", "docs/index.md")


def _sample(page: str) -> str:
    text = (ROOT / page).read_text()
    section = re.split(r"^#+ (?:\d\. )?Enqueue inside your own transaction$", text, maxsplit=1,
                       flags=re.M)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.parametrize("page", PAGES)
def test_readme_transaction_sample(db, dsn, page):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    exec(compile(_sample(page), page, "exec"), {"database_url": db})  # noqa: S102
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT id FROM orders").fetchall() == [("ORD-1001",)]
        assert c.execute("SELECT job_type, order_id, idempotency_key FROM portalq.job_queue"
                         ).fetchall() == [("name_search", "ORD-1001", "ORD-1001/name_search")]


@pytest.mark.parametrize("page", PAGES)
def test_readme_sample_rolls_back_with_the_business_write(db, dsn, page):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE orders (id text PRIMARY KEY)")
        c.execute("INSERT INTO orders VALUES ('ORD-1001')")  # the sample's insert will fail
    try:
        exec(compile(_sample(page), page, "exec"), {"database_url": db})  # noqa: S102
    except Exception as exc:  # noqa: BLE001
        assert "duplicate key" in str(exc)
    else:
        raise AssertionError("the sample should have failed on the duplicate order")
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == 0
