# Fuzzing (cargo fuzz, libFuzzer, nightly): every target in fuzz/ (the codec decoders on
# arbitrary bytes; ffi_calls, sequences of C ABI calls through memq-ffi's exports checked
# against a model, every handle freed and leak-checked after each input) for FUZZ_SECONDS
# (20) each, with debug assertions, starting from the committed corpus in
# fuzz/corpus/<target>. New inputs go under the target directory, so
# the committed corpus changes only when someone copies a find in; a crash is written to
# fuzz/artifacts/<target>/, and so is an input that takes over 10 s.
fuzz_tool() { # NAME VERSION: installs a pinned cargo subcommand if missing.
    cargo install --list | grep -q "^$1 v$2:" || run cargo install --locked "$1" --version "=$2"
}
(cd fuzz && run cargo fmt -- --check)
# The committed fuzz/Cargo.lock must be current: no version is picked at run time.
run cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null
if ! has_nightly; then
    skip "fuzz" "no nightly toolchain, and rustup could not install one"
else
    fuzz_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")/fuzz"
    if ensure_component clippy nightly; then
        run cargo +nightly clippy --locked --manifest-path fuzz/Cargo.toml \
            --target-dir "$fuzz_dir/clippy" -- -D warnings
    else
        skip "clippy of the fuzz crate" "the clippy component is not available for this nightly"
    fi
    if ! fuzz_tool cargo-fuzz 0.13.2; then
        skip "fuzzing" "could not install cargo-fuzz 0.13.2"
    else
        run cargo +nightly fuzz build --debug-assertions --fuzz-dir fuzz --target-dir "$fuzz_dir"
        # An assignment of its own, so that a failing `fuzz list` fails the stage.
        fuzz_targets=$(cargo +nightly fuzz list --fuzz-dir fuzz)
        if [ -z "$fuzz_targets" ]; then
            echo "cargo fuzz list found no fuzz targets in fuzz/" >&2
            exit 1
        fi
        for t in $fuzz_targets; do
            mkdir -p "$fuzz_dir/corpus/$t"
            # libFuzzer reports every new input on stderr: keep that in a log, show the
            # totals.
            if ! run cargo +nightly fuzz run --debug-assertions --fuzz-dir fuzz \
                --target-dir "$fuzz_dir" "$t" "$fuzz_dir/corpus/$t" "fuzz/corpus/$t" -- \
                -max_total_time="${FUZZ_SECONDS:-20}" -timeout=10 -print_final_stats=1 \
                2>"$fuzz_dir/$t.log"; then
                tail -n 80 "$fuzz_dir/$t.log" >&2
                echo "fuzz target $t failed: the input is in fuzz/artifacts/$t/" >&2
                exit 1
            fi
            if ! grep -E '^Done [0-9]+ runs|DONE +cov' "$fuzz_dir/$t.log"; then
                tail -n 40 "$fuzz_dir/$t.log" >&2
                echo "fuzz target $t: libFuzzer reported no runs" >&2
                exit 1
            fi
        done
    fi
fi
