"""Issue 40: every PORTALQ_* name is read by the settings model (jobs/settings), nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from portalq.jobs import settings
from portalq.jobs.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("jobs", "scheduler", "portals", "migrations")
SETTINGS_PACKAGE = ROOT / "jobs" / "settings"


def _environment_uses(tree: ast.AST) -> list[tuple[int, ast.AST, ast.AST | None]]:
    """(line, the os.environ / getenv node, its parent) for every use in ``tree``."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    readers = ("environ", "environb", "getenv", "getenvb")
    from_os = {alias.asname or alias.name for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "os"
               for alias in node.names if alias.name in readers}
    found = []
    for node in ast.walk(tree):
        environ = (isinstance(node, ast.Attribute) and node.attr in readers
                   and isinstance(node.value, ast.Name) and node.value.id == "os")
        bare = isinstance(node, ast.Name) and node.id in from_os
        if environ or bare:
            found.append((node.lineno, node, parents.get(node)))
    return found


def _constant_key(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def raw_reads(source: str) -> list[int]:
    """Lines reading the environment other than a named non-PORTALQ_ variable (VAULT_ADDR,
    HOME...) or setting one (the demo sets what its service reads)."""
    tree = ast.parse(source)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    bad = []
    for line, node, parent in _environment_uses(tree):
        key: str | None = None
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, ast.Store | ast.Del):
                continue   # os.environ["X"] = ...: setting, not reading
            key = _constant_key(parent.slice)
        elif isinstance(parent, ast.Attribute) and parent.attr in ("setdefault", "get"):
            call = parents.get(parent)
            if parent.attr == "setdefault":
                continue   # a default for what is read later (through the settings)
            if isinstance(call, ast.Call) and call.args:
                key = _constant_key(call.args[0])
        elif isinstance(parent, ast.Call) and parent.func is node and parent.args:
            key = _constant_key(parent.args[0])   # os.getenv("X")
        if key is None or key.upper().startswith("PORTALQ"):
            bad.append(line)
    return bad


def test_no_module_reads_portalq_variables_but_the_settings() -> None:
    offenders = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if SETTINGS_PACKAGE in path.parents:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{line}"
                          for line in raw_reads(path.read_text())]
    assert offenders == [], "read these through portalq.jobs.settings: " + ", ".join(offenders)


@pytest.mark.parametrize("source, lines", [
    ('import os\nx = os.environ.get("PORTALQ_HOME")\n', [2]),
    ('import os\nx = os.environ["PORTALQ_KEK"]\n', [2]),
    ('import os\nx = os.getenv("PORTALQ_HOME", "")\n', [2]),
    ('import os\nfor k in os.environ:\n    pass\n', [2]),
    ('import os\nf(os.environ)\n', [2]),
    ('def f(environ):\n    return environ.get("PORTALQ_HOME")\n', []),   # a parameter
    ('from os import environ\nx = environ.get("PORTALQ_HOME")\n', [2]),
    ('import os\nx = os.environ.get(name)\n', [2]),          # a computed name may be one
    ('import os\nx = os.environ.get("VAULT_ADDR")\n', []),    # Vault's own variable
    ('import os\nos.environ["PORTALQ_DATABASE_URL"] = u\n', []),
    ('import os\nos.environ.setdefault("PORTALQ_PORTAL_CHECK_SECONDS", "1")\n', []),
])
def test_the_check_sees_each_way_of_reading(source: str, lines: list[int]) -> None:
    assert raw_reads(source) == lines


def test_every_setting_is_described() -> None:
    missing = [f"{section.__name__}.{name}"
               for section in (*settings.SECTIONS, settings.ConsoleSettings)
               for name, field in section.model_fields.items() if not field.description]
    assert missing == []


def test_the_sections_are_all_of_the_settings() -> None:
    in_sections = {name for section in settings.SECTIONS for name in section.model_fields}
    assert in_sections == set(settings.Settings.model_fields)
    names = [n for s in settings.SECTIONS for n in s.env_names().values()]
    assert len(names) == len(set(names)), "a variable defined twice"


def test_a_value_counts_from_when_it_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PORTALQ_MAX_PAYLOAD_BYTES", raising=False)
    assert settings.current(settings.JobSettings).max_payload_bytes == 256 * 1024
    monkeypatch.setenv("PORTALQ_MAX_PAYLOAD_BYTES", "50")
    assert settings.current(settings.JobSettings).max_payload_bytes == 50
    monkeypatch.setenv("PORTALQ_MAX_PAYLOAD_BYTES", "")   # empty: unset
    assert settings.current(settings.JobSettings).max_payload_bytes == 256 * 1024


def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTALQ_SCHEMA", "public")
    with pytest.raises(InputError, match=r"^invalid setting PORTALQ_SCHEMA: 'public' is not"):
        settings.current(settings.DatabaseSettings)
    monkeypatch.setenv("PORTALQ_KEK", "k1:c2VjcmV0")
    monkeypatch.setenv("PORTALQ_BROWSER_MAX_CONTEXTS", "-1")
    with pytest.raises(InputError) as caught:
        settings.current(settings.BrowserSettings)
    assert str(caught.value).startswith("invalid setting PORTALQ_BROWSER_MAX_CONTEXTS:")
    assert "\n" not in str(caught.value)


def test_the_config_file_is_read_when_a_section_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "portalq.env"
    config.write_text("PORTALQ_PLUGINS=one.module\n")
    monkeypatch.delenv("PORTALQ_PLUGINS", raising=False)
    monkeypatch.setenv("PORTALQ_CONFIG", str(config))
    assert settings.current(settings.JobSettings).plugins == "one.module"
    monkeypatch.setenv("PORTALQ_PLUGINS", "other")   # the environment wins
    assert settings.current(settings.JobSettings).plugins == "other"


def test_families_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTALQ_PORTAL_URL_IRS_EIN", "http://127.0.0.1:9/irs")
    assert settings.family("PORTALQ_PORTAL_URL_") == {
        "PORTALQ_PORTAL_URL_IRS_EIN": "http://127.0.0.1:9/irs"}
    monkeypatch.setenv("PORTALQ_ACCOUNT_CRTC_DEMO_PASSWORD", "pw")
    assert settings.variable("PORTALQ_ACCOUNT_", "CRTC_DEMO_PASSWORD") == "pw"
    with pytest.raises(KeyError, match="not a documented family"):
        settings.family("PORTALQ_")
