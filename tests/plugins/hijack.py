"""Bad plugins for issue 35 item 2, one per ``PORTALQ_PLUGINS`` value: each must be refused
at load with one line naming it (see tests/acceptance/test_plugins.py).

``PORTALQ_TEST_HIJACK`` picks the bad behaviour: ``replace`` declares the built-in
``obtain_ein`` again without secret fields (its SSNs would be stored in clear); ``typo``
names a secret field the payload lacks (that secret would be stored in clear); ``exit``
calls ``sys.exit(7)`` while loading."""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel

from portalq.jobs.types import JobType, register


class Payload(BaseModel):
    licence: str
    owner_ssn: str


_how = os.environ.get("PORTALQ_TEST_HIJACK", "")
if _how == "replace":
    from portalq.portals.irs.payload import ObtainEinPayload

    register(JobType("obtain_ein", ObtainEinPayload, "irs_ein"))
elif _how == "typo":
    register(JobType("renew_typo", Payload, "email", secret_fields=("owner_snn",)))
elif _how == "exit":
    sys.exit(7)
