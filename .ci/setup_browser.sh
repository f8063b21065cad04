#!/usr/bin/env bash
# Make the browser test runnable (tests/browser: report.html opened in headless
# Chromium by Playwright): Debian's Chromium installed. Playwright for Python comes with
# the dev extras and drives this Chromium through its executable_path, so no browser is
# downloaded. Idempotent and fast when Chromium is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null; then
    echo "setup_browser: installing chromium from Debian ..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
python3 -c 'import playwright.sync_api' 2>/dev/null || {
    echo "setup_browser: Playwright for Python is missing; pip install -e '.[dev]' first" >&2
    exit 1
}
echo "setup_browser: $(chromium --version 2>/dev/null | head -n 1) at $(command -v chromium)"
