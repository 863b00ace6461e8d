"""BC Registries' numbers as bcgov builds them: the stand-in makes them and the flow reads
them in the same shapes (docs/portals/bc.md, "Numbers")."""

from __future__ import annotations

import re

from portalq.portals.bc import site
from portalq.portals.bc import standin_registry as registry

# bcgov/lear legal-api/src/legal_api/services/bootstrap.py, _generate_temp_identifier: "T"
# and 9 of string.ascii_letters + string.digits, at least one of them a digit
LEAR = re.compile(r"T[A-Za-z0-9]{9}")


def test_the_stand_ins_temporary_numbers_are_lears():
    made = {registry.temporary_number() for _ in range(500)}
    assert len(made) == 500
    for temp in made:
        assert LEAR.fullmatch(temp) and any(c.isdigit() for c in temp[1:]), temp
    # letters of both cases occur, as in lear (500 draws of 9 characters: certain in practice)
    assert any(c.islower() for t in made for c in t) and any(c.isupper() for t in made
                                                             for c in t[1:])


def test_the_flow_reads_lears_temporary_numbers_and_only_them():
    for temp in ("TaB3xYz9Q1", "T123456789", "Tq9WWWWWWW"):
        assert re.fullmatch(site.TEMPORARY_NUMBER, temp), temp
    # the old invented shape, no digit at all, the wrong length
    for temp in ("T1234567", "TabcdefghI", "T12345678", "T1234567890", "BC1234567"):
        assert not re.fullmatch(site.TEMPORARY_NUMBER, temp), temp
