"""What can vouch for a CRTC registration (:class:`portals.lookups.LookupAuthority`; the
docs' table ``docs/portals/lookup-authority.md`` is checked against it)."""

from __future__ import annotations

from portalq.portals.lookups import LookupAuthority

REGISTRATION = LookupAuthority(
    portal="crtc", submission="crtc_registration", page=None,
    vouches="nothing known: a search of one's own submissions is not sourced (issue 53); "
            "the dated receipt is read from the answer only",
    not_found_conclusive_after=None,
    source="none found: docs/portals/crtc.md (Where the facts are inferred or unknown)")

LISTING = LookupAuthority(
    portal="crtc", submission="crtc_listing",
    page="the CRTC's public registration list (read-only, no sign-in)",
    vouches="the company's legal name listed confirms the registration; not yet listed is "
            "normal within 24 hours of the confirmation letter",
    not_found_conclusive_after=None,
    source="docs/portals/crtc.md: \"will appear on the registration list within 24 hours of "
           "the date the confirmation letter is sent\"")

AUTHORITIES = (REGISTRATION, LISTING)
