# Sourced by scripts/test.sh (and .ci/run): makes sure the system tools the test suites
# need are installed. As root on Debian it installs what is missing with apt-get;
# elsewhere it prints the command and fails. The aarch64 cross toolchain is handled by
# scripts/setup-aarch64.sh, cargo-fuzz by scripts/fuzz-smoke.sh.

TERN_APT_PACKAGES="cmake make gcc g++ libc6-dev clang valgrind pkg-config"

tern_missing_tools() {
    local tool missing=()
    for tool in cmake make cc c++ clang valgrind pkg-config; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    echo "${missing[*]}"
}

if [ -n "$(tern_missing_tools)" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing $TERN_APT_PACKAGES (missing: $(tern_missing_tools))" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086 # the package list is split on purpose
        apt-get install -y -qq --no-install-recommends $TERN_APT_PACKAGES >/dev/null
    else
        echo "setup: missing $(tern_missing_tools); on Debian, as root, run:" >&2
        echo "  apt-get update && apt-get install -y $TERN_APT_PACKAGES" >&2
        exit 1
    fi
fi

if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
