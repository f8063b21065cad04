#!/usr/bin/env bash
# Make the Docker-path tests runnable: Debian's Docker engine installed, dockerd
# answering, and the local simulated-vLLM image built (no registry is reachable).
# Idempotent and fast when everything is already there.
#   LLMPERF_DOCKERD_LOG    where a dockerd started here logs (default: $TMPDIR)
#   LLMPERF_DOCKERD_WAIT   seconds to wait for it to answer (default 60)
#
#   .ci/setup_docker.sh --check-clean   after the suite: fail if any container of the
#                                       plugin (label io.pytest-llmperf.plugin) is left
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--check-clean" ]; then
    left=$(docker ps -a --filter label=io.pytest-llmperf.plugin=pytest-llmperf \
        --format '{{.Names}} ({{.Status}}, session {{.Label "io.pytest-llmperf.session"}})')
    if [ -n "$left" ]; then
        printf 'setup_docker: containers of pytest-llmperf left behind:\n%s\n' "$left" >&2
        exit 1
    fi
    echo "setup_docker: no pytest-llmperf container left"
    exit 0
elif [ -n "${1:-}" ]; then
    echo "usage: $0 [--check-clean]" >&2
    exit 2
fi

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

# A pid file left by a dockerd that was killed (a previous session's) blocks a new one.
clear_stale_pid() {
    local file=$1 name=$2 pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    if [ -z "$pid" ] || ! tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$name"; then
        echo "setup_docker: removing stale $file (pid ${pid:-none} is not a live $name)"
        rm -f "$file"
    fi
}

if ! docker info >/dev/null 2>&1; then
    clear_stale_pid /var/run/docker.pid dockerd
    clear_stale_pid /var/run/docker/containerd/containerd.pid containerd
    echo "setup_docker: starting dockerd (log: $log) ..."
    nohup dockerd >"$log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq "$wait_s"); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$dockerd_pid" 2>/dev/null || break  # it died: no use waiting
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
