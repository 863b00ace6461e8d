"""Delaware's points of no return as requests (:mod:`portals.flows.never_twice`): eCorp2's
payment submit sends the filing, its document and the payment in one request [?: the
stand-in's path; the real app's API path is not sourced, docs/portals/delaware.md]."""

from __future__ import annotations

from portalq.portals.flows.never_twice import Submitting

SUBMITTING = (Submitting("delaware_icis", "POST", r"/api/e-filing$",
                         "the filing and its payment"),)
