"""``enqueue-batch`` reads its file a chunk at a time (scheduler/cli/batch.chunks): the
first chunk is there before the rest of the file exists, so a million lines never sit in
memory at once (a whole 1,000,000-line file took 1.4 GB when it was read first)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from portalq.scheduler.cli.batch import chunks


def _line(i: int) -> bytes:
    return (json.dumps({"job_type": "name_search", "order": f"ORD-{i}",
                        "payload": {"names": ["Acme Ltd."]}}) + "\n").encode()


@pytest.mark.timeout(20)
def test_the_first_chunk_comes_before_the_file_ends():
    r, w = os.pipe()
    try:
        os.write(w, _line(1) + _line(2) + _line(3))   # the writer is not done: no EOF
        parts = chunks(Path(f"/dev/fd/{r}"), 2)
        jobs, numbers, done = next(parts)
        assert [j.order_id for j in jobs] == ["ORD-1", "ORD-2"] and numbers == [1, 2]
        assert done == len(_line(1) + _line(2))
        os.write(w, b"\n" + _line(5))
        os.close(w)
        w = -1
        [(jobs, numbers, _)] = list(parts)
        assert [j.order_id for j in jobs] == ["ORD-3", "ORD-5"] and numbers == [3, 5]
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
