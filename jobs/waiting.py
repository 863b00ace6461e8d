"""Submitted, waiting on the portal: what a lookup may decide, and when to look again.

A registry that queues filings (Delaware, BC Registries, the CRTC) gives a number or a
receipt at once and decides hours or days later; right after a submission whose answer was
lost its lookup can say "not found" while the request sits in its queue. So each portal
*declares* (:class:`LookupRule`, the declarations live in ``portals.lookups``) what its
lookup may decide, and a flow asks :func:`after_not_found` what a "not found" means:

- ``WAIT``: not conclusive yet -- look again later (:class:`WaitOnPortal`), never submit;
- ``PERSON``: past the declared window and still not found -- a person checks, with the
  evidence (:func:`person_needed`), never a blind resubmission of a paid filing;
- ``SUBMIT``: the portal vouches that "not found" means "not received" (only where its rule
  says so, and only that long after the submission).

While a job waits it is an ordinary deferred job (no worker, browser or attempt held; the
outcome policy defers a :class:`~jobs.errors.DeferUntil` and refunds its attempt) whose
checkpoint holds the marker ``"waiting"`` (:func:`marker`): the portal, since when, expected
by when, how many checks were made. ``jobs show`` and ``status`` read it (:func:`describe`).
When the portal has decided, the marker gives way to a record of how long it took
(:func:`decided`, under ``"decided"``): the ETA learns each registry's processing time from
these (issue 41). Pure: no database, no browser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from portalq.jobs.errors import DeferUntil, UncertainOutcome

KEY = "waiting"
#: the checkpoint's record of the decisions seen, by submission name (:func:`decided`)
DECIDED = "decided"


class NotFound(StrEnum):
    WAIT = "wait"
    PERSON = "person"
    SUBMIT = "submit"


@dataclass(frozen=True)
class LookupRule:
    """What one portal's lookup may decide, and how a job waiting on it is checked."""

    portal: str
    #: in words, for people ("the receipt number is authoritative; ...")
    says: str
    #: a "not found" proves nothing was received only this long after the submission
    #: (None: never -- the lookup cannot see a queued request)
    not_found_conclusive_after: timedelta | None
    #: how long a lost answer may stay "not found" before a person is asked
    lost_answer_window: timedelta
    #: the first check after a submission, growing by ``backoff`` up to ``check_cap``
    check_every: timedelta
    backoff: float
    check_cap: timedelta
    #: when the registry normally decides (a job waiting longer escalates once)
    expected_within: timedelta

    def next_check(self, checks: int, now: datetime) -> datetime:
        """When to look again after ``checks`` checks (the portal's interval, backing off)."""
        cap, step = self.check_cap.total_seconds(), self.check_every.total_seconds()
        # grown one check at a time and stopped at the cap: the closed form (every x
        # backoff ** checks) outgrows a timedelta after ~40 checks, a float after ~1,000,
        # and a job waiting a week at a 4 h cap has made that many
        for _ in range(max(checks, 0)):
            if step >= cap or self.backoff == 1:
                break
            step *= self.backoff
        return now + min(timedelta(seconds=min(step, cap)), self.check_cap)


def after_not_found(rule: LookupRule, submitted_at: datetime, now: datetime) -> NotFound:
    """What a "not found" by the lookup means for a submission made at ``submitted_at``
    whose answer was lost."""
    age = now - submitted_at
    conclusive = rule.not_found_conclusive_after
    if conclusive is not None and age >= conclusive:
        return NotFound.SUBMIT
    if age >= rule.lost_answer_window:
        return NotFound.PERSON
    return NotFound.WAIT


class WaitOnPortal(DeferUntil):
    """Submitted, the portal has not decided (or its lookup cannot see it yet): the job is
    deferred to its next check, no attempt spent."""

    def __init__(self, message: str, *, when: datetime, portal: str) -> None:
        super().__init__(message, when=when)
        self.portal = portal


def marker(checkpoint: Mapping[str, Any] | None) -> dict[str, Any] | None:
    raw = checkpoint.get(KEY) if isinstance(checkpoint, Mapping) else None
    return dict(raw) if isinstance(raw, Mapping) and raw.get("portal") else None


def waiting(checkpoint: Mapping[str, Any] | None, rule: LookupRule, *, since: datetime,
            now: datetime, what: str, submission: str | None = None) -> dict[str, Any]:
    """The marker after one more check that found the portal undecided (``what``: what it
    is waiting for, e.g. "the lookup to find the filing", "examination (INPROGRESS)";
    ``submission``: the name of the submission awaited, the rule's key)."""
    earlier = marker(checkpoint) or {}
    checks = int(earlier.get("checks") or 0) + 1
    return {"portal": rule.portal, "submission": submission, "since": since.isoformat(),
            "expected_by": (since + rule.expected_within).isoformat(), "what": what,
            "checks": checks, "last_check": now.isoformat(),
            "next_check": rule.next_check(checks - 1, now).isoformat()}


def decided(checkpoint: Mapping[str, Any] | None, now: datetime, *,
            first: tuple[str, str, datetime] | None = None) -> dict[str, Any] | None:
    """The checkpoint's ``"decided"`` record once the portal's decision is seen at ``now``:
    the earlier ones, plus this submission's submitted, last check that saw nothing, and
    seen -- the decision was made between the last two (the ETA's measured processing).

    ``first`` = (portal, submission, submitted at) for a decision seen with no marker (the
    registry decided before any check found it pending, often in the run that submitted):
    then it was made between the submission and now. Without these the quick decisions
    would never be recorded and the learnt times would lean slow. None when there is
    nothing to record (no marker and no ``first``, or a marker written before markers
    named their submission, or this decision recorded already)."""
    mark = marker(checkpoint)
    raw = checkpoint.get(DECIDED) if isinstance(checkpoint, Mapping) else None
    earlier = dict(raw) if isinstance(raw, Mapping) else {}
    if not mark and first is not None:
        portal, submission, since = first
        if (earlier.get(submission) or {}).get("since") == since.isoformat():
            return None   # recorded already (a later attempt passing the same point)
        mark = {"portal": portal, "submission": submission, "since": since.isoformat(),
                "last_check": since.isoformat()}
    if not mark or not mark.get("submission") or not mark.get("last_check"):
        return None
    return {**earlier, str(mark["submission"]): {
        "portal": mark["portal"], "since": mark["since"], "last_check": mark["last_check"],
        "seen": now.isoformat()}}


def overdue(mark: Mapping[str, Any], now: datetime) -> bool:
    return now > datetime.fromisoformat(str(mark["expected_by"]))


def describe(mark: Mapping[str, Any] | None) -> str:
    """"waiting on <portal> since ..., expected by ..." (empty when not waiting)."""
    if not mark:
        return ""

    def short(iso: Any) -> str:
        return datetime.fromisoformat(str(iso)).strftime("%Y-%m-%d %H:%M UTC")

    out = (f"waiting on {mark['portal']} since {short(mark['since'])}, expected by "
           f"{short(mark['expected_by'])}")
    if mark.get("what"):
        out += f" ({mark['what']})"
    return out


def wait(mark: Mapping[str, Any]) -> WaitOnPortal:
    """The outcome that ends this attempt and defers the job to its next check."""
    return WaitOnPortal(f"{describe(mark)}; next check {mark['next_check']}",
                        when=datetime.fromisoformat(str(mark["next_check"])),
                        portal=str(mark["portal"]))


def person_needed(rule: LookupRule, *, name: str, reference: str | None,
                  submitted_at: datetime, mark: Mapping[str, Any] | None,
                  now: datetime) -> UncertainOutcome:
    """A lost answer still not found past the portal's window: a person, with the evidence."""
    checks = int((mark or {}).get("checks") or 0)
    return UncertainOutcome(
        f"{rule.portal}: the answer to submission {name!r} (reference {reference}) made at "
        f"{submitted_at:%Y-%m-%d %H:%M} UTC was lost and the portal's lookup has not found it "
        f"in {checks + 1} checks over {_hours(now - submitted_at)}; {rule.says}. It may be "
        f"queued or filed: check the portal, then --confirmed-filed or --not-filed; do not "
        f"retry blindly")


def _hours(d: timedelta) -> str:
    h = d.total_seconds() / 3600
    return f"{h:.1f} h" if h >= 1 else f"{d.total_seconds() / 60:.0f} min"
