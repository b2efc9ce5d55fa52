# Every example runs and checks what it received (each exits non-zero on a mismatch).
# `cargo test` builds examples under hashed names only; build the runnable binaries.
run cargo build --examples --profile "$MEMQ_PROFILE"
bin=$(target_dir)/examples
for ex in quickstart; do
    bounded 300 "$bin/$ex"
done
bounded 300 "$bin/large_object_test"
# perf_runner fails if a memq row loses, duplicates or reorders a message, or hangs.
bounded 600 "$bin/perf_runner" --quick
