"""BC Registries' points of no return as requests (:mod:`portals.flows.never_twice`): the
Name Request's "Submit and Pay", the incorporation's "File and Pay", and a saved draft's
payment from its dashboard [?: the stand-in's paths -- bcgov's own front ends post to their
APIs; the lead aligns these with the BC flow's current pages at merge]."""

from __future__ import annotations

from portalq.portals.flows.never_twice import Submitting

SUBMITTING = (
    Submitting("bc_corporate_online", "POST", r"/nr/applicant$",
               "the name request and its payment"),
    Submitting("bc_corporate_online", "POST", r"/inc/step/5$",
               "the incorporation and its payment"),
    Submitting("bc_corporate_online", "POST", r"/dashboard/[^/]+/pay$",
               "the payment of a saved draft"),
)
