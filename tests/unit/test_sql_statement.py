"""Statements with values written into their text (jobs.db.sql.statement, issue 19)."""

from __future__ import annotations

import pytest

from portalq.jobs.db import sql


def test_the_claims_limit_and_portal_count_are_written_in_and_nothing_else_changes():
    text = sql.statement("claim", {"limit": 17, "portal_count": 3})
    assert "%(limit)s" not in text and "%(portal_count)s" not in text
    assert "LIMIT 17" in text and "LIMIT 3" in text
    assert text == (sql.query("claim").replace("%(limit)s", "17")
                    .replace("%(portal_count)s", "3"))
    assert "%(now)s" in text and "%(portals)s" in text   # the others stay parameters
    assert sql.statement("heartbeat", {"ids": [1]}) == sql.query("heartbeat")


@pytest.mark.parametrize("value", ["10; DROP TABLE portalq.job_queue", 10.0, True, None])
def test_only_an_int_is_ever_written_into_a_statement(value):
    with pytest.raises(TypeError, match="must be an int"):
        sql.statement("claim", {"limit": value, "portal_count": 1})
    with pytest.raises(TypeError, match="must be an int"):
        sql.statement("claim", {"limit": 1, "portal_count": value})
