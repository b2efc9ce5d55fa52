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
    note "quick mode: memq-core on the locked log (default features) is tested by the full run"
    return 0
fi
# The locked log. Topics run on the lock-free ring wherever their settings allow it
# (TopicConfig::ring_engine), so the runs above test the ring, and the locked log only
# for the topics that need it (TTL, clocks, release_on_read) and those that turn the ring
# off. Here memq-core alone, with its default features, built with every topic on the
# locked log (`--cfg memq_locked_log`), runs its whole suite again (publishes and their
# line of parked publishers, subscribers, consumer groups, explicit-ack groups, stats,
# the reference model), in a target directory of its own (the cfg changes every crate
# of the build). memq-core's features (`serde`, `postcard`) add codecs and change
# neither engine, so the two builds cover both engines without a third.
locked_log=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/locked-log" --lib --tests)
RUSTFLAGS="--cfg memq_locked_log" run cargo test "${locked_log[@]}" --no-run
RUSTFLAGS="--cfg memq_locked_log" bounded 600 cargo test "${locked_log[@]}"
