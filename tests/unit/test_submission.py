"""The submission protocol (jobs/submission.py): what it writes, and what its readers see."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from portalq.jobs import submission
from portalq.jobs.checkpoints import past_point_of_no_return
from portalq.jobs.submission import State, Submission

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


class Ctx:
    """Checkpoints merged the way the queue merges them (top-level keys)."""

    def __init__(self, checkpoints=None):
        self.checkpoints = dict(checkpoints or {})
        self.writes: list[dict] = []

    async def save(self, **data):
        self.writes.append(data)
        self.checkpoints.update(data)

    def sub(self, name, reference=None):
        return Submission(name, 42, lambda: self.checkpoints, self.save, lambda: NOW, reference)


def run(coro):
    return asyncio.run(coro)


def test_the_checkpoint_is_written_before_the_click_and_the_confirmation_after():
    ctx = Ctx()
    sub = ctx.sub("incorporation")
    clicked_when_in_doubt = []

    async def file():
        async with sub:
            clicked_when_in_doubt.append(past_point_of_no_return(ctx.checkpoints))
            await sub.confirmed(number="BC1234567")

    run(file())
    assert clicked_when_in_doubt == [True]
    assert not past_point_of_no_return(ctx.checkpoints)
    rec = submission.records(ctx.checkpoints)["incorporation"]
    assert (rec.state, rec.confirmation, rec.reference) == (
        State.CONFIRMED, {"number": "BC1234567"}, sub.reference)
    assert sub.reference.startswith("PQ42-INC-")


def test_when_the_button_was_pressed_is_kept_through_confirmation_and_refusal():
    """``at`` moves with every change; ``submitted`` stays the press (what the ETA measures
    a registry's processing time from)."""
    now = [NOW]
    ctx = Ctx()
    sub = Submission("formation", 42, lambda: ctx.checkpoints, ctx.save, lambda: now[0])

    async def file():
        async with sub:
            now[0] = NOW.replace(hour=16)
            await sub.confirmed(service_request="2026-1")
        now[0] = NOW.replace(hour=18)
        await sub.confirmed(None, service_request="2026-1", file_number="7")

    run(file())
    rec = submission.records(ctx.checkpoints)["formation"]
    assert (rec.at, rec.submitted) == (now[0].isoformat(), NOW.isoformat())
    run(sub.refused("rejected by staff"))
    rec = submission.records(ctx.checkpoints)["formation"]
    assert (rec.state, rec.submitted) == (State.REFUSED, NOW.isoformat())


def test_a_crash_inside_the_block_leaves_it_in_doubt_and_the_retry_sees_it():
    ctx = Ctx()

    async def crash():
        async with ctx.sub("formation", reference="PQ-42"):
            raise ConnectionError("the answer never came")

    with pytest.raises(ConnectionError):
        run(crash())
    again = ctx.sub("formation")
    assert again.in_doubt and again.reference == "PQ-42" and again.confirmation is None
    assert [r.name for r in submission.in_doubt(ctx.checkpoints)] == ["formation"]


@pytest.mark.parametrize(("state", "in_doubt", "reused"), [
    (State.SUBMITTING, True, True),
    (State.CONFIRMED, False, True),     # found again by the same reference
    (State.REFUSED, False, False),      # nothing filed: a new submission, a new reference
    (State.NOT_FILED, False, False),
])
def test_what_a_later_attempt_sees(state, in_doubt, reused):
    cp = {submission.KEY: {"x": {"state": str(state), "reference": "OLD"}}}
    sub = Ctx(cp).sub("x")
    assert sub.in_doubt is in_doubt and past_point_of_no_return(cp) is in_doubt
    assert (sub.reference == "OLD") is reused


def test_two_submissions_of_one_job_are_kept_apart():
    ctx = Ctx()

    async def both():
        nr = ctx.sub("name_request")
        async with nr:
            await nr.confirmed(nr_number="NR 1234567")
        async with ctx.sub("incorporation"):
            pass   # pressed; no answer

    run(both())
    recs = submission.records(ctx.checkpoints)
    assert recs["name_request"].state is State.CONFIRMED
    assert recs["incorporation"].state is State.SUBMITTING


def test_an_admin_resolution_answers_every_submission_in_doubt():
    cp = submission.started({}, "a", "R1", NOW)
    patch = submission.resolved(cp, State.NOT_FILED, NOW, by="ops")
    assert not submission.in_doubt(patch)
    assert submission.records(patch)["a"].confirmation == {"by": "ops"}


def test_a_submission_in_doubt_cannot_be_retired():
    ctx = Ctx(submission.started({}, "name_request", "R1", NOW))
    with pytest.raises(RuntimeError):
        run(ctx.sub("name_request").retire())


@pytest.mark.parametrize("junk", [None, [], "submitting", {"submissions": "x"},
                                  {"submissions": {"a": {"state": "bogus"}}},
                                  {"stage": "submitting"}])
def test_shapes_that_are_no_record(junk):
    assert submission.in_doubt(junk) == [] and not past_point_of_no_return(junk)


def test_the_requests_sent_are_forgotten_only_when_nothing_was_filed():
    """never_twice stops a request sent before for a submission still in doubt; once the
    portal refuses it, or an admin finds it not filed, a later attempt may send it again --
    and a confirmation forgets nothing."""
    pressed = submission.started({}, "payment", "ref-1", NOW)
    sent = {submission.SENT: {"ref-1": {"POST /pay": NOW.isoformat()},
                              "ref-2": {"POST /other": NOW.isoformat()}}}
    checkpoint = {**pressed, **sent}
    refused = submission.refused(checkpoint, "payment", "no", NOW)
    assert refused[submission.SENT] == {"ref-2": {"POST /other": NOW.isoformat()}}
    not_filed = submission.resolved(checkpoint, State.NOT_FILED, NOW)
    assert not_filed[submission.SENT] == {"ref-2": {"POST /other": NOW.isoformat()}}
    confirmed = submission.resolved(checkpoint, State.CONFIRMED, NOW, number="1")
    assert submission.SENT not in confirmed
    assert submission.SENT not in submission.refused(pressed, "payment", "no", NOW)
