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
# explicit-ack groups, stats, the reference model), in a target directory of its own
# (the cfg changes every crate of the build). Skipped by name: one test of the locked
# log's internals (when its read-ahead wakes a parked publisher; the ring wakes it as
# soon as room is free, and it parks again).
ring_engine=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/ring-engine")
ring_suites=(--lib --tests)
ring_skip=(block_parked_publisher_is_woken_after_a_publish_moved_its_wake_position)
ring_skip_args=()
for t in "${ring_skip[@]}"; do ring_skip_args+=(--skip "$t"); done
RUSTFLAGS="--cfg memq_ring_default" run cargo test "${ring_engine[@]}" "${ring_suites[@]}" --no-run
RUSTFLAGS="--cfg memq_ring_default" bounded 600 cargo test "${ring_engine[@]}" "${ring_suites[@]}" \
    -- --exact "${ring_skip_args[@]}"
# The core alone with its default features is the build above: memq-core's features
# (`serde`, `postcard`) add codecs and change neither engine, so its whole suite on the
# ring with default features, and on the locked log with every feature (the first run),
# covers both; a third build of the core for the default features alone took 100 s.
