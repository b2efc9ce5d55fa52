# The memq examples (pub/sub, streams, batching, groups, partitions, codecs, replay, TTL,
# worker pools, one per runtime): each checks what it received and exits non-zero on a
# mismatch. Stage 50 built them already (then this build does nothing); it makes the
# stage work on its own (`scripts/check memq-examples`).
run cargo build "${MEMQ_PACKAGES[@]}" --examples --bins --profile "$MEMQ_PROFILE"
bin=$(target_dir)/examples
for ex in pubsub stream batching consumer_groups partitions serialization replay ttl \
    worker_pool runtime_tokio runtime_async_std runtime_smol durable; do
    bounded 300 "$bin/$ex"
done
# A newcomer's first command, `cargo run --example quickstart`, builds memq with its
# default features and nothing else (issue 32: it built 134 crates, with every benchmark
# peer and zstd's C code). The runtimes and codecs stay behind features of memq-examples.
deps=$(cargo tree -p memq-examples -e normal,build --prefix none)
heavy=$(grep -E '^(tokio|async-std|smol|serde|zstd|flate2|criterion|memq-bench) ' <<<"$deps" |
    sort -u || true)
if [ -n "$heavy" ]; then
    echo "memq-examples without features depends on more than memq's defaults:" >&2
    echo "$heavy" >&2
    exit 1
fi
