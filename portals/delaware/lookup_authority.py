"""What can vouch for a Delaware filing (:class:`portals.lookups.LookupAuthority`; the docs'
table ``docs/portals/lookup-authority.md`` is checked against it).

No page of the real portal is known to show a service request's later status: the one the
flow read was invented (issue 53). Public automation of eCorp2 records the request as
pending and stops there; the filed evidence goes back by the return method chosen."""

from __future__ import annotations

from portalq.portals.lookups import LookupAuthority

FORMATION = LookupAuthority(
    portal="delaware_icis", submission="formation", page=None,
    vouches="nothing: the Service Request Number on the answer to the payment is all the "
            "flow sees; a person checks the filing agent's eCorp2 account at the expected "
            "decision time (48 h), and at once after a lost answer",
    not_found_conclusive_after=None,
    source="none found; searched: docs/portals/delaware.md (Lookup)")

AUTHORITIES = (FORMATION,)
