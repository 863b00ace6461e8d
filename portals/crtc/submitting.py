"""The CRTC's point of no return as a request (:mod:`portals.flows.never_twice`): "Submit
Registration" posts the letter [?: the stand-in's path; My CRTC Account's is not sourced]."""

from __future__ import annotations

from portalq.portals.flows.never_twice import Submitting

SUBMITTING = (Submitting("crtc", "POST", r"/register/documents$", "the registration"),)
