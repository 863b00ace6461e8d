"""What each queueing portal's lookup may decide, and how a job waiting on it is checked
(:class:`jobs.waiting.LookupRule`; the facts are on each portal's page in ``docs/portals/``,
"What a lookup may decide").

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

from dataclasses import replace
from datetime import timedelta

from portalq.jobs import settings
from portalq.jobs.waiting import LookupRule

H = timedelta(hours=1)
MIN = timedelta(minutes=1)

RULES: dict[tuple[str, str], LookupRule] = {
    # eCorp2's Document Filing service: a Service Request Number on the answer; staff file
    # later, the file number and stamped document come through the account's request
    # status [S]. The form has no client-reference field [S], so a lost answer is looked up
    # by corporation name and document type submitted since the submission, never one of
    # the job's requests staff rejected (a fixed retry is a new service request); whether
    # the status lists a request before staff take it up is [?]. Normal processing decides
    # within days, priority within hours [I]
    ("delaware_icis", "formation"): LookupRule(
        portal="delaware_icis",
        says="a service request found in the account's request status (by its number, or "
             "by corporation name and document type since the submission) is "
             "authoritative: pending, filed (file number) or rejected (staff's reason); "
             "'not found' is never conclusive (the status may not list a request staff "
             "have not taken up)",
        not_found_conclusive_after=None, lost_answer_window=48 * H,
        check_every=15 * MIN, backoff=2.0, check_cap=4 * H, expected_within=48 * H),
    # Name Request: examined by staff in order of receipt, priority "normally within 24
    # hours" [S]
    ("bc_corporate_online", "name_request"): LookupRule(
        portal="bc_corporate_online",
        says="the NR found by its number with the applicant's phone and e-mail is "
             "authoritative, in any state; a lost creation has no number to look up",
        not_found_conclusive_after=None, lost_answer_window=24 * H,
        check_every=30 * MIN, backoff=1.5, check_cap=4 * H, expected_within=24 * H),
    # File and Pay saves the filing; the BC number comes when the registry completes it [S]
    ("bc_corporate_online", "incorporation"): LookupRule(
        portal="bc_corporate_online",
        says="the temporary registration's business dashboard is authoritative: COMPLETED "
             "(the BC number), PAID (awaits the registry), saved unpaid, or not filed",
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
    # after the letter: "The registering entity will appear on the registration list within
    # 24 hours of the date the confirmation letter is sent" [S] -- the public list confirms
    ("crtc", "crtc_listing"): LookupRule(
        portal="crtc",
        says="the company's legal name on the public registration list confirms the "
             "registration; not yet listed is normal within 24 hours of the letter",
        not_found_conclusive_after=None, lost_answer_window=48 * H,
        check_every=2 * H, backoff=1.0, check_cap=2 * H, expected_within=26 * H),
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
    knobs = settings.current(settings.TestSettings)
    if knobs.portal_check_seconds is not None:
        every = timedelta(seconds=knobs.portal_check_seconds)
        found = replace(found, check_every=every, check_cap=every)
    if knobs.lost_answer_window_seconds is not None:
        window = timedelta(seconds=knobs.lost_answer_window_seconds)
        found = replace(found, lost_answer_window=window)
    return found
