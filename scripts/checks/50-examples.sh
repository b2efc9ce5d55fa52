# Every example and every benchmark binary runs and checks what it received (each exits
# non-zero on a mismatch). `cargo test` builds examples under hashed names only; build the
# runnable binaries: the examples with every feature of memq-examples (the runtime and codec
# ones need one), and the binaries of memq-bench (bench/), with stage 30's packages and
# features (MEMQ_PACKAGES), so that the engine under them is the one stage 30 built.
run cargo build "${MEMQ_PACKAGES[@]}" --examples --bins --profile "$MEMQ_PROFILE"
bin=$(target_dir)
for ex in quickstart; do
    bounded 300 "$bin/examples/$ex"
done
bounded 300 "$bin/large_object_test"
# perf_runner fails if a memq row loses, duplicates or reorders a message, or hangs. It runs
# each cell in a child process of its own binary, so this also checks that it finds itself.
bounded 600 "$bin/perf_runner" --quick
# plain_bench, the second and plainer harness of issue 36 (shares no code with perf_runner):
# its smoke run fails if a memq row (memq, memq-release, memq-threads, memq-ring) loses or
# duplicates a message, or a run misses its deadline.
bounded 300 "$bin/plain_bench" --quick
# s6_one_thread (S6's round trip on one thread): fails if an id comes back wrong or a cell
# fails; a fraction of a second.
bounded 120 "$bin/s6_one_thread" --round-trips 10000 --rounds 1
# durable_bench's smoke run (0.3 s a cell, a 16 MiB log): it fails on a wrong count (a
# message lost or read twice, in the log, the SQLite table or the replay), never on a
# performance target; the Python peers are skipped, loudly, where pip cannot install them.
bounded 600 "$bin/durable_bench" --quick
# The criterion benches, each run once as a test (`--test`): they build and measure what
# they should, without taking the time of a measurement. The same packages and features
# as the build above, so that cargo reuses its memq-core, memq-store and memq (a bench of
# memq-bench alone unifies features differently and rebuilds the chain: 86 s here).
bounded 900 cargo bench "${MEMQ_PACKAGES[@]}" --bench '*' \
    --profile "$MEMQ_PROFILE" -- --test
