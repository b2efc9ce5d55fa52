# The memq examples (pub/sub, streams, batching, groups, partitions, codecs, replay, TTL,
# worker pools, one per runtime): each checks what it received and exits non-zero on a
# mismatch. Built by the test stage (`cargo test --all-targets`); here they only run.
bin=$(target_dir)/examples
for ex in pubsub stream batching consumer_groups partitions serialization replay ttl \
    worker_pool runtime_tokio runtime_async_std runtime_smol; do
    run timeout 300 "$bin/$ex"
done
