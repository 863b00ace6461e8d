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

import importlib
import pkgutil
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import cache

import portalq.portals as package
from portalq.jobs import settings
from portalq.jobs.waiting import LookupRule

H = timedelta(hours=1)
MIN = timedelta(minutes=1)


@dataclass(frozen=True)
class LookupAuthority:
    """Which real page can vouch for a submitted filing, written down with its public source
    (issue 53). Each portal declares its own beside its flow
(``portals/<p>/lookup_authority.py``, ``AUTHORITIES``);
    its flow reads it, and ``docs/portals/lookup-authority.md`` is checked against it. A
    page that no source shows is never read: where none is known (``page`` None) the flow
    looks at nothing and a person checks at the expected decision time."""

    portal: str
    submission: str
    #: the real page (URL or where it is), None: no page known to exist
    page: str | None
    #: what a record found there settles
    vouches: str
    #: "not found" proves nothing was received only this long after the submission
    #: (None: never)
    not_found_conclusive_after: timedelta | None
    #: the public source of the page (repository + path, or URL), or why there is none
    source: str

RULES: dict[tuple[str, str], LookupRule] = {
    # eCorp2's Document Filing service: a Service Request Number on the answer; staff file
    # later [S]. No page known to exist shows a request's later status (the declared
    # authority, portals/delaware/portal.py), so nothing is looked up: a person checks at
    # the expected time, and a lost answer goes to a person at once. Normal processing
    # decides within days, priority within hours [I]
    ("delaware_icis", "formation"): LookupRule(
        portal="delaware_icis",
        says="no page known to exist shows an eCorp2 service request's later status or "
             "finds a request whose answer was lost; a person checks the filing agent's "
             "eCorp2 account",
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


@cache
def authorities() -> dict[tuple[str, str], LookupAuthority]:
    """Every portal's declared lookup authority, by (portal, submission): each portal
    package's ``lookup_authority.AUTHORITIES`` (found, not listed here, so that adding a
    portal edits no shared file)."""
    found: dict[tuple[str, str], LookupAuthority] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{package.__name__}.{info.name}.lookup_authority")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package.__name__}.{info.name}.lookup_authority":
                raise
            continue
        for a in module.AUTHORITIES:
            found[(a.portal, a.submission)] = a
    return found


def authority_table() -> str:
    """The docs' table (docs/portals/lookup-authority.md), from the declarations."""
    def when(a: LookupAuthority) -> str:
        after = a.not_found_conclusive_after
        return "never" if after is None else f"after {after}"

    rows = ["| Portal | Submission | The page that can vouch | What it settles | "
            "\"Not found\" conclusive | Source |", "|---|---|---|---|---|---|"]
    rows += [f"| `{a.portal}` | `{a.submission}` | {a.page or 'none known'} | {a.vouches} | "
             f"{when(a)} | {a.source} |" for a in authorities().values()]
    return "\n".join(rows) + "\n"


def rule(portal: str, submission: str) -> LookupRule:
    """The declared rule of ``portal``'s submission ``submission`` (KeyError: none declared,
    which is a programming error: every queueing flow declares its own). How conclusive a
    "not found" is comes from the portal's lookup authority, where it declares one."""
    found = RULES[(portal, submission)]
    declared = authorities().get((portal, submission))
    if declared is not None:
        found = replace(found,
                        not_found_conclusive_after=declared.not_found_conclusive_after)
    knobs = settings.current(settings.TestSettings)
    if knobs.portal_check_seconds is not None:
        every = timedelta(seconds=knobs.portal_check_seconds)
        found = replace(found, check_every=every, check_cap=every)
    if knobs.lost_answer_window_seconds is not None:
        window = timedelta(seconds=knobs.lost_answer_window_seconds)
        found = replace(found, lost_answer_window=window)
    return found
