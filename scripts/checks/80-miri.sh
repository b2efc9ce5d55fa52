# Miri: undefined behaviour, leaks and data races anywhere in memq-core and its
# dependencies, on the single- and multi-thread tests of topics, subscribers, groups,
# wake-ups, explicit acks and topics that release on read; and in memq-ffi's handle conversions and ownership (null
# handles and arguments, zero-copy payloads and their free callbacks, leak accounting).
# Miri interprets every step, so four core tests that only repeat the same path thousands
# of times (three stress tests and release.rs's property test) are skipped here (they run
# natively in stage 30). The FFI tests make pointers
# from integers (sentinel handles), hence permissive provenance for them. Bounded in time,
# generously.
if ! has_nightly; then
    skip "miri" "no nightly toolchain, and rustup could not install one"
elif ! ensure_component miri nightly || ! ensure_component rust-src nightly; then
    skip "miri" "the miri or rust-src component is not available for this nightly"
else
    miri_dir="${CARGO_TARGET_DIR:-target}/miri"
    run cargo +nightly miri setup
    bounded 1800 cargo +nightly miri test -p memq-core --target-dir "$miri_dir" \
        --test suite -- topic:: subscriber:: group:: wakeups:: acks:: release:: \
        --skip readers_attached_from_the_start_receive_the_same_from_both \
        --skip waiting_subscriber_survives_many_cancelled_waits_without_growth \
        --skip partitioned_group_with_members_leaving_mid_stream_delivers_every_message_once \
        --skip stress_random_settlement_every_message_acked_once_or_dead_lettered
    # memq-ring, the only crate of the engine with `unsafe`: its own tests (smaller
    # under miri), and the doc test.
    bounded 600 cargo +nightly miri test -p memq-ring --target-dir "$miri_dir" --test ring --test future --test drop_oldest --test hold
    bounded 600 cargo +nightly miri test -p memq-ring --target-dir "$miri_dir" --doc
    miri_ffi=(-p memq-ffi --target-dir "$miri_dir")
    MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance}" \
        bounded 1200 cargo +nightly miri test "${miri_ffi[@]}" --test bad_input --test leaks
    # zero_copy leaks its 'static test payloads on purpose (Box::leak), so it runs without
    # miri's leak check; it counts the release callbacks itself.
    MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance} -Zmiri-ignore-leaks" \
        bounded 1200 cargo +nightly miri test "${miri_ffi[@]}" --test zero_copy
fi
