# Every unit, integration and doc test of every crate, all features on, in the ci
# profile (optimised, debug assertions on). This also builds every example. memq-bench
# (bench/) has no tests: stage 50 builds its binaries and benches once, in their own form,
# instead of a second time as test harnesses here.
# memq-redis (remote/) needs Redis servers: stage 67-redis installs them and runs its
# tests there, once.
# Builds first, then runs under `timeout`: a hung test (a lost wake-up) fails the stage
# in minutes instead of eating CI's budget.
run cargo test --workspace --exclude memq-bench --exclude memq-redis --all-targets --all-features --profile "$MEMQ_PROFILE" --no-run
bounded 900 cargo test --workspace --exclude memq-bench --exclude memq-redis --all-targets --all-features --profile "$MEMQ_PROFILE"
bounded 900 cargo test --workspace --exclude memq-bench --exclude memq-redis --doc --all-features --profile "$MEMQ_PROFILE"
if [ "${MEMQ_QUICK:-0}" = 1 ]; then
    note "quick mode: the core alone with its default features is tested by the full run"
    return 0
fi
# The ring engine, while it is built (docs/ENGINE-PLAN.md): memq-core built with every
# eligible topic on the lock-free ring runs the suites of what runs there already
# (publishes and their line of parked publishers, subscribers, stats), in a target
# directory of its own (the cfg changes every crate of the build). Consumer groups do not
# run on the ring yet (a ring topic refuses them): the tests that make one are skipped by
# name, and the list goes as groups move to the ring.
ring_engine=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/ring-engine")
ring_suites=(--test subscriber --test ring_engine --test liveness --test errors --test nested_waits
    --test reader_liveness --test overflow --test wakeups --test topic)
ring_skip=(block_group_position_holds_retention
    block_parked_publisher_is_woken_after_a_publish_moved_its_wake_position
    drop_oldest_group_lags_too drop_oldest_never_fails_with_full stats_count_what_readers_missed
    a_member_that_stopped_waiting_as_a_stream_does_not_keep_the_wake_up_from_another
    close_wakes_waiting_readers_and_publishers group_members_are_woken_one_per_message_in_fifo_order
    idle_member_without_partition_is_woken_on_rebalance notified_then_dropped_member_passes_the_wakeup_on
    pass_on_reaches_a_recv_member_behind_many_stream_registrations debug_does_not_need_t_debug)
ring_skip_args=()
for t in "${ring_skip[@]}"; do ring_skip_args+=(--skip "$t"); done
RUSTFLAGS="--cfg memq_ring_default" run cargo test "${ring_engine[@]}" "${ring_suites[@]}" --no-run
RUSTFLAGS="--cfg memq_ring_default" bounded 600 cargo test "${ring_engine[@]}" "${ring_suites[@]}" \
    -- --exact "${ring_skip_args[@]}"
# The core alone with its default features, and without std on the host.
run cargo test -p memq-core --profile "$MEMQ_PROFILE" --lib --tests --no-run
bounded 600 cargo test -p memq-core --profile "$MEMQ_PROFILE" --lib --tests
