"""The ETA accuracy replay (bench/eta_accuracy.py) on a tiny scenario, so the simulator
cannot rot: every job finishes, every pair is scored, and a burst past Delaware's 22:30 ET
cut-off is flagged at_risk before the cut-off."""

from __future__ import annotations

import importlib.util
import math
import sys
from datetime import timedelta
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "bench" / "eta_accuracy.py"
_SPEC = importlib.util.spec_from_file_location("eta_accuracy", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
acc = importlib.util.module_from_spec(_SPEC)
sys.modules["eta_accuracy"] = acc   # its dataclasses look their module up
_SPEC.loader.exec_module(acc)


def test_a_tiny_week_replays_scores_and_warns_before_the_cut_off():
    # Monday 21 Dec 2026, 21:40 ET: 30 filings for 2 Delaware sessions cannot all be in by
    # 22:30 ET; a few orders earlier that day
    sc = acc.Scenario(seed=3, orders=4, burst=30, days=1, closures=(), outages=(),
                      burst_at=acc.WEEK + timedelta(hours=21, minutes=40))
    res = acc.simulate(sc)
    assert len(res.jobs) >= 30 * 3
    assert all(j.finish is not None and j.start is not None for j in res.jobs.values())
    assert all(j.start >= j.created for j in res.jobs.values())
    s = acc.score(res)
    assert s["pairs"] > len(res.jobs) and s["no_estimate"] == 0
    assert 0 <= s["median_error"] <= s["p90_error"] and not math.isnan(s["median_error"])
    assert 0 <= s["after_p90"] <= 1
    d = acc.deadline_report(res)
    assert d["missed"] > 0
    assert d["flagged_before"] == d["missed"] and d["unflagged"] == 0
    late = [j for j in res.jobs.values() if j.deadline and j.submitted > j.deadline]
    assert all(j.flagged is not None and j.flagged < j.deadline for j in late)
