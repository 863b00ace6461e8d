"""Issue 40: docs/reference/settings.md is what docs/gen/settings_ref.py makes of the
settings model, and every setting is described there."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from portalq.jobs import settings
from tests.conftest import ROOT

GENERATOR = ROOT / "docs" / "gen" / "settings_ref.py"


def _generator() -> dict[str, Any]:
    return runpy.run_path(str(GENERATOR))   # not as __main__: nothing written


def test_the_committed_reference_is_the_models() -> None:
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert page == _generator()["render"](), (
        "docs/reference/settings.md is stale: run python docs/gen/settings_ref.py")


def test_every_variable_is_in_the_reference() -> None:
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    for section in (*settings.SECTIONS, settings.ConsoleSettings):
        for name in section.env_names().values():
            assert f"| `{name}` |" in page, name
    for prefix in settings.FAMILIES:
        assert f"| `{prefix}<" in page, prefix


def test_a_setting_without_a_description_stops_the_generator(tmp_path: Path) -> None:
    class Undescribed(settings.Section):
        title = "Undescribed"
        plain: int = Field(1)

    table = _generator()["_table"]
    with pytest.raises(SystemExit, match="Undescribed.plain has no description"):
        table(Undescribed)
