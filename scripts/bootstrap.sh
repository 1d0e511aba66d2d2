#!/usr/bin/env bash
# Create .venv and install the project with its test, torch, ray, bench, docs and examples extras and uvloop. Idempotent and quick when
# nothing changed (a stamp file records the hash of pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "bootstrap: Python >= 3.11 is required (found: $("$PY" --version 2>&1))" >&2
    exit 1
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bootstrap: installing python3-venv" >&2
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    else
        echo "bootstrap: the Python venv module is missing; install python3-venv" >&2
        exit 1
    fi
fi
# the netns scenario backend drives namespaces and veth pairs with iproute2's `ip`
if ! command -v ip >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing iproute2" >&2
    apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null
fi
# MQTT sources and sinks talk to a real mosquitto broker, which the tests start on a free port
# (the system service the package may start is never used); the binary is in /usr/sbin
if ! command -v mosquitto >/dev/null && [ ! -x /usr/sbin/mosquitto ] && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null; then
    echo "bootstrap: installing mosquitto" >&2
    apt-get update -qq && apt-get install -y -qq mosquitto >/dev/null
fi
# packet captures are checked with Debian's tshark; the live scenario page is tested in Debian's
# headless chromium (Playwright's own browser download needs the internet); both only as root
for pkg in tshark chromium; do
    if ! command -v "$pkg" >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bootstrap: installing $pkg" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null; }
    fi
done
# the compiled hot paths (forwarder/observe/_tap.c) build at install time: a C compiler and the
# Python headers (Debian's python3-dev for the system Python; pyenv and python.org builds carry them)
if ! command -v cc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing gcc" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null
fi
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing python3-dev (Python.h)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-dev >/dev/null
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# the benchmarks' peers (gRPC, bytewax) too: the suite tests the benches' code against them
extras='test,speed,torch,ray,bench,docs,examples'
stamp=.venv/.icn-installed
# the compiled modules' sources too (the C ones, and the Python ones mypyc compiles, listed in
# pyproject.toml): a changed source is built again (pip install -e builds them, setup.py)
compiled=$("$PY" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["tool"]["icn"]["compiled"])')
want=$( (cat pyproject.toml setup.py; find icn forwarder compute apps -name '*.c' | sort | xargs -r cat
         cat $compiled; echo "$extras") | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bootstrap: installing the project into .venv (first run takes about a minute)" >&2
    log=.venv/bootstrap.log
    if ! { .venv/bin/python -m pip install --upgrade pip \
           && .venv/bin/python -m pip install -e ".[$extras]"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "bootstrap: pip install failed; full log in $log" >&2
        exit 1
    fi
    echo "$want" > "$stamp"
fi
