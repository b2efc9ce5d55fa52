# Loom: every interleaving of the wake-up models in core/tests/loom.rs, then memq-ring's (publish -> recv,
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
# memq-ring's models (ring/tests/loom.rs): two writers and two readers at capacity 2, a
# registration racing an overwriting writer, a batch racing a registration and a close,
# writers evicting and overwriting one slot, readers racing to add entries, a group's
# members claiming while a writer publishes, park and wake at full and empty (with a
# reader and with a member), a hold reading again and advancing, writers and a reader from
# a first offset, and, in rings that drop
# the oldest, an overwrite racing a pinned reader and members pinning while a writer
# overwrites (each explores every
# interleaving up to its preemption bound; the four-thread models take 2, the others 3).
# About 1-2 minutes on 2 busy cores.
ring_loom=(-p memq-ring --test loom --profile "$MEMQ_PROFILE"
    --target-dir "${CARGO_TARGET_DIR:-target}/loom")
RUSTFLAGS="--cfg loom" run cargo test "${ring_loom[@]}" --no-run
RUSTFLAGS="--cfg loom" bounded 900 cargo test "${ring_loom[@]}" -- --test-threads=1 --nocapture
