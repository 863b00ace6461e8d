"""What can vouch for an EIN application (:class:`portals.lookups.LookupAuthority`; the
docs' table ``docs/portals/lookup-authority.md`` is checked against it): nothing -- the IRS
has no lookup of an application, so an unknown outcome goes to a person at once."""

from __future__ import annotations

from portalq.portals.lookups import LookupAuthority

EIN_APPLICATION = LookupAuthority(
    portal="irs_ein", submission="ein_application", page=None,
    vouches="nothing: the EIN is read from the answer page only (einAssignment); after a "
            "lost answer a person checks for an issued EIN",
    not_found_conclusive_after=None,
    source="docs/portals/irs.md (What a lookup may decide): ApplyEIN's routes have no "
           "lookup of an application")

AUTHORITIES = (EIN_APPLICATION,)
