#!/usr/bin/env bash
# Make sure PgBouncer exists for the tests that run portalq behind it (Debian's package
# `pgbouncer`; the tests start their own instance on a free port, never the system one).
set -u
for c in pgbouncer /usr/sbin/pgbouncer; do
  if command -v "$c" >/dev/null 2>&1; then exit 0; fi
done
echo "pgbouncer: installing the system package pgbouncer ..."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  if DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq pgbouncer >/dev/null 2>&1; then
    # the package may start a system instance; the tests do not use it
    $SUDO service pgbouncer stop >/dev/null 2>&1 || true
    echo "pgbouncer: installed"; exit 0
  fi
fi
echo "pgbouncer: could not install it (install the 'pgbouncer' package by hand)" >&2
exit 1
