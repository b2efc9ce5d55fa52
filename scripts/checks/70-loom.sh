# Loom: every interleaving of the wake-up models in core/tests/loom.rs (on the locked log,
# then on the ring engine), then memq-ring's (publish -> recv,
# group hand-off, a cancelled recv, close while waiting, Block back-pressure, explicit-ack
# releases and lease expiry), up to LOOM_MAX_PREEMPTIONS preemptions. Each model prints
# how many interleavings it explored. `--cfg loom` changes every crate, so the models build
# in their own target directory, without debug info (a loom failure names its model and
# the panic; the build is quicker). A lost wake-up shows as a loom "deadlock" panic; the run
# is bounded in time as well, in case a change makes a model explode.
loom_flags="--cfg loom -C debuginfo=0"
loom_args=(-p memq-core --test loom --profile "$MEMQ_PROFILE"
    --target-dir "${CARGO_TARGET_DIR:-target}/loom")
RUSTFLAGS="$loom_flags" run cargo test "${loom_args[@]}" --no-run
RUSTFLAGS="$loom_flags" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    bounded 900 cargo test "${loom_args[@]}" -- --test-threads=1 --nocapture
# The same models on the ring engine (MEMQ_LOOM_RING=1), the default for topics without a
# TTL, a clock or release_on_read: memq's wait lists in front of the ring's own protocol.
# Under loom the ring's short waits yield to the model's other threads and a woken
# publisher without room parks again, so an execution runs past loom's default of 1000
# branches: up to 20000 here. Two preemptions, fewer for the models of memq's line of
# parked publishers, whose interleavings on the ring grow fastest (at two preemptions
# they ran past 5 minutes each): one for a cancelled batch, a dropped woken single and a
# dropped parked publisher, none for two publishers parked in turn behind a reader.
loom_ring_1=(a_cancelled_batch_lets_the_single_behind_it_on
    a_dropped_woken_single_hands_its_turn_to_a_batch dropped_blocked_publisher_passes_its_wakeup_on)
loom_ring_0=(a_batch_and_a_single_parked_while_a_reader_hands_over
    block_publishers_parked_in_turn_are_each_woken_by_a_reader_handing_over)
loom_ring_skip=()
for t in "${loom_ring_1[@]}" "${loom_ring_0[@]}"; do loom_ring_skip+=(--skip "$t"); done
MEMQ_LOOM_RING=1 LOOM_MAX_BRANCHES=20000 RUSTFLAGS="$loom_flags" LOOM_MAX_PREEMPTIONS=2 \
    bounded 600 cargo test "${loom_args[@]}" -- --test-threads=1 --nocapture --exact "${loom_ring_skip[@]}"
MEMQ_LOOM_RING=1 LOOM_MAX_BRANCHES=20000 RUSTFLAGS="$loom_flags" LOOM_MAX_PREEMPTIONS=1 \
    bounded 300 cargo test "${loom_args[@]}" -- --test-threads=1 --nocapture --exact "${loom_ring_1[@]}"
MEMQ_LOOM_RING=1 LOOM_MAX_BRANCHES=20000 RUSTFLAGS="$loom_flags" LOOM_MAX_PREEMPTIONS=0 \
    bounded 300 cargo test "${loom_args[@]}" -- --test-threads=1 --nocapture --exact "${loom_ring_0[@]}"
# memq-ring's models (ring/tests/loom.rs): two writers and two readers at capacity 2, a
# registration racing an overwriting writer, a batch racing a registration and a close,
# writers evicting and overwriting one slot, readers racing to add entries, a group's
# members claiming while a writer publishes, park and wake at full and empty (with a
# reader and with a member), a hold reading again and advancing, writers and a reader from
# a first offset, readers past a parked writer's wake position (one reading on while the
# other crosses it last; one while a group member's receive ends without a claim), and,
# in rings that drop
# the oldest, an overwrite racing a pinned reader and members pinning while a writer
# overwrites (each explores every
# interleaving up to its preemption bound; the four-thread models take 2, the others 3).
# About 1-2 minutes on 2 busy cores.
ring_loom=(-p memq-ring --test loom --profile "$MEMQ_PROFILE"
    --target-dir "${CARGO_TARGET_DIR:-target}/loom")
RUSTFLAGS="$loom_flags" run cargo test "${ring_loom[@]}" --no-run
RUSTFLAGS="$loom_flags" bounded 900 cargo test "${ring_loom[@]}" -- --test-threads=1 --nocapture
