"""The IRS's point of no return as a request (:mod:`portals.flows.never_twice`): "Submit EIN
Request" posts the application [?: the stand-in's path; the real app's API path is not in
tests/facts/irs-applyein.txt]."""

from __future__ import annotations

from portalq.portals.flows.never_twice import Submitting

SUBMITTING = (Submitting("irs_ein", "POST", r"/applyein/api/application$",
                         "the EIN application"),)
