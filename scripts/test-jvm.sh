#!/usr/bin/env bash
# The JVM leg of scripts/test.sh: builds target/jvm/tern.jar (scripts/build-jvm.sh), compiles
# the Kotlin test program, the overhead bench and the docs' example against it once, and runs
#   - jvm/test/TernTest.kt on JDK 25 through FFM and on JDK 17 through JNI (with -Xcheck:jni):
#     results bit-identical to jvm/test/reference.c's, computed through tern.h; error paths;
#     events; RSS over 10,000 closed and 10,000 dropped handles;
#   - the docs' examples, checked to be docs/consuming.md's text: jvm/example/Qkv.kt on both
#     bridges (once with -Dtern.library.path), JavaCaller.java (javac 17); and the loader's
#     error for a platform the jar lacks;
#   - the calling overhead: matmul 2560 x 2560 TQ2_0 at m = 1 from C, FFM and JNI,
#     interleaved (reported, not enforced: a shared CI machine is too noisy for a 5 % gate).
# The toolchain comes from registries (scripts/setup-jvm.sh). Env: TERN_JVM_OUT (default
# target/jvm), TERN_JVM_AARCH64=0 (jar without linux-aarch64).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${TERN_JVM_OUT:-target/jvm}"
# After the earlier legs of scripts/test.sh, release libterns for both platforms are built
# (same cargo command): build-jvm.sh reuses them instead of building them again. The host's is
# in the C harness's CMake build; the aarch64 one where scripts/test-aarch64.sh built it, in
# setup-aarch64.sh's target directory, which build-jvm.sh uses too.
[ -d build/cargo ] && export TERN_JVM_CARGO_TARGET_DIR="${TERN_JVM_CARGO_TARGET_DIR:-build/cargo}"
lib="${TERN_JVM_CARGO_TARGET_DIR:-target}/release"
bash scripts/build-jvm.sh "$out"
# shellcheck source=scripts/setup-jvm.sh
. scripts/setup-jvm.sh
out="$(cd "$out" && pwd)"
jar="$out/tern.jar"

# The C programs find libtern by its soname, as an installed program would.
mkdir -p "$out/lib"
soname="$(objdump -p "$lib/libtern.so" | awk '/SONAME/ { print $2 }')"
ln -sf "$(cd "$lib" && pwd)/libtern.so" "$out/lib/$soname"
cc -std=c11 -O2 -Wall -Wextra -Werror -I include jvm/test/reference.c -L "$lib" -ltern \
    -Wl,-rpath,"$out/lib" -o "$out/reference"
ggufs=(tests/fixtures/gguf/tiny_bitnet.gguf tests/fixtures/gguf/all_types.gguf tests/fixtures/gguf/tiny_attention.gguf)
"$out/reference" reference "$out/reference.bin" "${ggufs[@]}"

# The examples in docs/consuming.md are the files compiled here, to the byte.
for example in jvm/example/Qkv.kt jvm/example/JavaCaller.java; do
    awk -v marker="<!-- $example -->" '$0 == marker { on = 1; getline; next } on && /^```$/ { exit } on' \
        docs/consuming.md | cmp -s - "$example" ||
        { echo "test-jvm: docs/consuming.md's copy of $example differs from the file" >&2; exit 1; }
done

echo "test-jvm: compiling the test program, the bench and the examples" >&2
rm -rf "$out/test-classes"
"$KOTLINC" -jdk-home "$JDK25_HOME" -jvm-target 17 -nowarn -cp "$jar:$KOTLIN_LIB/kotlin-test.jar" \
    jvm/test/TernTest.kt jvm/test/SegmentTest.kt jvm/test/Bench.kt jvm/example/Qkv.kt -d "$out/test-classes"
"$JDK17_HOME/bin/javac" -d "$out/test-classes" -cp "$jar:$KOTLIN_LIB/kotlin-stdlib.jar" jvm/example/JavaCaller.java
cp="$out/test-classes:$jar:$KOTLIN_LIB/kotlin-stdlib.jar:$KOTLIN_LIB/kotlin-test.jar"
ffm=("$JAVA25" --enable-native-access=ALL-UNNAMED -cp "$cp")
jni=("$JAVA17" -Xcheck:jni -cp "$cp")

# Runs TernTest against REFERENCE expecting BRIDGE, with the java command that follows;
# LABEL names its log. A small heap, so that RSS measures native memory rather than a
# growing JVM heap; -Xcheck:jni reports misuse as warnings without failing the run.
tern_test() {
    local reference="$1" bridge="$2" label="$3" log="$out/test-$3.log"
    shift 3
    echo "test-jvm: TernTest through $bridge ($label)" >&2
    if ! "$@" -Xmx64m -Dtern.test.gguf=tests/fixtures/gguf/tiny_bitnet.gguf \
        TernTestKt "$reference" tests/fixtures/gguf "$bridge" >"$log" 2>&1; then
        cat "$log" >&2
        echo "test-jvm: TernTest failed ($label)" >&2
        exit 1
    fi
    if grep -i 'warning.*jni\|FATAL' "$log"; then echo "test-jvm: JNI warnings ($label)" >&2; exit 1; fi
    grep -E '^(tern |compared|memory:)' "$log"
    tail -n 1 "$log"
}
tern_test "$out/reference.bin" ffm jdk25-ffm "${ffm[@]}"
tern_test "$out/reference.bin" jni jdk17-jni "${jni[@]}"

if [ "${TERN_JVM_AARCH64:-1}" != 0 ]; then
    # The jar's linux-aarch64 natives through JNI on Debian's arm64 JDK 17 under qemu-user
    # (QEMU_CPU=max: the dotprod and i8mm kernels), against the C reference built for aarch64.
    # The JDK is unpacked from its package into the tool cache, not installed: an arm64
    # openjdk-17 would have to be the same version as the machine's amd64 one.
    (
        # shellcheck source=scripts/setup-aarch64.sh
        . scripts/setup-aarch64.sh
        jdk="$TERN_JVM_TOOLS/openjdk-17-arm64/usr/lib/jvm/java-17-openjdk-arm64"
        if ! [ -x "$jdk/bin/java" ]; then
            echo "test-jvm: unpacking openjdk-17-jre-headless:arm64 (apt) into $TERN_JVM_TOOLS" >&2
            deb="$(mktemp -d)"
            (cd "$deb" && apt-get download -qq openjdk-17-jre-headless:arm64 2>/dev/null)
            dpkg -x "$deb"/openjdk-17-jre-headless_*_arm64.deb "$TERN_JVM_TOOLS/openjdk-17-arm64"
            rm -rf "$deb"
        fi
        a64_lib="$CARGO_TARGET_DIR/$TRIPLE/release"
        mkdir -p "$out/lib-aarch64"
        ln -sf "$(cd "$a64_lib" && pwd)/libtern.so" "$out/lib-aarch64/$soname"
        aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -I include jvm/test/reference.c -L "$a64_lib" -ltern \
            -Wl,-rpath,"$out/lib-aarch64" -o "$out/reference-aarch64"
        export QEMU_CPU=max
        qemu-aarch64 -L / "$out/reference-aarch64" reference "$out/reference-aarch64.bin" "${ggufs[@]}"
        # 400 memory cycles (the x86 runs do 10,000; emulated, each takes ~70 ms) and 16 MiB of
        # slack for qemu's translation cache, which grew 5-8 MiB over 200-1,000 cycles: a cycle
        # leaked whole (~60 KB) would add 24 MiB.
        tern_test "$out/reference-aarch64.bin" jni aarch64-jni qemu-aarch64 -L / "$jdk/bin/java" -Xcheck:jni \
            -Dtern.test.cycles=400 -Dtern.test.rss-slack-mib=16 -cp "$cp"
    )
fi

fixture=tests/fixtures/gguf/tiny_attention.gguf
echo "test-jvm: the docs' examples (-Dtern.library.path with FFM and with JNI; Java with the jar's natives)" >&2
"$JAVA25" --enable-native-access=ALL-UNNAMED -Dtern.library.path="$lib" -cp "$cp" QkvKt "$fixture"
rm -rf "$out/natives" && mkdir -p "$out/natives"
(cd "$out/natives" && "$JAR" xf "$jar" native)
"${jni[@]}" -Dtern.library.path="${out#"$PWD/"}/natives/native/linux-$(uname -m)" QkvKt "$fixture"
java_out="$("${jni[@]}" JavaCaller)"
echo "$java_out"
grep -q 'refused as expected: true TERN_ERR_LENGTH_MISMATCH' <<<"$java_out" ||
    { echo "test-jvm: the Java example did not see its TernException" >&2; exit 1; }
# tern.bridge: JNI forced on JDK 25; FFM refused on JDK 17, by name.
"$JAVA25" --enable-native-access=ALL-UNNAMED -Dtern.bridge=jni -cp "$cp" QkvKt "$fixture" | grep '(jni bridge)' >/dev/null ||
    { echo "test-jvm: -Dtern.bridge=jni did not choose JNI on JDK 25" >&2; exit 1; }
if msg="$("$JAVA17" -Dtern.bridge=ffm -cp "$cp" QkvKt "$fixture" 2>&1)" ||
    ! grep -q 'tern.bridge=ffm needs JDK 22 or later; this is JDK 17' <<<"$msg"; then
    echo "$msg" >&2
    echo "test-jvm: -Dtern.bridge=ffm on JDK 17 was not refused by name" >&2
    exit 1
fi
if msg="$("$JAVA25" -Dos.arch=riscv64 -cp "$cp" QkvKt "$fixture" 2>&1)"; then
    echo "test-jvm: the loader accepted a platform the jar lacks" >&2
    exit 1
fi
grep -q 'no native library for platform linux-riscv64' <<<"$msg" ||
    { echo "$msg" >&2; echo "test-jvm: the loader's error does not name the platform" >&2; exit 1; }

echo "test-jvm: calling overhead, matmul 2560 x 2560 TQ2_0, m = 1, median ns per call ($(lscpu | sed -n 's/^Model name: *//p'))" >&2
rounds=5 calls=1000
best() { sort -n | head -n 1; }
c_ns=() ffm_ns=() jni_ns=()
for _ in 1 2 3 4; do
    c_ns+=("$("$out/reference" bench "$rounds" "$calls" | best)")
    ffm_ns+=("$("${ffm[@]}" BenchKt "$rounds" "$calls" | best)")
    jni_ns+=("$("${jni[@]}" BenchKt "$rounds" "$calls" | best)")
done
c=$(printf '%s\n' "${c_ns[@]}" | best)
f=$(printf '%s\n' "${ffm_ns[@]}" | best)
j=$(printf '%s\n' "${jni_ns[@]}" | best)
awk -v c="$c" -v f="$f" -v j="$j" 'BEGIN {
    printf "overhead: C %d ns, FFM %d ns (%+.1f %%, target 5 %%), JNI %d ns (%+.1f %%, target 10 %%)\n",
        c, f, 100 * (f - c) / c, j, 100 * (j - c) / c }'
