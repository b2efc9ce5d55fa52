# Loom: every interleaving of the wake-up models in core/tests/loom.rs (publish -> recv,
# group hand-off, a cancelled recv, close while waiting, Block back-pressure, explicit-ack
# releases and lease expiry), up to LOOM_MAX_PREEMPTIONS preemptions. Each model prints
# how many interleavings it explored. `--cfg loom` changes every crate, so the models build
# in their own target directory. A lost wake-up shows as a loom "deadlock" panic; the run
# is bounded in time as well, in case a change makes a model explode.
loom_args=(-p memq-core --test loom --profile "$MEMQ_PROFILE"
    --target-dir "${CARGO_TARGET_DIR:-target}/loom")
RUSTFLAGS="--cfg loom" run cargo test "${loom_args[@]}" --no-run
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    bounded 900 cargo test "${loom_args[@]}" -- --test-threads=1 --nocapture
