#!/usr/bin/env bash
# Build the simulated-vLLM image (default tag pytest-llmperf/sim-vllm:local) with no
# container registry: base = debootstrap rootfs (make_rootfs.sh), dependencies = wheels
# fetched by pip on the host, installed into the build context, never inside the build.
# Skips the build when the image's content-hash label already matches.
# Usage: docker/build_sim_image.sh [--force]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here="$root/docker"
tag=${LLMPERF_SIM_IMAGE:-pytest-llmperf/sim-vllm:local}
suite=${LLMPERF_DEBIAN_SUITE:-bookworm}
force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac
export DOCKER_BUILDKIT=0  # Debian's docker.io has no BuildKit

arch=$(uname -m)
case "$arch" in
    x86_64|aarch64) ;;
    *) echo "build_sim_image: unsupported architecture $arch" >&2; exit 1 ;;
esac

sha() { sha256sum | cut -c1-16; }

# The base changes only when its recipe, suite or architecture does.
base_hash=$( { cat "$here/make_rootfs.sh"; echo "$suite $arch"; } | sha)
base_tag="pytest-llmperf/debian-python:$suite-$base_hash"
if ! docker image inspect "$base_tag" >/dev/null 2>&1; then
    bash "$here/make_rootfs.sh" "$base_tag"
fi

# The image's content: base, Dockerfile, this script, dependencies and package source.
content_hash=$(
    cd "$root"
    {
        echo "$base_tag"
        cat docker/Dockerfile.sim docker/build_sim_image.sh pyproject.toml
        find pytest_llmperf -type f -name '*.py' -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum
    } | sha
)
current=$(docker image inspect -f '{{ index .Config.Labels "io.pytest-llmperf.content-hash" }}' "$tag" 2>/dev/null || true)
if [ "$force" = 0 ] && [ "$current" = "$content_hash" ]; then
    echo "build_sim_image: $tag is up to date ($content_hash)"
    exit 0
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/llmperf-ctx.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

# The project's runtime dependencies, read from pyproject.toml (Python 3.11+ has tomllib).
mapfile -t deps < <(python3 - "$root/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
PY
)
# Wheels for the image's Python (Debian's 3.11, glibc 2.36), whatever Python runs here.
# pip does not widen an explicit --platform to older manylinux tags, so list them.
platforms=()
for minor in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
platforms+=(--platform "manylinux2014_$arch")
echo "build_sim_image: installing ${#deps[@]} dependencies into the build context ..."
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-compile \
    --target "$ctx/site" --only-binary=:all: \
    --implementation cp --python-version 3.11 "${platforms[@]}" \
    "${deps[@]}" >"$ctx/pip.log" 2>&1 || { cat "$ctx/pip.log" >&2; echo "build_sim_image: pip failed (log above)" >&2; exit 1; }

mkdir -p "$ctx/app"
(cd "$root" && tar -c --exclude='__pycache__' --exclude='*.pyc' pytest_llmperf) | tar -x -C "$ctx/app"
cp "$here/Dockerfile.sim" "$ctx/Dockerfile"

echo "build_sim_image: building $tag (classic builder) ..."
nice docker build --quiet --build-arg "BASE=$base_tag" \
    --label "io.pytest-llmperf.content-hash=$content_hash" \
    --label "io.pytest-llmperf.image=sim-vllm" \
    -t "$tag" "$ctx" >"$ctx/build.log" 2>&1 || { cat "$ctx/build.log" >&2; echo "build_sim_image: docker build failed (log above)" >&2; exit 1; }
echo "build_sim_image: built $tag ($content_hash)"
# Earlier builds of the same tag are left untagged: drop them so disk use stays flat.
docker image prune -f --filter "label=io.pytest-llmperf.image=sim-vllm" >/dev/null || true
