#!/usr/bin/env bash
# The browser page end to end (js/web/e2e.mjs) from the packed package: `npm pack` installed
# into a fresh project outside the repository (scripts/wasm/js-project.sh), with
# playwright-core (the version js/package-lock.json pins) beside it, driving Debian's
# headless Chromium against the page's own server. A model from the tests' GGUF writer is
# listed with its metadata; one token and a batch run through each ternary weight with the
# relaxed-SIMD kernel and agree with the reference kernel; corrupt or truncated files
# picked with the file picker show tern's error while the page keeps working. Builds
# js/dist if needed (npm pack does). About 15 s after the one-time installs.
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
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        # The project is elsewhere: the screenshot path is taken from here.
        --screenshot) args+=(--screenshot "$(realpath -m "$2")") && shift 2 ;;
        *) echo "usage: $0 [--screenshot FILE.png]" >&2 && exit 2 ;;
    esac
done
playwright="$(node -p "require('./js/package-lock.json').packages['node_modules/playwright-core'].version")"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
scripts/wasm/js-project.sh "$fresh" "playwright-core@$playwright"

echo "test-browser: $(/usr/bin/chromium --version), playwright-core $playwright"
# A hung browser must not hang CI.
(cd "$fresh/project" && timeout 300 node node_modules/tern-wasm/web/e2e.mjs "${args[@]}")
