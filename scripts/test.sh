#!/usr/bin/env bash
# The project's test command: the Rust tests, then the C harness (CMake builds libtern with
# cargo, ctest runs the C/C++ test programs, under valgrind too when it is installed).
# Extra CMake configure options can be passed in TERN_CMAKE_ARGS, e.g.
#   TERN_CMAKE_ARGS="-DTERN_FIXTURE_DIR=/path/to/fixtures" scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test
# The panic guard, with the test-only fault injection of the `panic-probe` feature.
cargo test --features panic-probe --test panic_probe

# shellcheck disable=SC2086 # TERN_CMAKE_ARGS is a list of options
cmake -S . -B build/ctest ${TERN_CMAKE_ARGS:-}
cmake --build build/ctest --parallel
ctest --test-dir build/ctest --output-on-failure
