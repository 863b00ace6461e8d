"""The registry loads plugins once, not on every lookup (a lookup is on the claim path:
scanning every installed package's metadata per job cost the service ~28 ms a job)."""

from __future__ import annotations

import importlib.metadata

import pytest

from portalq.jobs import plugins, types


def test_lookups_after_the_first_do_not_scan_package_metadata(monkeypatch: pytest.MonkeyPatch):
    types.get("obtain_ein")          # loads the built-in catalogue (and PORTALQ_PLUGINS)
    scans = []
    real = importlib.metadata.entry_points

    def counting(**kw):
        scans.append(kw)
        return real(**kw)

    monkeypatch.setattr(plugins, "entry_points", counting)
    for _ in range(100):
        types.get("obtain_ein")
        types.names()
    assert scans == []


def test_a_new_plugins_value_is_still_loaded(monkeypatch: pytest.MonkeyPatch):
    types.get("obtain_ein")
    monkeypatch.setenv("PORTALQ_PLUGINS", "tests.plugins.renewal")
    assert types.get("renew_licence").name == "renew_licence"
