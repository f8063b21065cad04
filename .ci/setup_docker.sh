#!/usr/bin/env bash
# Make the Docker-path tests runnable: Debian's Docker engine installed, dockerd
# answering, and the local simulated-vLLM image built (no registry is reachable).
# Idempotent and fast when everything is already there.
#   LLMPERF_DOCKERD_LOG    where a dockerd started here logs (default: $TMPDIR)
#   LLMPERF_DOCKERD_WAIT   seconds to wait for it to answer (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."

log=${LLMPERF_DOCKERD_LOG:-${TMPDIR:-/tmp}/pytest-llmperf-dockerd.log}
wait_s=${LLMPERF_DOCKERD_WAIT:-60}

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup_docker: installing ${missing[*]} from Debian ..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "setup_docker: starting dockerd (log: $log) ..."
    nohup dockerd >"$log" 2>&1 &
    for _ in $(seq "$wait_s"); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 30 "$log" >&2 || true
        echo "setup_docker: dockerd did not answer within ${wait_s}s (log above)" >&2
        exit 1
    fi
fi
echo "setup_docker: engine $(docker version -f '{{.Server.Version}}') answers"

bash docker/build_sim_image.sh
