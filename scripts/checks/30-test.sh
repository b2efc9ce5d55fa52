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
    note "quick mode: memq-core on the ring engine (default features) is tested by the full run"
    return 0
fi
# The ring engine, while it is built (docs/ENGINE-PLAN.md): memq-core alone, with its
# default features, built with every eligible topic on the lock-free ring, runs its whole
# suite (publishes and their line of parked publishers, subscribers, consumer groups,
# stats, the reference model), in a target directory of its own (the cfg changes every
# crate of the build). Skipped by
# name: the tests that make an explicit-ack group, which a ring topic refuses until
# those run there (`Error::NotOnRingYet`), and one test of the locked log's internals
# (when its read-ahead wakes a parked publisher; the ring wakes it as soon as room is
# free). The list goes as explicit-ack groups move to the ring.
ring_engine=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/ring-engine")
ring_suites=(--lib --tests)
ring_skip=(a_parked_member_is_woken_when_a_lease_runs_out
    a_receive_does_not_spin_on_a_full_dead_letter_topic_with_a_tiny_ack_wait
    an_aborted_task_s_message_is_redelivered_to_another_member
    recv_timeout_on_an_idle_explicit_group_times_out
    stress_members_at_max_in_flight_with_leases_running_out
    stress_random_settlement_every_message_acked_once_or_dead_lettered
    the_last_ack_after_close_wakes_every_member_waiting_on_the_partition
    the_last_dead_letter_after_close_wakes_every_member_waiting_on_the_partition
    members_waiting_at_max_in_flight_use_no_cpu_while_messages_pour_in
    block_parked_publisher_is_woken_after_a_publish_moved_its_wake_position)
ring_skip_args=()
for t in "${ring_skip[@]}"; do ring_skip_args+=(--skip "$t"); done
RUSTFLAGS="--cfg memq_ring_default" run cargo test "${ring_engine[@]}" "${ring_suites[@]}" --no-run
RUSTFLAGS="--cfg memq_ring_default" bounded 600 cargo test "${ring_engine[@]}" "${ring_suites[@]}" \
    -- --exact "${ring_skip_args[@]}"
# The core alone with its default features is the build above: memq-core's features
# (`serde`, `postcard`) add codecs and change neither engine, so its whole suite on the
# ring with default features, and on the locked log with every feature (the first run),
# covers both; a third build of the core for the default features alone took 100 s.
