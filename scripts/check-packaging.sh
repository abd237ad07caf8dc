#!/usr/bin/env bash
# Packaging checks, run by ctest (label `packaging`, c_tests/CMakeLists.txt) and usable by
# hand. Each subcommand exits non-zero with a message when its check fails.
#
#   shared-layout LIBDIR VERSION
#       LIBDIR has libtern.so.VERSION with soname libtern.so.ABI (ABI: MAJOR from 1.0 on,
#       0.MINOR before), the symlinks libtern.so.ABI -> libtern.so.VERSION and
#       libtern.so -> libtern.so.ABI, no debug info, and the library exports only tern_*
#       symbols.
#   needs-soname EXE SONAME
#       EXE records SONAME (not the unversioned libtern.so) as a needed library.
#   static-only CC SRCDIR LIBTERN_A SCRATCH NATIVE_LIB...
#       No global symbol is defined twice in the archive, and c_tests/consumer/static_only.c
#       links against LIBTERN_A plus rustc's native-static-libs (nothing else of tern's) and
#       runs.
#   kotlin-def CC DEF SRCDIR SCRATCH NATIVE_LIB...
#       Does what cinterop and the Kotlin/Native linker do with the generated DEF (a
#       tern.def with absolute paths): compiles its headers with exactly its compilerOpts,
#       from an unrelated directory, then links SRCDIR/c_tests/consumer/static_only.c with
#       its staticLibraries from its libraryPaths and its linkerOpts.linux, and runs it.
#       Also checks that linkerOpts.linux has every library rustc lists (NATIVE_LIB...).
#   modulemap CLANG MAP INCLUDEDIR LIBDIR SCRATCH
#       MAP builds as the clang module CTern: `@import CTern;` from Objective-C, and from
#       C a `#include <tern.h>` (found in INCLUDEDIR) that becomes a module import; the C
#       program links against LIBDIR/libtern.so and runs.
#   readme-sizes README SHARED STATIC
#       README's sizes ("`libtern.so` about X MB", "`libtern.a` about Y MB"; MB = 10^6
#       bytes) are within 20% of the built SHARED and STATIC libraries, so the figures a
#       reader sees stay true as the code grows (a rounded figure with a tolerance: exact
#       byte counts went stale with every change and differ between toolchains).
#   swift-package DIR
#       DIR (an installed share/tern/CTern) is a SwiftPM system-library package: its
#       Package.swift names the target CTern at path CTern, with pkg-config tern, and
#       CTern/module.modulemap names a header that exists. (No Swift toolchain here: the
#       module map itself is checked by `modulemap`.)
set -euo pipefail

fail() {
    echo "check-packaging: $*" >&2
    exit 1
}

# The value of KEY in tern.def (a Java properties file: `key = value`).
def_value() {
    sed -n "s/^$2[[:space:]]*=[[:space:]]*//p" "$1" | head -n 1
}

shared_layout() {
    local libdir=$1 version=$2
    local major=${version%%.*} rest=${version#*.}
    local abi=$major
    [ "$major" != 0 ] || abi=0.${rest%%.*}
    local file=libtern.so.$version soname=libtern.so.$abi
    [ -f "$libdir/$file" ] && [ ! -L "$libdir/$file" ] || fail "$libdir/$file is not a regular file"
    [ "$(readlink "$libdir/$soname")" = "$file" ] || fail "$libdir/$soname does not link to $file"
    [ "$(readlink "$libdir/libtern.so")" = "$soname" ] || fail "$libdir/libtern.so does not link to $soname"
    local actual
    actual=$(readelf -d "$libdir/$file" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
    [ "$actual" = "$soname" ] || fail "$file has soname '$actual', expected $soname"
    # Rust's std and the dependencies stay internal: a program linking libtern.so and another
    # Rust library gets no clashes through it.
    local foreign
    foreign=$(nm -D --defined-only "$libdir/$file" | awk '{print $NF}' | grep -v '^tern_' || true)
    [ -z "$foreign" ] || fail "$file exports non-tern symbols: $(echo "$foreign" | head -n 5 | tr '\n' ' ')"
    # Release artifacts ship without debug info (Cargo.toml's release profile).
    # Not `grep -q`, which stops reading at a match: under pipefail the writer's SIGPIPE
    # would then fail the pipeline (here: pass a library with debug info).
    ! readelf -S "$libdir/$file" | grep '\.debug_info' >/dev/null || fail "$file has debug info"
    echo "check-packaging: $libdir: $file (soname $soname), symlinks, no debug info, tern_* exports only"
}

needs_soname() {
    local exe=$1 soname=$2 needed
    needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(libtern[^]]*\)\].*/\1/p')
    [ "$needed" = "$soname" ] || fail "$exe needs '$needed', expected $soname"
    echo "check-packaging: $exe needs $soname"
}

static_only() {
    local cc=$1 srcdir=$2 archive=$3 scratch=$4
    shift 4
    # A strong global defined by two members would break the link as soon as both members
    # are pulled in.
    local dups
    dups=$(nm -A -g --defined-only "$archive" 2>/dev/null |
        awk 'NF >= 3 && $(NF-1) ~ /^[TDBRGS]$/ {print $NF}' | sort | uniq -d)
    [ -z "$dups" ] || fail "$archive defines more than once: $(echo "$dups" | head -n 5 | tr '\n' ' ')"
    mkdir -p "$scratch"
    "$cc" -std=c11 -I "$srcdir/include" "$srcdir/c_tests/consumer/static_only.c" "$archive" "$@" \
        -o "$scratch/static_only"
    "$scratch/static_only"
    echo "check-packaging: a program linking only $(basename "$archive") (+ $*) builds and runs"
}

kotlin_def() {
    local cc=$1 def=$2 srcdir=$3 scratch=$4
    shift 4
    [ "$(def_value "$def" package)" = tern ] || fail "tern.def: package is not tern"
    local headers filter compiler_opts static_libs linker_opts libdir
    libdir=$(def_value "$def" libraryPaths)
    case "$libdir" in /*) ;; *) fail "$def: libraryPaths '$libdir' is not an absolute path" ;; esac
    headers=$(def_value "$def" headers)
    filter=$(def_value "$def" headerFilter)
    compiler_opts=$(def_value "$def" compilerOpts)
    static_libs=$(def_value "$def" staticLibraries)
    linker_opts=$(def_value "$def" linkerOpts.linux)
    [ -n "$headers" ] && [ -n "$static_libs" ] || fail "tern.def lacks headers or staticLibraries"
    [ "$filter" = "$headers" ] || fail "tern.def: headerFilter '$filter' is not the headers '$headers'"
    local lib
    for lib in "$@"; do
        case " $linker_opts " in
        *" $lib "*) ;;
        *) fail "tern.def: linkerOpts.linux lacks $lib, which rustc lists for the static library" ;;
        esac
    done
    mkdir -p "$scratch"
    local h includes=""
    for h in $headers; do includes+="#include <$h>"$'\n'; done
    # Like cinterop: the headers alone, with only the .def's options, from a directory that
    # has nothing to do with tern (the paths must be the .def's own).
    # shellcheck disable=SC2086 # the .def's options are a word list
    (cd "$scratch" && printf '%s' "$includes" | "$cc" $compiler_opts -x c -fsyntax-only -) ||
        fail "the headers of $def do not compile with compilerOpts '$compiler_opts'"
    local archives=() a
    for a in $static_libs; do archives+=("$libdir/$a"); done
    # shellcheck disable=SC2086
    (cd "$scratch" && "$cc" $compiler_opts -c "$srcdir/c_tests/consumer/static_only.c" -o "$scratch/kotlin_def.o")
    # shellcheck disable=SC2086
    "$cc" "$scratch/kotlin_def.o" "${archives[@]}" $linker_opts -o "$scratch/kotlin_def"
    "$scratch/kotlin_def"
    echo "check-packaging: $def: headers compile with '$compiler_opts'; $libdir/$static_libs + '$linker_opts' link and run"
}

modulemap() {
    local clang=$1 map=$2 includedir=$3 libdir=$4 scratch=$5
    rm -rf "$scratch"
    mkdir -p "$scratch"
    local modules=(-fmodules -fmodules-cache-path="$scratch/cache" -fmodule-map-file="$map")
    cat >"$scratch/import.m" <<'EOF'
@import CTern;
int main(void) { return tern_version() >> 16 == TERN_VERSION_MAJOR ? 0 : 1; }
EOF
    "$clang" "${modules[@]}" -Werror -c "$scratch/import.m" -o "$scratch/import_m.o"
    cat >"$scratch/include.c" <<'EOF'
#include <tern.h>
#include <stdio.h>
int main(void) {
    printf("CTern module: tern %s\n", tern_version_string());
    return tern_version() >> 16 == TERN_VERSION_MAJOR ? 0 : 1;
}
EOF
    "$clang" "${modules[@]}" -I "$includedir" -Werror -c "$scratch/include.c" -o "$scratch/include.o"
    # The #include must have gone through the module, not textual inclusion.
    find "$scratch/cache" -name 'CTern-*.pcm' | grep . >/dev/null || fail "clang built no CTern module"
    "$clang" "$scratch/include.o" -L "$libdir" -ltern -Wl,-rpath,"$libdir" -o "$scratch/include"
    "$scratch/include"
    echo "check-packaging: $map: module CTern imports (@import and #include) and links"
}

swift_package() {
    local dir=$1
    local manifest="$dir/Package.swift" map="$dir/CTern/module.modulemap"
    [ -f "$manifest" ] || fail "$manifest is missing"
    grep -q '\.systemLibrary(name: "CTern", path: "CTern", pkgConfig: "tern")' "$manifest" ||
        fail "$manifest does not declare the system library CTern at CTern with pkg-config tern"
    [ -f "$map" ] || fail "$map is missing"
    local header
    header=$(sed -n 's/^[[:space:]]*header "\(.*\)"/\1/p' "$map")
    [ -f "$dir/CTern/$header" ] || fail "$map names header '$header', which is not in the installed tree"
    echo "check-packaging: $dir: Package.swift (CTern, pkg-config tern) and a module map naming $header"
}

readme_sizes() {
    local readme=$1 shared=$2 static=$3 name file stated actual
    for name in so a; do
        file=$shared
        [ "$name" = so ] || file=$static
        stated=$(sed -n "s/.*\`libtern\.$name\` about \([0-9.]*\) MB.*/\1/p" "$readme" | head -n 1)
        [ -n "$stated" ] || fail "$readme states no size for libtern.$name ('\`libtern.$name\` about X MB')"
        actual=$(stat -c %s "$file")
        awk -v s="$stated" -v a="$actual" 'BEGIN { r = a / (s * 1e6); exit !(r >= 0.8 && r <= 1.2) }' ||
            fail "$readme says libtern.$name is about $stated MB; $file is $actual bytes (more than 20% off): update the README"
        echo "check-packaging: $readme: libtern.$name about $stated MB, built $actual bytes"
    done
}

[ $# -ge 1 ] || fail "usage: $0 shared-layout|needs-soname|static-only|kotlin-def|modulemap|readme-sizes|swift-package ARGS..."
cmd=$1
shift
case "$cmd" in
shared-layout) shared_layout "$@" ;;
needs-soname) needs_soname "$@" ;;
static-only) static_only "$@" ;;
kotlin-def) kotlin_def "$@" ;;
modulemap) modulemap "$@" ;;
readme-sizes) readme_sizes "$@" ;;
swift-package) swift_package "$@" ;;
*) fail "unknown check '$cmd'" ;;
esac
