# ThreadSanitizer, and AddressSanitizer with LeakSanitizer, over the stress tests (threads
# publishing and receiving, every message counted). std is rebuilt with the sanitizer
# (-Zbuild-std) so that its locks and atomics are instrumented as well; each sanitizer has
# its own target directory. MEMQ_STRESS_SCALE scales the tests' message counts (default 1:
# they take seconds even instrumented). The run is bounded in time: a lost wake-up hangs.
san_host=x86_64-unknown-linux-gnu
if [ "$(rustc -vV | sed -n 's/^host: //p')" != "$san_host" ]; then
    skip "sanitizers" "only set up for $san_host hosts"
elif ! has_nightly; then
    skip "sanitizers" "no nightly toolchain, and rustup could not install one"
elif ! ensure_component rust-src nightly; then
    skip "sanitizers" "the rust-src component (for -Zbuild-std) is not available for nightly"
else
    for san in thread address; do
        san_args=(-Zbuild-std --target "$san_host" -p memq-core --profile "$MEMQ_PROFILE"
            --target-dir "${CARGO_TARGET_DIR:-target}/san-$san" --test stress)
        RUSTFLAGS="-Zsanitizer=$san" RUSTDOCFLAGS="-Zsanitizer=$san" \
            run cargo +nightly test "${san_args[@]}" --no-run
        RUSTFLAGS="-Zsanitizer=$san" RUSTDOCFLAGS="-Zsanitizer=$san" \
            TSAN_OPTIONS="halt_on_error=1" ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" \
            MEMQ_STRESS_SCALE="${MEMQ_STRESS_SCALE:-1}" \
            bounded 600 cargo +nightly test "${san_args[@]}"
    done
fi
