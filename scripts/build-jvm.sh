#!/usr/bin/env bash
# Builds OUTDIR/tern.jar: the Kotlin/JVM library of jvm/src (package tern) and its native
# libraries under native/<os>-<arch>/ (libtern.so and the JNI bridge libtern_jni.so), for
# this machine's platform and, through the aarch64 cross toolchain (scripts/setup-aarch64.sh),
# linux-aarch64. The Kotlin standard library is not inside: callers put kotlin-stdlib.jar
# on the class path themselves.
#
# Usage: scripts/build-jvm.sh OUTDIR
# Env: TERN_JVM_AARCH64=0 leaves out linux-aarch64 (built by default; it needs the cross
# toolchain, which is installed as root on Debian). TERN_JVM_CARGO_TARGET_DIR (default target)
# and TERN_AARCH64_TARGET_DIR (default target/aarch64): cargo's target directories, e.g. a
# CMake build's, whose release libtern cargo then finds up to date.
set -euo pipefail
out="${1:?usage: scripts/build-jvm.sh OUTDIR}"
cd "$(dirname "$0")/.."
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# shellcheck source=scripts/setup-jvm.sh
. scripts/setup-jvm.sh

stage="$out/jar-stage"
rm -rf "$stage"
mkdir -p "$stage"

# The JNI bridge: a C library against tern.h, linked to the libtern beside it (found by soname
# once the loader has loaded libtern, see NativeLibrary in jvm/src/tern/Bridge.kt).
jni_lib() { # CC LIBTERN_DIR DEST_DIR
    "$1" -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -I include \
        -I "$JDK17_HOME/include" -I "$JDK17_HOME/include/linux" \
        jvm/native/tern_jni.c -L "$2" -ltern -o "$3/libtern_jni.so"
}

host="linux-$(uname -m)"
echo "build-jvm: natives for $host" >&2
lib="${TERN_JVM_CARGO_TARGET_DIR:-target}/release"
CARGO_TARGET_DIR="${TERN_JVM_CARGO_TARGET_DIR:-target}" cargo build --release --lib --quiet
mkdir -p "$stage/native/$host"
cp "$lib/libtern.so" "$stage/native/$host/"
jni_lib cc "$lib" "$stage/native/$host"

if [ "${TERN_JVM_AARCH64:-1}" != 0 ] && [ "$host" != linux-aarch64 ]; then
    echo "build-jvm: natives for linux-aarch64 (cross toolchain)" >&2
    (
        # shellcheck source=scripts/setup-aarch64.sh
        . scripts/setup-aarch64.sh
        cargo build --release --lib --quiet --target "$TRIPLE"
        mkdir -p "$stage/native/linux-aarch64"
        cp "$CARGO_TARGET_DIR/$TRIPLE/release/libtern.so" "$stage/native/linux-aarch64/"
        jni_lib aarch64-linux-gnu-gcc "$CARGO_TARGET_DIR/$TRIPLE/release" "$stage/native/linux-aarch64"
    )
fi

echo "build-jvm: classes (kotlinc $("$KOTLINC" -version 2>&1 | grep -o '[0-9][0-9.]*' | head -n1))" >&2
# Compiled against JDK 25's class library (the FFM bridge needs it) for a JDK 17 target: the
# FFM classes are loaded only on JDK 22+ (see the bridge selection in Bridge.kt).
"$KOTLINC" -jdk-home "$JDK25_HOME" -jvm-target 17 -nowarn jvm/src/tern/*.kt -d "$stage"
rm -f "$out/tern.jar"
"$JAR" --create --file "$out/tern.jar" -C "$stage" .
rm -rf "$stage"
echo "build-jvm: wrote $out/tern.jar ($(du -k "$out/tern.jar" | cut -f1) KiB)" >&2
