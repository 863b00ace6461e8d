"""Every handle the BC site module acts on or reads has a declared source
(portals/bc/handles.py): a bcgov file, or the stand-in's mark [I]."""

from __future__ import annotations

import re
from pathlib import Path

from portalq.portals.bc import site
from portalq.portals.bc.handles import HANDLES

# adjacent string literals joined, as Python joins them
SITE = re.sub(r'"\s*\n\s*"', "", Path(site.__file__).read_text())
#: how site.py names a handle: a label, button or text as the first string argument of the
#: page helpers, or a CSS id selector
CALLS = re.compile(r'self\.(?:fill|submit|submit_final|select|text|control)\(\s*f?"([^"{]+)"')
LABELS = re.compile(r'get_by_label\(\s*"([^"]+)"')
IDS = re.compile(r'"(#[a-z-]+)')


def test_every_handle_the_site_uses_has_a_source():
    used = set(CALLS.findall(SITE)) | set(LABELS.findall(SITE))
    used |= {i for i in IDS.findall(SITE)}
    missing = {h for h in used if h not in HANDLES}
    assert not missing, missing


def test_the_sourced_texts_are_the_sites():
    assert site.NOT_FOUND in HANDLES and site.DUPLICATE in HANDLES
    for value in HANDLES.values():
        assert value.startswith(("[S]", "[I]")), value
