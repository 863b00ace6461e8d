"""A registry's processing learnt from its decisions (portals/eta/decisions.py: measured):
the submissions it has not decided yet count, or the quick decisions seen first would make
every estimate early."""

from __future__ import annotations

from datetime import timedelta

from portalq.portals.eta import measured

H = 3600.0


def test_without_undecided_submissions_the_quantiles_are_the_decisions_own():
    found = measured([h * H for h in range(1, 11)], [], least=5)
    assert found is not None and found.measured == 10
    assert (found.p50, found.p90) == (timedelta(hours=5), timedelta(hours=9))


def test_submissions_still_waiting_make_the_decision_later():
    quick = [h * H for h in (1, 2, 3, 4, 5)]
    # five more waited 6 h so far and are not decided: at least half take 5 h or more
    found = measured(quick + [20 * H] * 5, [6 * H] * 5, least=5)
    plain = measured(quick + [20 * H] * 5, [], least=5)
    assert plain is not None and found is not None
    assert found.p50 == timedelta(hours=20) > plain.p50 == timedelta(hours=5)


def test_too_few_decisions_or_too_many_waiting_say_nothing():
    assert measured([H] * 4, [], least=5) is None
    # ten waiting beyond every decision: the p90 cannot be placed
    assert measured([H] * 5, [2 * H] * 10, least=5) is None
