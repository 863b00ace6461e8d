#!/usr/bin/env bash
# Make sure a Chromium exists for Playwright: Playwright's own download where it is
# reachable, else the system's Chromium (Debian packages `chromium` and
# `chromium-headless-shell`: the headless build, which Playwright itself launches for
# headless runs and which takes about half the CPU of `chromium --headless`).
set -u
PY=${1:-.venv/bin/python}
if "$PY" - <<'PYEOF' 2>/dev/null; then exit 0; fi
import os, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    sys.exit(0 if os.path.exists(p.chromium.executable_path) else 1)
PYEOF
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
apt_install() {  # quietly, never prompting; fails where apt or the rights are missing
  command -v apt-get >/dev/null 2>&1 || return 1
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null 2>&1
}
for c in chromium-headless-shell chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then
    if ! command -v chromium-headless-shell >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
      apt_install chromium-headless-shell && echo "browser: system chromium-headless-shell installed"
    fi
    echo "browser: using system $(command -v chromium-headless-shell || command -v "$c")"; exit 0
  fi
done
echo "browser: trying Playwright's own Chromium download ..."
if timeout 300 "$PY" -m playwright install chromium >/dev/null 2>&1; then
  echo "browser: Playwright Chromium installed"; exit 0
fi
echo "browser: download unavailable; installing the system packages chromium, chromium-headless-shell ..."
if apt_install chromium chromium-headless-shell || apt_install chromium; then
  echo "browser: system chromium installed"; exit 0
fi
echo "browser: could not get a Chromium (install the 'chromium' package by hand)" >&2
exit 1
