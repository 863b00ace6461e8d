"""What each queueing portal's lookup may decide, and how a job waiting on it is checked
(:class:`jobs.waiting.LookupRule`; the facts are in ``../shared/portal-facts.md``).

None of these registries lists a request its staff have not processed yet in the lookup the
flows use, as far as the public sources show ([?] in the facts): so for each, a found number
is authoritative and "not found" is never conclusive -- a lost answer waits for the lookup
to find it and, past the window, goes to a person. A portal whose lookup is shown to list
queued requests may declare ``not_found_conclusive_after``.

``PORTALQ_PORTAL_CHECK_SECONDS`` (tests and demos only) replaces every check interval and
cap, so a stand-in that decides after seconds is checked within seconds;
``PORTALQ_LOST_ANSWER_WINDOW_SECONDS`` (tests only) shortens every lost-answer window, so a
test sees a person asked within seconds.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta

from portalq.jobs.waiting import LookupRule

H = timedelta(hours=1)
MIN = timedelta(minutes=1)

RULES: dict[tuple[str, str], LookupRule] = {
    # eCorp2: a Service Request Number on the answer; staff file later (file number and
    # stamped certificate through the account's request status) [S]; normal processing
    # decides within days, priority within hours [I]
    ("delaware_icis", "formation"): LookupRule(
        portal="delaware_icis",
        says="a file number found by the reference is authoritative; 'not found' is never "
             "conclusive (a request queued for staff is not listed until it is filed)",
        not_found_conclusive_after=None, lost_answer_window=48 * H,
        check_every=15 * MIN, backoff=2.0, check_cap=4 * H, expected_within=48 * H),
    # Name Request: examined by staff in order of receipt, priority "normally within 24
    # hours" [S]
    ("bc_corporate_online", "name_request"): LookupRule(
        portal="bc_corporate_online",
        says="an NR number found is authoritative, in any state; 'not found' is never "
             "conclusive",
        not_found_conclusive_after=None, lost_answer_window=24 * H,
        check_every=30 * MIN, backoff=1.5, check_cap=4 * H, expected_within=24 * H),
    # File and Pay saves the filing; the BC number comes when the registry completes it [S]
    ("bc_corporate_online", "incorporation"): LookupRule(
        portal="bc_corporate_online",
        says="a BC number found by the folio reference is authoritative; 'not found' is "
             "never conclusive (a saved or paid filing awaits the registry)",
        not_found_conclusive_after=None, lost_answer_window=24 * H,
        check_every=30 * MIN, backoff=1.5, check_cap=4 * H, expected_within=24 * H),
    # a dated receipt at once; staff process; confirmation letter, then the public list
    # within 24 hours of it [S]; processing time [?]
    ("crtc", "crtc_registration"): LookupRule(
        portal="crtc",
        says="a confirmation number (the dated receipt) found by the file reference is "
             "authoritative; 'not found' is never conclusive",
        not_found_conclusive_after=None, lost_answer_window=48 * H,
        check_every=H, backoff=2.0, check_cap=12 * H, expected_within=10 * 24 * H),
}


#: which submission a job type makes on a portal: its processing after the run is the rule's
#: (the ETA's "then the registry decides", issue 41)
SUBMISSIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("file_entity", "delaware_icis"): ("delaware_icis", "formation"),
    ("name_search", "bc_corporate_online"): ("bc_corporate_online", "name_request"),
    ("file_entity", "bc_corporate_online"): ("bc_corporate_online", "incorporation"),
    ("process_crtc", "crtc"): ("crtc", "crtc_registration"),
}


def processing(job_type: str, portal: str) -> tuple[timedelta, timedelta] | None:
    """The portal's declared processing of the job type's submission: (typical, at most).
    Only "within" is declared (``expected_within``); half of it stands for the typical
    case until it is measured."""
    key = SUBMISSIONS.get((job_type, portal))
    if key is None:
        return None
    within = RULES[key].expected_within
    return within / 2, within


def rule(portal: str, submission: str) -> LookupRule:
    """The declared rule of ``portal``'s submission ``submission`` (KeyError: none declared,
    which is a programming error: every queueing flow declares its own)."""
    found = RULES[(portal, submission)]
    override = os.environ.get("PORTALQ_PORTAL_CHECK_SECONDS")
    if override:
        every = timedelta(seconds=float(override))
        found = replace(found, check_every=every, check_cap=every)
    window = os.environ.get("PORTALQ_LOST_ANSWER_WINDOW_SECONDS")
    if window:
        found = replace(found, lost_answer_window=timedelta(seconds=float(window)))
    return found
