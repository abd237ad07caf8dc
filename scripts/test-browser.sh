#!/usr/bin/env bash
# The browser page end to end (js/web/e2e.mjs): Debian's headless Chromium, driven by
# playwright-core from the npm registry (js/package-lock.json), against the page's own
# server: the server's model is listed, one token runs with the relaxed-SIMD kernel, and
# corrupt or truncated files show tern's error while the page keeps working. Uses the
# modules scripts/test-wasm.sh builds into js/dist. About 10 s after the one-time installs.
#
# Usage: scripts/test-browser.sh [--screenshot docs/wasm-browser.png]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! [ -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "test-browser: installing chromium" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "test-browser: no /usr/bin/chromium; on Debian, as root: apt-get install chromium" >&2
        exit 1
    fi
fi
for module in tern-simd128.wasm tern-relaxed-simd128.wasm; do
    [ -f "js/dist/$module" ] || { echo "test-browser: js/dist/$module is missing: run scripts/test-wasm.sh" >&2 && exit 1; }
done
[ -d js/node_modules/playwright-core ] || (cd js && npm ci --silent --no-audit --no-fund)

echo "test-browser: $(/usr/bin/chromium --version)"
# A hung browser must not hang CI.
timeout 300 node js/web/e2e.mjs "$@"
