/*
 * memq from C: threads publishing and receiving through libmemq.
 *
 *   1. pub/sub throughput: one producer thread, one subscriber thread, 64-byte messages,
 *      published one by one and then in batches, received in batches. Every message is
 *      checked (offset, length, contents) and the throughput is printed.
 *   2. a consumer group: one producer publishing keyed messages to a partitioned topic,
 *      three competing members receiving batches until the topic closes. Each message
 *      must arrive exactly once, on its key's partition, in order within the partition.
 *
 * Usage: pubsub [MESSAGES]   (default 1000000; the check script uses fewer under
 *                             valgrind). Exits 0 only if every check passed.
 *
 * Build (see scripts/checks/60-ffi.sh):
 *   gcc -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/pubsub.c \
 *       target/ci/libmemq.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o pubsub
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memq.h"

#define MSG_LEN 64
#define BATCH 256
#define GROUP_MEMBERS 3
#define PARTITIONS 4
#define KEYS 16

/* Reports a failed call with its status and exits. */
#define CHECK(call)                                                                        \
    do {                                                                                   \
        memq_status st_ = (call);                                                          \
        if (st_ != MEMQ_STATUS_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s (%u): %s\n", __FILE__, __LINE__, #call,         \
                    memq_status_str(st_), (unsigned)st_, memq_last_error_message());       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define FAIL(...)                                                                          \
    do {                                                                                   \
        fprintf(stderr, "pubsub: check failed: " __VA_ARGS__);                             \
        fputc('\n', stderr);                                                               \
        exit(1);                                                                           \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Message `seq`: its sequence number, then bytes derived from it. */
static void fill(uint8_t *buf, uint64_t seq) {
    memcpy(buf, &seq, sizeof seq);
    for (size_t i = sizeof seq; i < MSG_LEN; i++) {
        buf[i] = (uint8_t)(seq * 31u + i);
    }
}

static int matches(const uint8_t *buf, size_t len, uint64_t seq) {
    uint8_t want[MSG_LEN];
    fill(want, seq);
    return len == MSG_LEN && memcmp(buf, want, MSG_LEN) == 0;
}

/* ---- 1. pub/sub throughput ------------------------------------------------------------ */

struct pubsub_run {
    memq_topic *topic;
    memq_subscriber *sub;
    uint64_t count;
    int batched; /* publish in batches of BATCH */
    uint64_t received;
};

static void *produce(void *arg) {
    struct pubsub_run *run = arg;
    uint8_t buf[BATCH][MSG_LEN];
    memq_slice items[BATCH];
    for (uint64_t seq = 0; seq < run->count;) {
        if (!run->batched) {
            fill(buf[0], seq);
            CHECK(memq_topic_publish(run->topic, buf[0], MSG_LEN, -1, NULL));
            seq++;
            continue;
        }
        size_t n = 0;
        for (; n < BATCH && seq + n < run->count; n++) {
            fill(buf[n], seq + n);
            items[n].data = buf[n];
            items[n].len = MSG_LEN;
        }
        memq_receipt receipt;
        CHECK(memq_topic_publish_batch(run->topic, items, n, -1, &receipt));
        if (receipt.offset != seq) {
            FAIL("batch landed at offset %" PRIu64 ", expected %" PRIu64, receipt.offset, seq);
        }
        seq += n;
    }
    return NULL;
}

static void *subscribe(void *arg) {
    struct pubsub_run *run = arg;
    memq_message *msgs[BATCH];
    while (run->received < run->count) {
        size_t n = 0;
        CHECK(memq_subscriber_recv_many(run->sub, -1, msgs, BATCH, &n, NULL));
        for (size_t i = 0; i < n; i++) {
            const uint8_t *data;
            memq_message_meta meta;
            CHECK(memq_message_data(msgs[i], &data));
            CHECK(memq_message_get_meta(msgs[i], &meta));
            uint64_t seq = run->received++;
            if (meta.offset != seq || meta.partition != 0 || !matches(data, meta.len, seq)) {
                FAIL("message %" PRIu64 " wrong (offset %" PRIu64 ", %zu bytes)", seq,
                     meta.offset, meta.len);
            }
        }
        memq_message_free_many(msgs, n);
    }
    return NULL;
}

static void pubsub_throughput(uint64_t count, int batched) {
    memq_topic_config config;
    CHECK(memq_topic_config_init(&config));
    config.capacity = 4096;
    config.overflow = MEMQ_OVERFLOW_BLOCK;

    struct pubsub_run run = {.count = count, .batched = batched};
    CHECK(memq_topic_new(&config, &run.topic));
    CHECK(memq_subscriber_new(run.topic, MEMQ_START_EARLIEST, 0, &run.sub));

    double start = now_s();
    pthread_t producer, consumer;
    if (pthread_create(&consumer, NULL, subscribe, &run) != 0 ||
        pthread_create(&producer, NULL, produce, &run) != 0) {
        FAIL("pthread_create");
    }
    pthread_join(producer, NULL);
    pthread_join(consumer, NULL);
    double secs = now_s() - start;

    /* Everything published was received, and nothing more is there. */
    memq_message *extra = NULL;
    if (memq_subscriber_recv(run.sub, 0, &extra, NULL) != MEMQ_STATUS_EMPTY) {
        FAIL("a message beyond the %" PRIu64 " published", count);
    }
    memq_topic_stats stats;
    CHECK(memq_topic_get_stats(run.topic, &stats));
    if (stats.published != count || run.received != count) {
        FAIL("published %" PRIu64 ", received %" PRIu64 " of %" PRIu64, stats.published,
             run.received, count);
    }
    printf("throughput: 1 producer / 1 consumer, %d-byte messages, %s: %" PRIu64
           " messages in %.3f s = %.2f M msg/s (%.1f MB/s), all verified\n",
           MSG_LEN, batched ? "batches of 256" : "one by one", count, secs,
           (double)count / secs / 1e6, (double)count * MSG_LEN / secs / 1e6);

    memq_subscriber_free(run.sub);
    memq_topic_free(run.topic);
}

/* ---- 2. a consumer group -------------------------------------------------------------- */

struct group_run {
    memq_topic *topic;
    uint64_t count;
    pthread_mutex_t lock;
    uint8_t *seen; /* one byte per message: how often it was delivered */
};

struct member {
    struct group_run *run;
    memq_consumer *consumer;
    uint64_t received;
};

static void key_of(uint64_t seq, char key[8]) {
    snprintf(key, 8, "k%02u", (unsigned)(seq % KEYS));
}

static void *group_produce(void *arg) {
    struct group_run *run = arg;
    uint8_t buf[MSG_LEN];
    for (uint64_t seq = 0; seq < run->count; seq++) {
        char key[8];
        key_of(seq, key);
        fill(buf, seq);
        memq_receipt receipt;
        CHECK(memq_topic_publish_keyed(run->topic, (const uint8_t *)key, strlen(key), buf,
                                       MSG_LEN, -1, &receipt));
    }
    /* Members drain what is retained, then get MEMQ_STATUS_CLOSED. */
    CHECK(memq_topic_close(run->topic));
    return NULL;
}

static void *group_consume(void *arg) {
    struct member *m = arg;
    struct group_run *run = m->run;
    uint64_t next_offset[PARTITIONS] = {0};
    memq_message *msgs[64];
    for (;;) {
        size_t n = 0;
        memq_status st = memq_consumer_recv_many(m->consumer, 100, msgs, 64, &n, NULL);
        if (st == MEMQ_STATUS_CLOSED) {
            break;
        }
        if (st == MEMQ_STATUS_TIMEOUT) {
            continue;
        }
        CHECK(st);
        for (size_t i = 0; i < n; i++) {
            const uint8_t *data;
            memq_message_meta meta;
            CHECK(memq_message_data(msgs[i], &data));
            CHECK(memq_message_get_meta(msgs[i], &meta));
            uint64_t seq;
            if (meta.len != MSG_LEN) {
                FAIL("group message of %zu bytes", meta.len);
            }
            memcpy(&seq, data, sizeof seq);
            char key[8];
            uint32_t partition;
            key_of(seq, key);
            CHECK(memq_key_partition((const uint8_t *)key, strlen(key), PARTITIONS, &partition));
            if (seq >= run->count || !matches(data, meta.len, seq) ||
                meta.partition != partition || meta.offset < next_offset[partition]) {
                FAIL("group message %" PRIu64 " wrong or out of order", seq);
            }
            next_offset[partition] = meta.offset + 1;
            pthread_mutex_lock(&run->lock);
            run->seen[seq]++;
            pthread_mutex_unlock(&run->lock);
            m->received++;
        }
        memq_message_free_many(msgs, n);
    }
    return NULL;
}

static void consumer_group(uint64_t count) {
    memq_topic_config config;
    CHECK(memq_topic_config_init(&config));
    config.capacity = 1024;
    config.partitions = PARTITIONS;

    struct group_run run = {.count = count};
    pthread_mutex_init(&run.lock, NULL);
    run.seen = calloc(count, 1);
    if (run.seen == NULL) {
        FAIL("out of memory");
    }
    CHECK(memq_topic_new(&config, &run.topic));

    struct member members[GROUP_MEMBERS];
    pthread_t threads[GROUP_MEMBERS], producer;
    for (int i = 0; i < GROUP_MEMBERS; i++) {
        members[i] = (struct member){.run = &run};
        CHECK(memq_consumer_new(run.topic, "workers", MEMQ_START_EARLIEST, 0,
                                &members[i].consumer));
    }
    for (int i = 0; i < GROUP_MEMBERS; i++) {
        if (pthread_create(&threads[i], NULL, group_consume, &members[i]) != 0) {
            FAIL("pthread_create");
        }
    }
    if (pthread_create(&producer, NULL, group_produce, &run) != 0) {
        FAIL("pthread_create");
    }
    pthread_join(producer, NULL);
    uint64_t total = 0;
    for (int i = 0; i < GROUP_MEMBERS; i++) {
        pthread_join(threads[i], NULL);
        total += members[i].received;
    }
    for (uint64_t seq = 0; seq < count; seq++) {
        if (run.seen[seq] != 1) {
            FAIL("group message %" PRIu64 " delivered %u times", seq, run.seen[seq]);
        }
    }
    memq_group_stats gs;
    CHECK(memq_topic_get_group_stats(run.topic, "workers", &gs));
    if (total != count || gs.delivered != count || gs.lag != 0) {
        FAIL("group received %" PRIu64 " of %" PRIu64, total, count);
    }
    printf("group: %d members on %d partitions received %" PRIu64
           " keyed messages, each exactly once, in partition order (",
           GROUP_MEMBERS, PARTITIONS, count);
    for (int i = 0; i < GROUP_MEMBERS; i++) {
        printf("%s%" PRIu64, i ? " + " : "", members[i].received);
    }
    printf(")\n");

    for (int i = 0; i < GROUP_MEMBERS; i++) {
        memq_consumer_free(members[i].consumer);
    }
    memq_topic_free(run.topic);
    free(run.seen);
    pthread_mutex_destroy(&run.lock);
}

/* A failed call says which argument was wrong and why: memq_last_error_message() (per
 * thread, valid until the next failing call on this thread), in the words of memq's Rust
 * errors. */
static void bad_arguments(void) {
    memq_topic_config config;
    memq_topic *topic = NULL;
    CHECK(memq_topic_config_init(&config));
    config.capacity = 0;
    memq_status st = memq_topic_new(&config, &topic);
    const char *detail = memq_last_error_message();
    if (st != MEMQ_STATUS_INVALID_ARGUMENT || topic != NULL ||
        strcmp(detail, "topic capacity must be at least 1") != 0) {
        FAIL("capacity 0: %s (%s)", memq_status_str(st), detail);
    }
    printf("capacity 0: %s: %s\n", memq_status_str(st), detail);

    config.capacity = 4;
    CHECK(memq_topic_new(&config, &topic));
    memq_slice items[5];
    for (size_t i = 0; i < 5; i++) {
        items[i].data = (const uint8_t *)"x";
        items[i].len = 1;
    }
    st = memq_topic_publish_batch(topic, items, 5, -1, NULL);
    if (st != MEMQ_STATUS_FULL) {
        FAIL("a batch over capacity: %s, expected FULL", memq_status_str(st));
    }
    printf("batch of 5 into capacity 4: %s: %s\n", memq_status_str(st),
           memq_last_error_message());
    st = memq_topic_get_stats(topic, NULL);
    if (st != MEMQ_STATUS_NULL_POINTER || strcmp(memq_last_error_message(), "stats_out is NULL")) {
        FAIL("NULL stats_out: %s (%s)", memq_status_str(st), memq_last_error_message());
    }
    memq_topic_free(topic);
}

int main(int argc, char **argv) {
    uint64_t count = 1000000;
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 10);
        if (*end != '\0' || count == 0) {
            fprintf(stderr, "usage: %s [MESSAGES]\n", argv[0]);
            return 2;
        }
    }
    printf("memq %s\n", memq_version());
    bad_arguments();
    pubsub_throughput(count, 0);
    pubsub_throughput(count, 1);
    consumer_group(count / 10 > 0 ? count / 10 : 1);
    printf("pubsub: all checks passed\n");
    return 0;
}
