"""The Literal words typed rows declare are the enums' words (jobs/kinds.py)."""

from __future__ import annotations

from typing import get_args

import pytest

from portalq.jobs import kinds


@pytest.mark.parametrize("literal, enum", [
    (kinds.JobStatusName, kinds.JobStatus),
    (kinds.EscalationKindName, kinds.EscalationKind),
    (kinds.NoticeKindName, kinds.NoticeKind),
])
def test_each_literal_lists_exactly_its_enums_values(literal, enum):
    assert set(get_args(literal)) == {m.value for m in enum}
