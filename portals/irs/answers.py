"""What each page of the IRS's Apply for EIN means (``portals/irs-applyein.txt`` §4-5, §7).

=================================================  ======================  ====================
answer (inline ``[aria-live] h2`` or route)        before "Submit EIN      after it
                                                   Request"
=================================================  ======================  ====================
EIN Assignment ("Congratulations! ...")            —                       assigned
"We are unable to provide you with an EIN." +      refused: a person       refused (101 at
"reference number: NNN." (101, 115)                phones the IRS with     submit: the same)
                                                   the number
"We are unable to ..." + "Form SS-4" (102, 103,    refused: a person       refused
105, 112/401)                                      files Form SS-4
"You've attempted too many requests for today."    deferred to the next    deferred (nothing
(114)                                              IRS business day        issued)
"Please wait for ApplyEIN to finish processing"    —                       in flight: uncertain,
(403/101)                                                                  never submitted again
"... experiencing a technical problem" (400/112),  outage sign             uncertain
"... currently unavailable" (500, the app's own
timeout), route ``serviceUnavailable``             (closed if out of
                                                   hours)
route ``sessionExpired``                           retry (start over)      uncertain
SSN same as the deceased/protected person          refused: fix the data   —
input errors ("The following error(s) ...")        refused: the data       refused (nothing
                                                   does not fit            sent)
anything else                                      changed portal          uncertain
=================================================  ======================  ====================

Refusals are business errors that say what a person must do; they are not retried and
are not outage signs. 114 spends no attempt (``DeferUntil``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from portalq.jobs import clock
from portalq.jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalChanged,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
    UncertainOutcome,
)
from portalq.portals.calendar import is_open, next_open, zone
from portalq.portals.flows.pages import AppState
from portalq.portals.presets import calendar_from_preset

BEFORE, AFTER = "before", "after"
IRS_TZ = "America/New_York"
REFERENCE_RE = re.compile(r"reference number: (\d+)\.")
PHONE = ("phone the IRS at 1-800-829-4933 (outside the U.S. 267-941-1099) and mention "
         "reference number {ref}")
SS4 = "file Form SS-4 by fax or mail"
UNKNOWN_AFTER = ("the IRS offers no lookup: a person checks for an issued EIN before anything "
                 "is sent again")


@dataclass(frozen=True)
class Answer:
    kind: str                       #: assigned | refused | deferred | outage | uncertain | ...
    outcome: Exception              #: what the job raises (unused for "assigned")
    refused: str | None = None      #: the submission was answered: nothing issued (its code)


def next_business_opening(now: datetime | None = None) -> datetime:
    """The IRS's next business day's opening (its preset calendar: weekdays, federal
    holidays) after today in New York."""
    local = (now or clock.now()).astimezone(zone(IRS_TZ))
    tomorrow = datetime.combine(local.date() + timedelta(days=1), time(0), tzinfo=zone(IRS_TZ))
    when = next_open(calendar_from_preset("irs_ein"), tomorrow)
    return when if when is not None else tomorrow


def _out_of_hours(now: datetime) -> datetime | None:
    cal = calendar_from_preset("irs_ein")
    return None if is_open(cal, now) else next_open(cal, now)


def classify(s: AppState, phase: str, where: str, ctx: Any = None) -> Answer:
    """What the app's current state means at ``where`` (``phase``: before or after the
    "Submit EIN Request" click)."""
    after = phase == AFTER
    said = f"{s.answer}: {s.answer_text.removeprefix(s.answer or '').strip()}" \
        if s.answer else ""
    ref = m.group(1) if (m := REFERENCE_RE.search(s.answer_text)) else None
    if s.route == "einAssignment" and "successfully assigned" in s.text:
        return Answer("assigned", RuntimeError("assigned"))
    if s.answer == "We are unable to provide you with an EIN.":
        if ref is not None:
            return Answer("refused", BusinessError(
                f"IRS refused the EIN application at {where} (reference number {ref}): a "
                f"person must {PHONE.format(ref=ref)}; it is not applied for again online"),
                refused=ref)
        if "Form SS-4" in s.answer_text:
            return Answer("refused", BusinessError(
                f"IRS refused the EIN application at {where}: a person must {SS4}; it is not "
                "applied for again online"), refused="ss4")
    if s.answer == "You've attempted too many requests for today.":
        when = next_business_opening()
        return Answer("deferred", DeferUntil(
            f"IRS: one EIN per responsible party per business day (114); next try at the "
            f"IRS's next business day opening {when.isoformat()}", when=when), refused="114")
    if s.answer == "Please wait for ApplyEIN to finish processing application submission.":
        return Answer("uncertain", UncertainOutcome(
            f"IRS: an application is already being processed (403/101) at {where}; it is "
            f"never submitted again: {UNKNOWN_AFTER}"))
    if s.answer is not None and s.answer.startswith("The Responsible Party cannot have the same"):
        return Answer("refused", BusinessError(f"IRS refused {where}: {said}"), refused="tin")
    if s.answer is not None and s.answer.startswith("The following "):
        return Answer("refused", BusinessError(f"IRS rejected {where}: {said}"),
                      refused="input" if after else None)
    unavailable = s.answer in ("Apply for EIN is experiencing a technical problem.",
                               "Apply for EIN is currently unavailable.") \
        or s.route == "serviceUnavailable"
    if after:
        what = said or s.title or s.route
        return Answer("uncertain", UncertainOutcome(
            f"IRS answered 'Submit EIN Request' with {what!r}: the application may have been "
            f"accepted; {UNKNOWN_AFTER}"))
    if unavailable:
        reopen = _out_of_hours(clock.now()) if s.route == "serviceUnavailable" else None
        if reopen is not None:
            return Answer("closed", PortalClosed(f"IRS Apply for EIN unavailable out of hours "
                                                 f"at {where}", reopen_at=reopen))
        return Answer("outage", PortalUnavailable(
            f"IRS Apply for EIN unavailable at {where}: {said or 'Service Unavailable'}"))
    if s.route == "sessionExpired":
        return Answer("expired", RetryableError(f"IRS: session expired at {where}"))
    return Answer("changed", PortalChanged(
        f"IRS: unexpected page at {where} (route {s.route!r}, step {s.step!r}, "
        f"{s.heading!r}) — portal changed?", where=where,
        expected=f"a page the IRS application shows after {where} (portal-facts)"))
