"""The flows' side of "submitted, waiting on the portal" (:mod:`jobs.waiting`).

Two moments, each ending the attempt with the job deferred to its next check (no attempt
spent, no browser kept):

- :func:`not_found_after_lost_answer`: the lookup of a submission whose answer was lost
  found nothing. Returns only where the portal's declared rule vouches that nothing was
  received (the caller may submit again); else waits, and past the window raises for a
  person with the evidence.
- :func:`undecided`: the portal gave its number or receipt but has not decided yet.
- :func:`person_when_expected`: likewise, where no known page shows the decision: one wait
  to the expected time, then a person.

A check is the flow's lookup, which is read-only: neither helper ever submits.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NoReturn

from pydantic import BaseModel

from portalq.jobs import clock, settings, waiting
from portalq.jobs.errors import UncertainOutcome
from portalq.jobs.submission import Submission
from portalq.portals import lookups
from portalq.portals.flows.context import FlowContext

log = logging.getLogger("portalq.flows")


def submitted_at(ctx: FlowContext[BaseModel], sub: Submission) -> datetime:
    """When the submission was made: the waiting marker's start, else when its record says
    the button was pressed (else, a record from before it said so, its last change)."""
    mark = waiting.marker(ctx.checkpoints)
    if mark and mark.get("since"):
        return datetime.fromisoformat(str(mark["since"]))
    at = (sub.earlier.submitted or sub.earlier.at) if sub.earlier is not None else None
    return datetime.fromisoformat(at) if at else clock.now()


async def not_found_after_lost_answer(ctx: FlowContext[BaseModel], sub: Submission) -> None:
    rule = lookups.rule(ctx.portal, sub.name)
    now, since = clock.now(), submitted_at(ctx, sub)
    verdict = waiting.after_not_found(rule, since, now)
    if verdict is waiting.NotFound.SUBMIT:
        log.info("job %s: %s vouches that 'not found' %s after the submission means not "
                 "received", ctx.job_id, rule.portal, now - since)
        await ctx.save_checkpoint(**{waiting.KEY: None})
        return
    if verdict is waiting.NotFound.PERSON:
        raise waiting.person_needed(rule, name=sub.name, reference=sub.reference,
                                    submitted_at=since, mark=waiting.marker(ctx.checkpoints),
                                    now=now)
    await _wait(ctx, rule, sub.name, since, now,
                "its lookup to find the submission whose answer was lost")


async def undecided(ctx: FlowContext[BaseModel], sub: Submission, what: str) -> NoReturn:
    """Submitted and acknowledged (``sub`` confirmed with the portal's number); the
    registry has not decided: wait for the next check."""
    rule = lookups.rule(ctx.portal, sub.name)
    await _wait(ctx, rule, sub.name, submitted_at(ctx, sub), clock.now(), what)


async def undecided_since(ctx: FlowContext[BaseModel], rule_name: str, since: datetime,
                          what: str) -> NoReturn:
    """Waiting on a later stage than the submission's own (e.g. the CRTC's public list
    after its letter), by that stage's declared rule and from ``since``."""
    rule = lookups.rule(ctx.portal, rule_name)
    await _wait(ctx, rule, rule_name, since, clock.now(), what)


async def decided(ctx: FlowContext[BaseModel], sub: Submission, *,
                  stage: str | None = None, since: datetime | None = None) -> None:
    """The registry decided ``sub`` (or its later ``stage``, waited on from ``since``): the
    job no longer waits, and how long the decision took is kept beside its checkpoint (the
    ETA measures each registry's processing from these) -- also when no check saw it
    pending (decided in the run that submitted, or before the first check)."""
    name = stage or sub.name
    rule = lookups.rule(ctx.portal, name)
    first = (rule.portal, name, since or submitted_at(ctx, sub))
    record = waiting.decided(ctx.checkpoints, clock.now(), first=first)
    if waiting.marker(ctx.checkpoints) or record is not None:
        also = {waiting.DECIDED: record} if record is not None else {}
        await ctx.save_checkpoint(**{waiting.KEY: None, **also})


async def _wait(ctx: FlowContext[BaseModel], rule: waiting.LookupRule, name: str,
                since: datetime, now: datetime, what: str) -> NoReturn:
    mark = waiting.waiting(ctx.checkpoints, rule, since=since, now=now, what=what,
                           submission=name)
    earlier = waiting.marker(ctx.checkpoints) or {}
    mark["escalated"] = bool(earlier.get("escalated"))
    if waiting.overdue(mark, now) and not mark["escalated"]:
        # once: the registry is slower than it says; the job keeps waiting
        mark["escalated"] = True
        await ctx.save_checkpoint(**{waiting.KEY: mark})
        await ctx.tell_admins("waiting", f"{waiting.describe(mark)}: past the expected time; "
                              "it keeps being checked (cancel or resolve it by hand if the "
                              "registry lost it)")
    else:
        await ctx.save_checkpoint(**{waiting.KEY: mark})
    await ctx.step(waiting.describe(mark))
    raise waiting.wait(mark)


async def person_when_expected(ctx: FlowContext[BaseModel], sub: Submission, *, what: str,
                               check: str) -> NoReturn:
    """Submitted and acknowledged, on a portal where no page known to exist shows the
    registry's later decision (its declared lookup authority has none): nothing is looked
    at -- a guessed page would fail "portal changed" at every check. The job waits, holding
    nothing, until the portal's expected decision time, and then a person is asked (the job
    ends uncertain: one mail, the console's Needs you), told ``check``: what to look at and
    where. Under ``PORTALQ_PORTAL_CHECK_SECONDS`` (tests, demos) the first check is that
    time, so a demo's person is asked within seconds."""
    rule = lookups.rule(ctx.portal, sub.name)
    since, now = submitted_at(ctx, sub), clock.now()
    short = settings.current(settings.TestSettings).portal_check_seconds is not None
    due = since + (rule.check_every if short else rule.expected_within)
    if now < due:
        mark = waiting.waiting(ctx.checkpoints, rule, since=since, now=now, what=what,
                               submission=sub.name)
        mark["next_check"] = due.isoformat()
        await ctx.save_checkpoint(**{waiting.KEY: mark})
        await ctx.step(waiting.describe(mark))
        raise waiting.wait(mark)
    raise UncertainOutcome(
        f"{rule.portal}: submission {sub.name!r} (reference {sub.reference}), submitted at "
        f"{since:%Y-%m-%d %H:%M} UTC, was expected to be decided by {due:%Y-%m-%d %H:%M} UTC; "
        f"no page known to exist shows the decision, so portalq does not look: {check}")
