/*
 * Prints the size of each C ABI struct that examples/python/memq.py mirrors, and the
 * offset of each field, for check_layout.py to compare with the ctypes definitions.
 * Built and run by scripts/checks/60-ffi.sh.
 */
#include <stddef.h>
#include <stdio.h>

#include "memq.h"

#define FIELD(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(struct s, f))
#define SIZE(s) printf("%s %zu\n", #s, sizeof(struct s))

int main(void) {
    SIZE(memq_topic_config);
    FIELD(memq_topic_config, capacity);
    FIELD(memq_topic_config, partitions);
    FIELD(memq_topic_config, overflow);
    FIELD(memq_topic_config, ttl_ms);
    FIELD(memq_topic_config, flags);
    SIZE(memq_receipt);
    FIELD(memq_receipt, offset);
    FIELD(memq_receipt, partition);
    SIZE(memq_slice);
    FIELD(memq_slice, data);
    FIELD(memq_slice, len);
    SIZE(memq_message_meta);
    FIELD(memq_message_meta, offset);
    FIELD(memq_message_meta, timestamp_ns);
    FIELD(memq_message_meta, len);
    FIELD(memq_message_meta, partition);
    FIELD(memq_message_meta, has_timestamp);
    SIZE(memq_topic_stats);
    FIELD(memq_topic_stats, capacity);
    FIELD(memq_topic_stats, partitions);
    FIELD(memq_topic_stats, overflow);
    FIELD(memq_topic_stats, closed);
    FIELD(memq_topic_stats, published);
    FIELD(memq_topic_stats, delivered);
    FIELD(memq_topic_stats, evicted);
    FIELD(memq_topic_stats, expired);
    FIELD(memq_topic_stats, depth);
    FIELD(memq_topic_stats, subscribers);
    FIELD(memq_topic_stats, groups);
    FIELD(memq_topic_stats, waiting_publishers);
    FIELD(memq_topic_stats, released);
    FIELD(memq_topic_stats, lagged);
    SIZE(memq_ack_config);
    FIELD(memq_ack_config, ack_wait_ms);
    FIELD(memq_ack_config, max_deliveries);
    FIELD(memq_ack_config, backoff);
    FIELD(memq_ack_config, backoff_initial_ms);
    FIELD(memq_ack_config, backoff_max_ms);
    FIELD(memq_ack_config, max_in_flight);
    FIELD(memq_ack_config, dead_letter);
    SIZE(memq_ack_group_stats);
    FIELD(memq_ack_group_stats, members);
    FIELD(memq_ack_group_stats, lag);
    FIELD(memq_ack_group_stats, delivered);
    FIELD(memq_ack_group_stats, in_flight);
    FIELD(memq_ack_group_stats, redelivered);
    FIELD(memq_ack_group_stats, acked);
    FIELD(memq_ack_group_stats, dead_lettered);
    FIELD(memq_ack_group_stats, evicted_unacked);
    FIELD(memq_ack_group_stats, lagged);
    SIZE(memq_durable_config);
    FIELD(memq_durable_config, sync);
    FIELD(memq_durable_config, sync_interval_ms);
    FIELD(memq_durable_config, segment_bytes);
    FIELD(memq_durable_config, retention_max_bytes);
    FIELD(memq_durable_config, retention_max_age_ms);
    FIELD(memq_durable_config, retention_max_segments);
    FIELD(memq_durable_config, flags);
    SIZE(memq_durable_group_config);
    FIELD(memq_durable_group_config, ack_wait_ms);
    FIELD(memq_durable_group_config, max_deliveries);
    FIELD(memq_durable_group_config, commit_every);
    SIZE(memq_durable_receipt);
    FIELD(memq_durable_receipt, offset);
    FIELD(memq_durable_receipt, partition);
    FIELD(memq_durable_receipt, count);
    FIELD(memq_durable_receipt, durable);
    SIZE(memq_durable_meta);
    FIELD(memq_durable_meta, offset);
    FIELD(memq_durable_meta, timestamp_ms);
    FIELD(memq_durable_meta, len);
    FIELD(memq_durable_meta, key_len);
    FIELD(memq_durable_meta, partition);
    FIELD(memq_durable_meta, has_key);
    SIZE(memq_durable_group_stats);
    FIELD(memq_durable_group_stats, members);
    FIELD(memq_durable_group_stats, in_flight);
    FIELD(memq_durable_group_stats, redelivered);
    FIELD(memq_durable_group_stats, dead_lettered);
    return 0;
}
