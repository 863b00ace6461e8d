#!/usr/bin/env bash
# Make sure a Chromium exists for Playwright: Playwright's own download where it is
# reachable, else the system's Chromium (Debian package `chromium`).
set -u
PY=${1:-.venv/bin/python}
if "$PY" - <<'PYEOF' 2>/dev/null; then exit 0; fi
import os, sys
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    sys.exit(0 if os.path.exists(p.chromium.executable_path) else 1)
PYEOF
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then echo "browser: using system $(command -v "$c")"; exit 0; fi
done
echo "browser: trying Playwright's own Chromium download ..."
if timeout 300 "$PY" -m playwright install chromium >/dev/null 2>&1; then
  echo "browser: Playwright Chromium installed"; exit 0
fi
echo "browser: download unavailable; installing the system package chromium ..."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  if DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null 2>&1; then
    echo "browser: system chromium installed"; exit 0
  fi
fi
echo "browser: could not get a Chromium (install the 'chromium' package by hand)" >&2
exit 1
