# The memq examples (pub/sub, streams, batching, groups, partitions, codecs, replay, TTL,
# worker pools, one per runtime): each checks what it received and exits non-zero on a
# mismatch. Stage 50 built them already (then this build does nothing); it makes the
# stage work on its own (`scripts/check memq-examples`).
run cargo build --examples --profile "$MEMQ_PROFILE"
bin=$(target_dir)/examples
for ex in pubsub stream batching consumer_groups partitions serialization replay ttl \
    worker_pool runtime_tokio runtime_async_std runtime_smol; do
    bounded 300 "$bin/$ex"
done
