/*
 * memq from C: a durable work queue that survives a restart.
 *
 * A durable topic (two partitions, 64 messages per partition in memory) lives in a fresh
 * directory. The program publishes keyed orders, and a member of the explicit-ack group
 * "billing" takes every one of them: it acks two thirds and leaves every third unacked,
 * as a worker that dies in the middle would. Then it "restarts": every handle is freed
 * (the directory is unlocked) and the topic is opened again from the same directory.
 *
 * After the restart it checks that
 *   - offsets go on where they ended, and a second open of the open directory is LOCKED;
 *   - "billing" delivers again exactly the orders that were not acked, each once, and
 *     never one that was acked;
 *   - a subscriber from MEMQ_START_EARLIEST replays every order, payload and key intact,
 *     in offset order per partition: far more than the memory holds (it reads the rest
 *     from disk);
 *   - a plain group ("audit") that committed half the orders before the restart goes
 *     on with the other half;
 *   - receipts say `durable` under MEMQ_SYNC_ALWAYS and not under MEMQ_SYNC_INTERVAL.
 *
 * Usage: durable [MESSAGES]   (default 5000; the check script uses fewer under valgrind).
 * Exits 0 only if every check passed; the directory is removed at the end.
 *
 * Build (see scripts/checks/60-ffi.sh):
 *   gcc -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/durable.c \
 *       target/ci/libmemq.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o durable
 */
#define _XOPEN_SOURCE 700

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memq.h"

#define CAPACITY 64
#define PARTITIONS 2
#define CUSTOMERS 16
#define LATE 10 /* orders published after the restart */

#define CHECK(call)                                                                        \
    do {                                                                                   \
        memq_status st_ = (call);                                                          \
        if (st_ != MEMQ_STATUS_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s (%u): %s\n", __FILE__, __LINE__, #call,         \
                    memq_status_str(st_), (unsigned)st_, memq_last_error_message());       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define EXPECT(call, want)                                                                 \
    do {                                                                                   \
        memq_status st_ = (call);                                                          \
        if (st_ != (want)) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s (%u): %s; expected %s\n", __FILE__, __LINE__,   \
                    #call, memq_status_str(st_), (unsigned)st_, memq_last_error_message(), \
                    memq_status_str(want));                                                \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define FAIL(...)                                                                          \
    do {                                                                                   \
        fprintf(stderr, "durable: check failed: " __VA_ARGS__);                            \
        fputc('\n', stderr);                                                               \
        exit(1);                                                                           \
    } while (0)

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Order `seq`'s payload and key. */
static int payload(uint64_t seq, char *buf, size_t cap) {
    return snprintf(buf, cap, "order %06" PRIu64, seq);
}

static int key(uint64_t seq, char *buf, size_t cap) {
    return snprintf(buf, cap, "customer-%02u", (unsigned)(seq % CUSTOMERS));
}

/* The order a payload names, or FAIL. */
static uint64_t seq_of(const uint8_t *data, size_t len, uint64_t total) {
    char text[32];
    if (len == 0 || len >= sizeof text) FAIL("a payload of %zu bytes", len);
    memcpy(text, data, len);
    text[len] = '\0';
    uint64_t seq;
    if (sscanf(text, "order %" SCNu64, &seq) != 1 || seq >= total) FAIL("payload '%s'", text);
    char want[32];
    payload(seq, want, sizeof want);
    if (strcmp(text, want) != 0) FAIL("payload '%s', expected '%s'", text, want);
    return seq;
}

static memq_durable_topic *open_topic(const char *dir, uint32_t sync) {
    memq_topic_config config;
    memq_durable_config durable;
    CHECK(memq_topic_config_init(&config));
    config.capacity = CAPACITY;
    config.partitions = PARTITIONS;
    CHECK(memq_durable_config_init(&durable));
    durable.sync = sync;
    durable.sync_interval_ms = 20;   /* read only under MEMQ_SYNC_INTERVAL */
    durable.segment_bytes = 16384;   /* small segments: a few files per partition */
    memq_durable_topic *topic;
    CHECK(memq_durable_open(dir, &config, &durable, &topic));
    return topic;
}

static memq_durable_receipt publish_order(memq_durable_topic *topic, uint64_t seq) {
    char data[32], k[32];
    int n = payload(seq, data, sizeof data);
    int kn = key(seq, k, sizeof k);
    memq_durable_receipt r;
    CHECK(memq_durable_publish_keyed(topic, (const uint8_t *)k, (size_t)kn,
                                     (const uint8_t *)data, (size_t)n, -1, &r));
    uint32_t want;
    CHECK(memq_key_partition((const uint8_t *)k, (size_t)kn, PARTITIONS, &want));
    if (r.partition != want || r.count != 1)
        FAIL("order %" PRIu64 ": partition %u (expected %u), count %u", seq, r.partition, want,
             r.count);
    return r;
}

static memq_durable_consumer *join(memq_durable_topic *topic, const char *group,
                                   uint64_t ack_wait_ms) {
    memq_durable_group_config config;
    CHECK(memq_durable_group_config_init(&config));
    config.ack_wait_ms = ack_wait_ms;
    memq_durable_consumer *c;
    CHECK(memq_durable_consumer_new(topic, group, MEMQ_START_EARLIEST, 0, &config, &c));
    return c;
}

/* The order a plain group's next message names; UINT64_MAX when none came in time. */
static uint64_t next_plain(memq_durable_consumer *c, uint64_t total) {
    memq_durable_message *m;
    memq_status st = memq_durable_consumer_recv(c, 1000, &m, NULL);
    if (st == MEMQ_STATUS_TIMEOUT) return UINT64_MAX;
    CHECK(st);
    memq_durable_meta meta;
    const uint8_t *data;
    CHECK(memq_durable_message_get_meta(m, &meta));
    CHECK(memq_durable_message_data(m, &data));
    uint64_t seq = seq_of(data, meta.len, total);
    memq_durable_message_free(m);
    return seq;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv) {
    uint64_t count = 5000;
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 10);
        if (*end != '\0' || count < 2) {
            fprintf(stderr, "usage: %s [MESSAGES >= 2]\n", argv[0]);
            return 2;
        }
    }
    uint64_t total = count + LATE;
    printf("memq %s\n", memq_version());
    char dir[] = "/tmp/memq-durable-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    uint64_t *offsets = xcalloc(total, sizeof *offsets);
    uint32_t *partitions = xcalloc(total, sizeof *partitions);
    unsigned char *acked = xcalloc(total, 1);
    unsigned char *seen = xcalloc(total, 1);

    /* ---- before the restart ---------------------------------------------------------- */
    memq_durable_topic *topic = open_topic(dir, MEMQ_SYNC_INTERVAL);
    for (uint64_t seq = 0; seq < count; seq++) {
        memq_durable_receipt r = publish_order(topic, seq);
        if (r.durable) FAIL("a receipt under MEMQ_SYNC_INTERVAL says durable");
        offsets[seq] = r.offset;
        partitions[seq] = r.partition;
    }

    /* One directory, one owner. */
    memq_topic_config config;
    memq_durable_config durable;
    memq_durable_topic *second = NULL;
    CHECK(memq_topic_config_init(&config));
    config.capacity = CAPACITY;
    config.partitions = PARTITIONS;
    CHECK(memq_durable_config_init(&durable));
    EXPECT(memq_durable_open(dir, &config, &durable, &second), MEMQ_STATUS_LOCKED);
    if (second != NULL) FAIL("a failed open wrote its out-parameter");

    /* billing: acks two orders of three; every third is left unacked (a worker dies). */
    memq_durable_consumer *billing = join(topic, "billing", 60000);
    for (uint64_t i = 0; i < count; i++) {
        memq_durable_delivery *d;
        CHECK(memq_durable_consumer_recv_delivery(billing, 1000, &d, NULL));
        memq_durable_meta meta;
        const uint8_t *data;
        uint32_t deliveries;
        CHECK(memq_durable_delivery_get_meta(d, &meta));
        CHECK(memq_durable_delivery_data(d, &data));
        CHECK(memq_durable_delivery_deliveries(d, &deliveries));
        uint64_t seq = seq_of(data, meta.len, count);
        if (deliveries != 1) FAIL("order %" PRIu64 ": delivery %u before any nack", seq, deliveries);
        if (meta.offset != offsets[seq] || meta.partition != partitions[seq])
            FAIL("order %" PRIu64 ": delivered at %u/%" PRIu64, seq, meta.partition, meta.offset);
        if (seen[seq]++) FAIL("order %" PRIu64 " delivered twice", seq);
        if (seq % 3 != 0) {
            CHECK(memq_durable_delivery_ack(d));
            acked[seq] = 1;
            EXPECT(memq_durable_delivery_ack(d), MEMQ_STATUS_LEASE_EXPIRED);
        }
        memq_durable_delivery_free(d); /* an unacked one stays leased */
    }
    memq_durable_group_stats stats;
    CHECK(memq_durable_consumer_commit(billing));
    CHECK(memq_durable_consumer_get_stats(billing, &stats));
    uint64_t unacked = (count + 2) / 3;
    if (stats.in_flight != unacked) FAIL("in flight %zu, expected %" PRIu64, stats.in_flight, unacked);

    /* audit: a plain group reads the first half, commits and stops. */
    memq_durable_consumer *audit = join(topic, "audit", 0);
    uint64_t half = count / 2;
    for (uint64_t i = 0; i < half; i++) {
        if (next_plain(audit, count) == UINT64_MAX) FAIL("audit: nothing after %" PRIu64, i);
    }
    CHECK(memq_durable_consumer_commit(audit));

    /* The restart: every handle goes, which unlocks the directory. */
    memq_durable_consumer_free(audit);
    memq_durable_consumer_free(billing);
    memq_durable_topic_free(topic);
    printf("published %" PRIu64 " orders, acked %" PRIu64 ", left %" PRIu64
           " unacked; restarting\n",
           count, count - unacked, unacked);

    /* ---- after the restart ------------------------------------------------------------ */
    topic = open_topic(dir, MEMQ_SYNC_ALWAYS);
    uint64_t kept = 0;
    for (uint32_t p = 0; p < PARTITIONS; p++) {
        uint64_t next, start;
        CHECK(memq_durable_topic_next_offset(topic, p, &next));
        CHECK(memq_durable_topic_start_offset(topic, p, &start));
        kept += next - start;
    }
    if (kept != count) FAIL("%" PRIu64 " orders on disk, expected %" PRIu64, kept, count);
    for (uint64_t seq = count; seq < total; seq++) {
        memq_durable_receipt r = publish_order(topic, seq);
        if (!r.durable) FAIL("a receipt under MEMQ_SYNC_ALWAYS is not durable");
        offsets[seq] = r.offset;
        partitions[seq] = r.partition;
    }

    /* billing goes on: every unacked order again, the late ones, and nothing acked. */
    billing = join(topic, "billing", 60000);
    memset(seen, 0, total);
    uint64_t again = 0;
    for (;;) {
        memq_durable_delivery *d;
        memq_status st = memq_durable_consumer_recv_delivery(billing, 500, &d, NULL);
        if (st == MEMQ_STATUS_TIMEOUT) break;
        CHECK(st);
        memq_durable_meta meta;
        const uint8_t *data;
        CHECK(memq_durable_delivery_get_meta(d, &meta));
        CHECK(memq_durable_delivery_data(d, &data));
        uint64_t seq = seq_of(data, meta.len, total);
        if (acked[seq]) FAIL("order %" PRIu64 " came back after it was acked", seq);
        if (seen[seq]++) FAIL("order %" PRIu64 " delivered twice after the restart", seq);
        if (seq == count) {
            /* The first late order cannot be billed: a poison message, given up on. */
            CHECK(memq_durable_delivery_reject(d));
        } else {
            CHECK(memq_durable_delivery_ack(d));
        }
        acked[seq] = 1;
        memq_durable_delivery_free(d);
        again++;
    }

    /* The rejected order is in billing's dead-letter log, with where it came from. */
    memq_durable_dead_letters *dead;
    CHECK(memq_durable_dead_letters_new(topic, "billing", MEMQ_START_EARLIEST, 0, &dead));
    memq_durable_dead_letter *letter;
    CHECK(memq_durable_dead_letters_recv(dead, 1000, &letter, NULL));
    memq_durable_dead_letter_info info;
    const uint8_t *letter_data;
    CHECK(memq_durable_dead_letter_get_info(letter, &info));
    CHECK(memq_durable_dead_letter_data(letter, &letter_data));
    if (seq_of(letter_data, info.len, total) != count || info.origin_offset != offsets[count] ||
        info.origin_partition != partitions[count] || info.reason != MEMQ_DEAD_LETTER_REASON_REJECTED ||
        strcmp(info.group, "billing") != 0)
        FAIL("the dead letter is not the rejected order");
    memq_durable_dead_letter_free(letter);
    EXPECT(memq_durable_dead_letters_recv(dead, 0, &letter, NULL), MEMQ_STATUS_EMPTY);
    memq_durable_dead_letters_free(dead);
    printf("order %" PRIu64 " rejected: in billing's dead letters (partition %u, offset %" PRIu64 ")\n",
           count, info.origin_partition, info.origin_offset);
    for (uint64_t seq = 0; seq < total; seq++) {
        if (!acked[seq]) FAIL("order %" PRIu64 " was never acked", seq);
    }
    if (again != unacked + LATE) FAIL("%" PRIu64 " deliveries after the restart", again);
    CHECK(memq_durable_consumer_get_stats(billing, &stats));
    if (stats.in_flight != 0) FAIL("%zu still in flight", stats.in_flight);

    /* audit goes on with the second half (and the late orders). */
    audit = join(topic, "audit", 0);
    memset(seen, 0, total);
    uint64_t audited = 0;
    for (uint64_t seq; (seq = next_plain(audit, total)) != UINT64_MAX; audited++) {
        if (seen[seq]++) FAIL("audit: order %" PRIu64 " twice", seq);
    }
    if (audited != total - half)
        FAIL("audit read %" PRIu64 " after the restart, expected %" PRIu64, audited, total - half);

    /* A subscriber replays everything, from disk and then memory, in order per partition. */
    memq_durable_subscriber *sub;
    CHECK(memq_durable_subscriber_new(topic, MEMQ_START_EARLIEST, 0, &sub));
    uint64_t next_offset[PARTITIONS] = {0};
    memset(seen, 0, total);
    uint64_t replayed = 0;
    for (;;) {
        memq_durable_message *m;
        memq_status st = memq_durable_subscriber_recv(sub, 0, &m, NULL);
        if (st == MEMQ_STATUS_EMPTY) break;
        CHECK(st);
        memq_durable_meta meta;
        const uint8_t *data, *k;
        CHECK(memq_durable_message_get_meta(m, &meta));
        CHECK(memq_durable_message_data(m, &data));
        CHECK(memq_durable_message_key(m, &k));
        uint64_t seq = seq_of(data, meta.len, total);
        char want[32];
        int kn = key(seq, want, sizeof want);
        if (!meta.has_key || meta.key_len != (size_t)kn || memcmp(k, want, (size_t)kn) != 0)
            FAIL("order %" PRIu64 ": wrong key", seq);
        if (meta.partition != partitions[seq] || meta.offset != offsets[seq])
            FAIL("order %" PRIu64 " replayed at %u/%" PRIu64, seq, meta.partition, meta.offset);
        if (meta.offset != next_offset[meta.partition]++)
            FAIL("partition %u out of order at %" PRIu64, meta.partition, meta.offset);
        if (seen[seq]++) FAIL("order %" PRIu64 " replayed twice", seq);
        memq_durable_message_free(m);
        replayed++;
    }
    if (replayed != total) FAIL("replayed %" PRIu64 " of %" PRIu64, replayed, total);
    printf("after the restart: %" PRIu64 " unacked orders delivered again (none acked), "
           "audit went on with %" PRIu64 ", replayed %" PRIu64 " with %d in memory\n",
           unacked, audited, replayed, CAPACITY * PARTITIONS);

    /* Closing: readers drain, then see CLOSED; publishing is CLOSED. */
    CHECK(memq_durable_topic_close(topic));
    memq_durable_message *m = NULL;
    EXPECT(memq_durable_subscriber_recv(sub, -1, &m, NULL), MEMQ_STATUS_CLOSED);
    memq_durable_receipt r;
    EXPECT(memq_durable_publish(topic, (const uint8_t *)"x", 1, -1, &r), MEMQ_STATUS_CLOSED);

    memq_durable_subscriber_free(sub);
    memq_durable_consumer_free(audit);
    memq_durable_consumer_free(billing);
    memq_durable_topic_free(topic);
    free(offsets);
    free(partitions);
    free(acked);
    free(seen);
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        perror("removing the directory");
        return 1;
    }
    printf("durable: all checks passed\n");
    return 0;
}
