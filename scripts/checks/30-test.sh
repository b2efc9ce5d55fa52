# Every unit, integration and doc test of every crate, all features on, in the ci
# profile (optimised, debug assertions on). This also builds every example. memq-bench
# (bench/) has no tests: stage 50 builds its binaries and benches once, in their own form,
# instead of a second time as test harnesses here (`--lib --tests --examples` is
# `--all-targets` without the bins, which have `test = false`, and the benches). The
# package selection is MEMQ_PACKAGES (scripts/lib.sh), as in stages 50, 55 and 60, so
# that they reuse the libraries built here.
# memq-redis (remote/) needs Redis servers: stage 67-redis installs them and runs its
# tests there, once.
# Builds first, then runs under `timeout`: a hung test (a lost wake-up) fails the stage
# in minutes instead of eating CI's budget.
tests=("${MEMQ_PACKAGES[@]}" --lib --tests --examples --profile "$MEMQ_PROFILE")
run cargo test "${tests[@]}" --no-run
bounded 900 cargo test "${tests[@]}"
bounded 900 cargo test "${MEMQ_PACKAGES[@]}" --doc --profile "$MEMQ_PROFILE"
if [ "${MEMQ_QUICK:-0}" = 1 ]; then
    note "quick mode: memq-core on the ring engine (default features) is tested by the full run"
    return 0
fi
# The ring engine. Topics run on the locked log unless TopicConfig::ring_engine(true)
# asks for the lock-free ring (docs/ENGINE-PLAN.md, "Measured", says why), so the runs
# above test the locked log, and the ring through the tests that ask for it. Here
# memq-core alone, with its default features, built with every eligible topic on the
# ring (`--cfg memq_ring_default`), runs its whole suite again (publishes and their line
# of parked publishers, subscribers, consumer groups, explicit-ack groups, stats, the
# reference model), in a target directory of its own (the cfg changes every crate of
# the build). memq-core's features (`serde`, `postcard`) add codecs and change neither
# engine, so the two builds cover both engines without a third. (Every other crate's
# suite, the C examples and the Python suite passed on the ring too, run by hand on
# 2026-12-07; building them twice here would cost CI minutes it does not have.)
# Without debug info (the cfg's build is its own anyway): 122 s to build instead of 151 s
# on the 2-core machine; a failure still names its test, its assertion and the line.
ring_engine=(-p memq-core --profile "$MEMQ_PROFILE" --target-dir "${CARGO_TARGET_DIR:-target}/ring-engine" --lib --tests)
ring_flags="--cfg memq_ring_default -C debuginfo=0"
RUSTFLAGS="$ring_flags" run cargo test "${ring_engine[@]}" --no-run
RUSTFLAGS="$ring_flags" bounded 600 cargo test "${ring_engine[@]}"
