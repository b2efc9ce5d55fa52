# The C ABI (memq-ffi): include/memq.h is exactly what the pinned cbindgen makes of
# ffi/src; the C examples (pub/sub and groups; explicit acks and dead letters; a durable
# topic across a restart) and the C++
# one build without a warning against it and libmemq, check every message they receive,
# and do so again under valgrind (or AddressSanitizer) with no error and no leak. (Python
# has a binding of its own, of the memq crate rather than the C ABI: python/, checked by
# stage 65-python.)

# The one cbindgen version that generates include/memq.h. To move to another: change it
# here, regenerate the header with it (see ffi/cbindgen.toml) and commit both.
MEMQ_CBINDGEN_VERSION=0.29.4

ffi_lib=$(target_dir)
# libmemq.{so,a}: the test stage built them; this is a no-op then, and makes the stage
# work on its own (`scripts/check ffi`). Stage 30's packages and features (MEMQ_PACKAGES;
# `--examples` too, for the dev-dependencies' features): `-p memq-ffi` alone would build
# memq-core again with fewer features. The C ABI is the same either way (memq-ffi
# depends on memq-core and memq-store, whose extra features add serde codecs). memq-py's
# library is left out (stage 65 builds it with maturin; it changes no other crate's
# features, which is what keeps this build a no-op after stage 30).
run cargo build "${MEMQ_PACKAGES[@]}" --exclude memq-py --lib --examples --profile "$MEMQ_PROFILE"

# memq-ffi is left out of `cargo doc --workspace` (its lib shares the name `memq` with the
# memq crate: see ffi/Cargo.toml), so its docs are checked here, out of target/doc's way.
RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/ffi-doc" \
    run cargo rustdoc -p memq-ffi --lib --profile "$MEMQ_PROFILE"

# ---- the header is fresh -----------------------------------------------------------------
ffi_cbindgen="$HOME/.cargo/bin/cbindgen"
if ! "$ffi_cbindgen" --version 2>/dev/null | grep -qx "cbindgen $MEMQ_CBINDGEN_VERSION"; then
    run cargo install cbindgen --version "=$MEMQ_CBINDGEN_VERSION" --locked --root "$HOME/.cargo"
fi
ffi_fresh=$(mktemp --suffix=.h)
run "$ffi_cbindgen" --quiet --config ffi/cbindgen.toml --crate memq-ffi --output "$ffi_fresh" ffi
if ! diff -u include/memq.h "$ffi_fresh"; then
    rm -f "$ffi_fresh"
    echo "include/memq.h differs from what cbindgen $MEMQ_CBINDGEN_VERSION generates; run" >&2
    echo "  $ffi_cbindgen --config ffi/cbindgen.toml --crate memq-ffi --output include/memq.h ffi" >&2
    exit 1
fi
rm -f "$ffi_fresh"
note "include/memq.h matches cbindgen $MEMQ_CBINDGEN_VERSION"

# ---- the C and C++ examples ----------------------------------------------------------------
# The C examples need gcc, the C++ one g++; either missing skips only its own examples.
ffi_has_c=0 ffi_has_cpp=0
if ensure_apt gcc gcc; then
    ffi_has_c=1
else
    skip "C examples of the C ABI" "gcc missing and apt-get cannot install it"
fi
if ensure_apt g++ g++; then
    ffi_has_cpp=1
else
    skip "C++ example of the C ABI" "g++ missing and apt-get cannot install it"
fi
ffi_lib_abs=$(cd "$ffi_lib" && pwd)
# The C example links the static library, with the system libraries Rust's std needs
# (`--print native-static-libs` of the staticlib on Linux); the C++ one links the shared
# library, found through an rpath. Its SONAME is libmemq.so.0 (ffi/build.rs), the name a
# program linked with it loads: an install (scripts/install-c.sh, below) provides it,
# and for this build from target/ a link beside the program does.
ffi_native=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
ffi_c=(gcc -std=c11 -g -Wall -Wextra -Werror -Iinclude)
ffi_c_libs=("$ffi_lib/libmemq.a" "${ffi_native[@]}")
mkdir -p examples/c/build examples/cpp/build/lib
ln -sf "$ffi_lib_abs/libmemq.so" examples/cpp/build/lib/libmemq.so.0
ffi_cpp=(g++ -std=c++17 -g -Wall -Wextra -Werror -Iinclude examples/cpp/demo.cpp
    -L"$ffi_lib_abs" -lmemq -Wl,-rpath,"$(cd examples/cpp/build/lib && pwd)" -pthread)
# Each run is bounded: a lost wake-up shows as a failed stage, not a hung CI.
if [ $ffi_has_c = 1 ]; then
    for ffi_example in pubsub acks durable; do
        run "${ffi_c[@]}" -O2 "examples/c/$ffi_example.c" "${ffi_c_libs[@]}" \
            -o "examples/c/build/$ffi_example"
        bounded 120 "examples/c/build/$ffi_example"
    done
fi
if [ $ffi_has_cpp = 1 ]; then
    run "${ffi_cpp[@]}" -O2 -o examples/cpp/build/demo
    bounded 120 examples/cpp/build/demo
fi

# ---- installed, as C users get it ------------------------------------------------------------
# scripts/install-c.sh into a fresh prefix (a release-c build of its own: no debug info),
# then the C examples built against the installed files only, as a user would: with
# pkg-config (shared, run through the rpath it was linked with, and without one through
# LD_LIBRARY_PATH, as the README says for a prefix the dynamic linker does not search;
# and fully static with `--static`), and with CMake's find_package(memq) (memq::memq
# and memq::memq_static). The SONAME must be libmemq.so.MAJOR, and what links memq
# shared must record that name.
if [ $ffi_has_c = 1 ]; then
    ffi_prefix=$(mktemp -d)
    ffi_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
    run scripts/install-c.sh --prefix "$ffi_prefix"
    ffi_pdir="$ffi_prefix/lib"
    ffi_soname=$(readelf -d "$ffi_pdir/libmemq.so.$ffi_version" | grep SONAME)
    echo "$ffi_soname"
    if ! grep -q "\[libmemq\.so\.${ffi_version%%.*}\]" <<<"$ffi_soname"; then
        echo "libmemq.so.$ffi_version has no SONAME libmemq.so.${ffi_version%%.*}" >&2
        exit 1
    fi
    note "installed: libmemq.so $(du -k "$ffi_pdir/libmemq.so.$ffi_version" | cut -f1) KiB," \
        "libmemq.a $(du -k "$ffi_pdir/libmemq.a" | cut -f1) KiB"
    # ffi_needs_memq BINARY yes|no: whether BINARY must load libmemq.so.MAJOR.
    ffi_needs_memq() {
        local needed
        needed=$(readelf -d "$1" | grep NEEDED || true)
        if grep -q "libmemq\.so\.${ffi_version%%.*}\]" <<<"$needed"; then
            [ "$2" = yes ] || { echo "$1 needs libmemq.so but should not:" >&2; echo "$needed" >&2; exit 1; }
        else
            [ "$2" = no ] || { echo "$1 does not need libmemq.so.${ffi_version%%.*}:" >&2; echo "$needed" >&2; exit 1; }
        fi
    }
    ffi_ibuild=$(mktemp -d)
    if ensure_apt pkg-config pkg-config; then
        export PKG_CONFIG_PATH="$ffi_pdir/pkgconfig"
        ffi_pc_cflags=$(pkg-config --cflags memq)
        ffi_pc_libs=$(pkg-config --libs memq)
        ffi_pc_static=$(pkg-config --static --libs memq)
        # Shared, found through an rpath.
        # shellcheck disable=SC2086 # pkg-config's output is a list of words
        run gcc -std=c11 -O2 -Wall -Wextra -Werror $ffi_pc_cflags examples/c/pubsub.c \
            -Wl,-rpath,"$ffi_pdir" $ffi_pc_libs -o "$ffi_ibuild/pubsub-shared"
        ffi_needs_memq "$ffi_ibuild/pubsub-shared" yes
        bounded 120 "$ffi_ibuild/pubsub-shared" 20000
        # Shared without an rpath: LD_LIBRARY_PATH finds it.
        # shellcheck disable=SC2086
        run gcc -std=c11 -O2 -Wall -Wextra -Werror $ffi_pc_cflags examples/c/acks.c \
            $ffi_pc_libs -o "$ffi_ibuild/acks-shared"
        LD_LIBRARY_PATH="$ffi_pdir" bounded 120 "$ffi_ibuild/acks-shared" 2000
        # Fully static: Libs.private names what libmemq.a needs.
        # shellcheck disable=SC2086
        run gcc -static -std=c11 -O2 -Wall -Wextra -Werror $ffi_pc_cflags examples/c/pubsub.c \
            $ffi_pc_static -o "$ffi_ibuild/pubsub-static"
        ffi_needs_memq "$ffi_ibuild/pubsub-static" no
        bounded 120 "$ffi_ibuild/pubsub-static" 20000
        unset PKG_CONFIG_PATH
    else
        skip "pkg-config builds against the installed libmemq" \
            "pkg-config missing and apt-get cannot install it"
    fi
    if ensure_apt cmake cmake; then
        run cmake -S examples/c/cmake -B "$ffi_ibuild/cmake" -DCMAKE_PREFIX_PATH="$ffi_prefix" \
            -DCMAKE_BUILD_TYPE=Release >/dev/null
        run cmake --build "$ffi_ibuild/cmake"
        ffi_needs_memq "$ffi_ibuild/cmake/pubsub" yes
        ffi_needs_memq "$ffi_ibuild/cmake/acks" no
        bounded 120 "$ffi_ibuild/cmake/pubsub" 20000
        bounded 120 "$ffi_ibuild/cmake/acks" 2000
    else
        skip "CMake find_package(memq) builds against the installed libmemq" \
            "cmake missing and apt-get cannot install it"
    fi
    rm -rf "$ffi_prefix" "$ffi_ibuild"
fi

# Under a memory checker, with fewer messages (valgrind runs code ~50x slower).
ffi_checked=20000
ffi_durable_checked=1000
if [ $ffi_has_c = 0 ] && [ $ffi_has_cpp = 0 ]; then
    : # nothing built, nothing to check (both skips are listed already)
elif ensure_apt valgrind valgrind; then
    ffi_vg=(valgrind --leak-check=full --error-exitcode=1
        --errors-for-leak-kinds=definite,indirect,possible
        --suppressions=examples/valgrind.supp)
    if [ $ffi_has_c = 1 ]; then
        bounded 600 "${ffi_vg[@]}" examples/c/build/pubsub "$ffi_checked"
        bounded 600 "${ffi_vg[@]}" examples/c/build/acks "$ffi_checked"
        bounded 600 "${ffi_vg[@]}" examples/c/build/durable "$ffi_durable_checked"
    fi
    if [ $ffi_has_cpp = 1 ]; then
        bounded 600 "${ffi_vg[@]}" examples/cpp/build/demo
    fi
elif echo 'int main(void){return 0;}' |
    "$([ $ffi_has_c = 1 ] && echo gcc || echo g++)" -fsanitize=address -x c - -o /dev/null \
        2>/dev/null; then
    skip "valgrind runs of the C and C++ examples" \
        "valgrind cannot be installed: AddressSanitizer (with LeakSanitizer) runs them instead"
    ffi_asan=(-O1 -fsanitize=address -fno-omit-frame-pointer)
    if [ $ffi_has_c = 1 ]; then
        for ffi_example in pubsub acks durable; do
            run "${ffi_c[@]}" "${ffi_asan[@]}" "examples/c/$ffi_example.c" "${ffi_c_libs[@]}" \
                -o "examples/c/build/$ffi_example-asan"
            ffi_n=$ffi_checked
            [ "$ffi_example" = durable ] && ffi_n=$ffi_durable_checked
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
                bounded 600 "examples/c/build/$ffi_example-asan" "$ffi_n"
        done
    fi
    if [ $ffi_has_cpp = 1 ]; then
        run "${ffi_cpp[@]}" "${ffi_asan[@]}" -o examples/cpp/build/demo-asan
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 bounded 600 examples/cpp/build/demo-asan
    fi
else
    skip "C and C++ examples under a memory checker" \
        "neither valgrind nor AddressSanitizer is available"
fi
