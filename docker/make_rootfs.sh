#!/usr/bin/env bash
# Make the base image: a minimal Debian with Debian's python3, built with debootstrap
# from Debian's own packages and loaded with `docker import`, so no container registry
# is involved. Usage: make_rootfs.sh TAG   (needs root, debootstrap and a Docker engine)
set -euo pipefail

tag=${1:?usage: make_rootfs.sh TAG}
suite=${LLMPERF_DEBIAN_SUITE:-bookworm}
# Empty means debootstrap's default Debian mirror; set it to use a local mirror.
mirror=${DEBIAN_MIRROR:-}

command -v debootstrap >/dev/null || { echo "make_rootfs: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make_rootfs: debootstrap needs root" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/llmperf-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "make_rootfs: debootstrap $suite (minbase + python3) into $work ..."
# shellcheck disable=SC2086
if ! nice debootstrap --variant=minbase --include=python3 "$suite" "$work/root" $mirror >"$work/debootstrap.log" 2>&1; then
    tail -n 40 "$work/debootstrap.log" >&2
    echo "make_rootfs: debootstrap failed (log above)" >&2
    exit 1
fi
# Documentation, manuals, locales and apt's lists are dead weight in a test image.
rm -rf "$work/root"/usr/share/{doc,man,info,locale} "$work/root"/var/cache/apt/* "$work/root"/var/lib/apt/lists/*

tar --numeric-owner -C "$work/root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$tag" >/dev/null
echo "make_rootfs: imported $tag"
