"""The service's startup heap is kept out of the garbage collector's full passes (issue 19:
a full pass over the imported modules, the job types and the pool held a pickup 15-20 ms,
once or twice a minute; bench/pickup_trace.py)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
import portalq.scheduler.service as service
import portalq.scheduler.worker, portalq.portals.flows.browser   # what `portalq run` has imported by then
service.settle_heap()
print(gc.get_freeze_count(), len(gc.get_objects(generation=2)))
"""


def test_a_full_collection_after_startup_leaves_the_startup_heap_alone() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                         text=True, timeout=120).stdout.split()
    frozen, full_pass = int(out[0]), int(out[1])
    assert frozen > 20_000            # the modules, classes and tables made at startup (52,072)
    assert full_pass < frozen // 100  # what a full collection still walks

