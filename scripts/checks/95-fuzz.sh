# Fuzzing (cargo fuzz, libFuzzer, nightly): every target in fuzz/ (the codec decoders on
# arbitrary bytes; ffi_calls, sequences of C ABI calls through memq-ffi's exports checked
# against a model, every handle freed and leak-checked after each input) for FUZZ_SECONDS
# (30) each, with debug assertions, starting from the committed corpus in
# fuzz/corpus/<target>. New inputs go under the target directory, so
# the committed corpus changes only when someone copies a find in; a crash is written to
# fuzz/artifacts/<target>/, and so is an input that takes over 10 s.
fuzz_tool() { # NAME VERSION: installs a pinned cargo subcommand if missing.
    cargo install --list | grep -q "^$1 v$2:" || run cargo install --locked "$1" --version "=$2"
}
(cd fuzz && run cargo fmt -- --check)
if ! has_nightly; then
    skip "fuzz" "no nightly toolchain, and rustup could not install one"
elif ! fuzz_tool cargo-fuzz 0.13.2; then
    skip "fuzz" "could not install cargo-fuzz 0.13.2"
else
    fuzz_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")/fuzz"
    run cargo +nightly clippy --manifest-path fuzz/Cargo.toml --target-dir "$fuzz_dir/clippy" \
        -- -D warnings
    run cargo +nightly fuzz build --debug-assertions --fuzz-dir fuzz --target-dir "$fuzz_dir"
    for t in $(cargo +nightly fuzz list --fuzz-dir fuzz); do
        mkdir -p "$fuzz_dir/corpus/$t"
        # libFuzzer reports every new input on stderr: keep that in a log, show the totals.
        if ! run cargo +nightly fuzz run --debug-assertions --fuzz-dir fuzz \
            --target-dir "$fuzz_dir" "$t" "$fuzz_dir/corpus/$t" "fuzz/corpus/$t" -- \
            -max_total_time="${FUZZ_SECONDS:-30}" -timeout=10 -print_final_stats=1 2>"$fuzz_dir/$t.log"; then
            tail -n 80 "$fuzz_dir/$t.log" >&2
            echo "fuzz target $t failed: the input is in fuzz/artifacts/$t/" >&2
            exit 1
        fi
        grep -E '^Done [0-9]+ runs|DONE +cov' "$fuzz_dir/$t.log" || true
    done
fi
