"""BC Registries' points of no return as requests (:mod:`portals.flows.never_twice`), the
paths of the BC site's pages (``site.SUBMITTING_PATHS``): the Name Request's creation and
its payment, the incorporation's "File and Pay", PayBC's Pay, and a saved draft's payment
from its dashboard (a redirect to PayBC) [?: the stand-in's paths -- bcgov's own front ends
post to their APIs (namex ``/namerequests``, pay-api); the pages' own requests are what the
guard sees]."""

from __future__ import annotations

from portalq.portals.flows.never_twice import Submitting

SUBMITTING = (
    Submitting("bc_corporate_online", "POST", r"/nr/applicant$", "the name request"),
    Submitting("bc_corporate_online", "POST", r"/nr/payment$", "the name request's payment"),
    Submitting("bc_corporate_online", "POST", r"/inc/step/5$",
               "the incorporation (File and Pay)"),
    Submitting("bc_corporate_online", "POST", r"/paybc/makepayment/[^/]+/",
               "PayBC's payment"),
    Submitting("bc_corporate_online", "POST", r"/dashboard/[^/]+/pay$",
               "the payment of a saved draft"),
)
