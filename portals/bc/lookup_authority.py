"""What can vouch for a BC Registries submission (:class:`portals.lookups.LookupAuthority`;
the docs' table ``docs/portals/lookup-authority.md`` is checked against it)."""

from __future__ import annotations

from portalq.portals.lookups import LookupAuthority

NAME_REQUEST = LookupAuthority(
    portal="bc_corporate_online", submission="name_request",
    page="Name Request's existing request search: the NR number with the applicant's phone "
         "or e-mail",
    vouches="an NR found by its number, in any state (namex's states); without the number "
            "(an answer lost before it was read) it cannot be searched",
    not_found_conclusive_after=None,
    source="bcgov/namerequest app/src/components/existing-request; bcgov/namex "
           "api/namex/services/name_request/name_request_state.py")

INCORPORATION = LookupAuthority(
    portal="bc_corporate_online", submission="incorporation",
    page="the business dashboard of the temporary registration (File and Pay redirects to "
         "PayBC or to it)",
    vouches="the temporary registration and, once the registry completes the filing, its "
            "BC number",
    not_found_conclusive_after=None,
    source="bcgov/business-create-ui src/components/common/Actions.vue")

AUTHORITIES = (NAME_REQUEST, INCORPORATION)
