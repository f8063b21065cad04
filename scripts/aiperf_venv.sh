#!/usr/bin/env bash
# Prepare a venv with NVIDIA's AIPerf, the peer whose capacity search the real-engine
# test tests/real/test_capacity_vs_aiperf.py compares the plugin's with
# (`.ci/setup_real_vllm.sh` calls this). AIPerf needs no torch: about 1.2 GB, 80 s.
#
# Idempotent: the venv lands in a cache folder outside the checkout, keyed by the
# version below; a READY marker is written last, so a half-built venv is rebuilt and a
# complete one costs seconds.
#
#   LLMPERF_CACHE_DIR   cache root (default ~/.cache/pytest-llmperf)
#   PYTHON              the Python to build the venv from (default python3)
#
# Prints the prepared folder on its last line (`READY <dir>`); exits non-zero with a
# message on failure.
set -euo pipefail

AIPERF_VERSION=0.13.0

CACHE_ROOT=${LLMPERF_CACHE_DIR:-$HOME/.cache/pytest-llmperf}
DIR=$CACHE_ROOT/aiperf-$AIPERF_VERSION
VENV=$DIR/venv
PY=${PYTHON:-python3}
T0=$SECONDS

say() { printf '[aiperf_venv %4ds] %s\n' "$((SECONDS - T0))" "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

mkdir -p "$DIR"
# Two CI jobs on one machine must not build the same folder at once.
exec 9>"$DIR.lock"
flock 9

if [[ -f $DIR/READY && -x $VENV/bin/aiperf ]]; then
    say "cached: $DIR"
    echo "READY $DIR"
    exit 0
fi
rm -f "$DIR/READY"

# pip through the venv, without the warnings this machine's index settings print
# for every package (they bury real errors).
vpip() {
    "$VENV/bin/python" -m pip "$@" 2> >(grep -v 'is neither a file nor a directory' >&2)
}

say "building the venv: aiperf==$AIPERF_VERSION"
rm -rf "$VENV"
"$PY" -m venv "$VENV" || fail "python -m venv"
vpip install -q --upgrade pip || fail "pip upgrade"
vpip install -q "aiperf==$AIPERF_VERSION" || fail "pip install aiperf==$AIPERF_VERSION"
"$VENV/bin/aiperf" --version >/dev/null 2>&1 || "$VENV/bin/python" -c 'import aiperf' ||
    fail "aiperf does not start"

printf 'aiperf==%s\nvenv=%s\n' "$AIPERF_VERSION" "$VENV" >"$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "prepared in $((SECONDS - T0)) s: $DIR"
echo "READY $DIR"
