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
# eligible topic on the lock-free ring runs the suites whose readers run there already
# (subscribers, publishes, stats), in a target directory of its own (the cfg changes
# every crate of the build).
ring_engine=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/ring-engine"
    --test subscriber --test ring_engine)
RUSTFLAGS="--cfg memq_ring_default" run cargo test "${ring_engine[@]}" --no-run
RUSTFLAGS="--cfg memq_ring_default" bounded 600 cargo test "${ring_engine[@]}"
# The core alone with its default features, and without std on the host.
run cargo test -p memq-core --profile "$MEMQ_PROFILE" --lib --tests --no-run
bounded 600 cargo test -p memq-core --profile "$MEMQ_PROFILE" --lib --tests
