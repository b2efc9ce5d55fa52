/*
 * memq from C: at-least-once work with an explicit-ack group and a dead-letter topic.
 *
 * A producer publishes keyed jobs to the topic "orders" (a broker topic with four
 * partitions); three workers of the explicit-ack group "workers" settle each delivery
 * according to the job's number:
 *
 *   seq % 10 == 3  poison:      nacked every time; after max_deliveries (3) attempts it is
 *                               dead-lettered (reason MAX_DELIVERIES, 3 deliveries)
 *   seq % 10 == 7  rejected:    rejected at once (reason REJECTED, 1 delivery)
 *   seq % 10 == 1  nacked once: nacked on delivery 1 (group backoff), acked on delivery 2
 *   seq % 10 == 5  dropped:     freed unsettled on delivery 1, touched and acked on 2
 *   seq % 10 == 9  delayed:     nacked for 2 ms on delivery 1, acked on delivery 2
 *   otherwise      acked at once on delivery 1
 *
 * A reader of the dead-letter topic collects every dead letter with its origin. At the
 * end every job is checked: its payload on every delivery, the deliveries it got (each
 * attempt number exactly once), acked exactly once or dead-lettered exactly once with the
 * right reason, origin topic, group, partition and offset; and the group's counters.
 *
 * Usage: acks [MESSAGES]   (default 100000; the check script uses fewer under valgrind).
 * Exits 0 only if every check passed.
 *
 * Build (see scripts/checks/60-ffi.sh):
 *   gcc -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/acks.c \
 *       target/ci/libmemq.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o acks
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memq.h"

#define MSG_LEN 32
#define WORKERS 3
#define PARTITIONS 4
#define KEYS 16
#define MAX_DELIVERIES 3

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
        fprintf(stderr, "acks: check failed: " __VA_ARGS__);                               \
        fputc('\n', stderr);                                                               \
        exit(1);                                                                           \
    } while (0)

enum fate { ACK, POISON, REJECT, NACK_ONCE, DROP_ONCE, DELAY_ONCE };

static enum fate fate_of(uint64_t seq) {
    switch (seq % 10) {
    case 3: return POISON;
    case 7: return REJECT;
    case 1: return NACK_ONCE;
    case 5: return DROP_ONCE;
    case 9: return DELAY_ONCE;
    default: return ACK;
    }
}

/* How many deliveries each fate gets. */
static uint32_t deliveries_of(enum fate f) {
    switch (f) {
    case POISON: return MAX_DELIVERIES;
    case NACK_ONCE:
    case DROP_ONCE:
    case DELAY_ONCE: return 2;
    default: return 1;
    }
}

static void fill(uint8_t *buf, uint64_t seq) {
    memcpy(buf, &seq, sizeof seq);
    for (size_t i = sizeof seq; i < MSG_LEN; i++) {
        buf[i] = (uint8_t)(seq * 7u + i * 13u);
    }
}

static int matches(const uint8_t *buf, size_t len, uint64_t seq) {
    uint8_t want[MSG_LEN];
    fill(want, seq);
    return len == MSG_LEN && memcmp(buf, want, MSG_LEN) == 0;
}

static void key_of(uint64_t seq, char key[8]) {
    snprintf(key, 8, "k%02u", (unsigned)(seq % KEYS));
}

/* What happened to each job, filled in by the threads. */
struct run {
    memq_topic *topic;
    memq_dead_letter_topic *dlq;
    memq_dead_letter_subscriber *dlq_reader;
    uint64_t count;
    pthread_mutex_t lock;
    memq_receipt *receipts;  /* where each job was published */
    uint8_t *attempts_seen;  /* bit n-1: delivery n was seen */
    uint8_t *deliveries;     /* deliveries received */
    uint8_t *acked;          /* successful acks */
    uint8_t *dead;           /* dead letters received */
    uint32_t *dead_reason;
    uint32_t *dead_deliveries;
    uint64_t *dead_origin_offset;
    uint32_t *dead_origin_partition;
    uint64_t lease_checks;   /* settling calls that correctly reported a spent lease */
};

struct worker {
    struct run *run;
    memq_ack_consumer *consumer;
    uint64_t settled;
};

static void *produce(void *arg) {
    struct run *run = arg;
    uint8_t buf[MSG_LEN];
    for (uint64_t seq = 0; seq < run->count; seq++) {
        char key[8];
        key_of(seq, key);
        fill(buf, seq);
        memq_receipt receipt;
        CHECK(memq_topic_publish_keyed(run->topic, (const uint8_t *)key, strlen(key), buf,
                                       MSG_LEN, -1, &receipt));
        pthread_mutex_lock(&run->lock);
        run->receipts[seq] = receipt;
        pthread_mutex_unlock(&run->lock);
    }
    /* Workers finish once every job is acked or dead-lettered. */
    CHECK(memq_topic_close(run->topic));
    return NULL;
}

static void *work(void *arg) {
    struct worker *w = arg;
    struct run *run = w->run;
    for (;;) {
        memq_delivery *d = NULL;
        memq_status st = memq_ack_consumer_recv(w->consumer, 100, &d, NULL);
        if (st == MEMQ_STATUS_CLOSED) {
            break;
        }
        if (st == MEMQ_STATUS_TIMEOUT) {
            continue;
        }
        CHECK(st);
        const uint8_t *data;
        memq_message_meta meta;
        uint32_t n;
        CHECK(memq_delivery_data(d, &data));
        CHECK(memq_delivery_get_meta(d, &meta));
        CHECK(memq_delivery_deliveries(d, &n));
        uint64_t seq;
        if (meta.len != MSG_LEN) {
            FAIL("delivery of %zu bytes", meta.len);
        }
        memcpy(&seq, data, sizeof seq);
        char key[8];
        uint32_t partition;
        key_of(seq, key);
        CHECK(memq_key_partition((const uint8_t *)key, strlen(key), PARTITIONS, &partition));
        if (seq >= run->count || !matches(data, meta.len, seq) || meta.partition != partition) {
            FAIL("job %" PRIu64 " delivered wrong", seq);
        }
        enum fate f = fate_of(seq);
        if (n < 1 || n > deliveries_of(f)) {
            FAIL("job %" PRIu64 " delivered for the %u. time", seq, n);
        }
        pthread_mutex_lock(&run->lock);
        if (run->attempts_seen[seq] & (1u << (n - 1))) {
            FAIL("job %" PRIu64 ": delivery %u seen twice", seq, n);
        }
        run->attempts_seen[seq] |= (uint8_t)(1u << (n - 1));
        run->deliveries[seq]++;
        pthread_mutex_unlock(&run->lock);

        int acked = 0;
        switch (f) {
        case ACK:
            CHECK(memq_delivery_ack(d));
            acked = 1;
            if (seq % 64 == 0) {
                /* Settled once: the lease is spent. */
                EXPECT(memq_delivery_ack(d), MEMQ_STATUS_LEASE_EXPIRED);
                EXPECT(memq_delivery_nack(d), MEMQ_STATUS_LEASE_EXPIRED);
                pthread_mutex_lock(&run->lock);
                run->lease_checks++;
                pthread_mutex_unlock(&run->lock);
            }
            break;
        case POISON:
            CHECK(memq_delivery_nack(d));
            break;
        case REJECT:
            CHECK(memq_delivery_reject(d));
            EXPECT(memq_delivery_touch(d), MEMQ_STATUS_LEASE_EXPIRED);
            break;
        case NACK_ONCE:
            if (n == 1) {
                CHECK(memq_delivery_nack(d));
            } else {
                CHECK(memq_delivery_ack(d));
                acked = 1;
            }
            break;
        case DROP_ONCE:
            if (n == 1) {
                /* Freed below without settling: the message goes back to the group. */
            } else {
                CHECK(memq_delivery_touch(d));
                CHECK(memq_delivery_ack(d));
                acked = 1;
            }
            break;
        case DELAY_ONCE:
            if (n == 1) {
                CHECK(memq_delivery_nack_after(d, 2));
            } else {
                CHECK(memq_delivery_ack(d));
                acked = 1;
            }
            break;
        }
        /* The payload stays readable after the lease is settled, until the free. */
        const uint8_t *again;
        CHECK(memq_delivery_data(d, &again));
        if (again != data || !matches(again, MSG_LEN, seq)) {
            FAIL("job %" PRIu64 ": payload changed after settling", seq);
        }
        memq_delivery_free(d);
        if (acked) {
            pthread_mutex_lock(&run->lock);
            run->acked[seq]++;
            pthread_mutex_unlock(&run->lock);
        }
        w->settled++;
    }
    return NULL;
}

static void *read_dead_letters(void *arg) {
    struct run *run = arg;
    memq_dead_letter_subscriber *sub = run->dlq_reader;
    uint64_t expected_offset = 0;
    for (;;) {
        memq_dead_letter *letter = NULL;
        memq_status st = memq_dead_letter_subscriber_recv(sub, -1, &letter, NULL);
        if (st == MEMQ_STATUS_CLOSED) {
            break;
        }
        CHECK(st);
        memq_dead_letter_info info;
        const uint8_t *data;
        CHECK(memq_dead_letter_get_info(letter, &info));
        CHECK(memq_dead_letter_data(letter, &data));
        uint64_t seq;
        if (info.len != MSG_LEN) {
            FAIL("dead letter of %zu bytes", info.len);
        }
        memcpy(&seq, data, sizeof seq);
        if (seq >= run->count || !matches(data, info.len, seq)) {
            FAIL("dead letter with a wrong payload");
        }
        if (info.topic == NULL || strcmp(info.topic, "orders") != 0 || info.group == NULL ||
            strcmp(info.group, "workers") != 0) {
            FAIL("dead letter of job %" PRIu64 " from topic %s, group %s", seq,
                 info.topic ? info.topic : "(none)", info.group ? info.group : "(none)");
        }
        if (info.partition != 0 || info.offset != expected_offset++) {
            FAIL("dead letter at %u/%" PRIu64, info.partition, info.offset);
        }
        pthread_mutex_lock(&run->lock);
        run->dead[seq]++;
        run->dead_reason[seq] = info.reason;
        run->dead_deliveries[seq] = info.deliveries;
        run->dead_origin_offset[seq] = info.origin_offset;
        run->dead_origin_partition[seq] = info.origin_partition;
        pthread_mutex_unlock(&run->lock);
        memq_dead_letter_free(letter);
    }
    return NULL;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (p == NULL) {
        FAIL("out of memory");
    }
    return p;
}

int main(int argc, char **argv) {
    uint64_t count = 100000;
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 10);
        if (*end != '\0' || count == 0) {
            fprintf(stderr, "usage: %s [MESSAGES]\n", argv[0]);
            return 2;
        }
    }
    printf("memq %s\n", memq_version());

    struct run run = {.count = count};
    pthread_mutex_init(&run.lock, NULL);
    run.receipts = xcalloc(count, sizeof *run.receipts);
    run.attempts_seen = xcalloc(count, 1);
    run.deliveries = xcalloc(count, 1);
    run.acked = xcalloc(count, 1);
    run.dead = xcalloc(count, 1);
    run.dead_reason = xcalloc(count, sizeof *run.dead_reason);
    run.dead_deliveries = xcalloc(count, sizeof *run.dead_deliveries);
    run.dead_origin_offset = xcalloc(count, sizeof *run.dead_origin_offset);
    run.dead_origin_partition = xcalloc(count, sizeof *run.dead_origin_partition);

    /* The jobs topic, registered in a broker so that dead letters carry its name. */
    memq_broker *broker;
    memq_topic_config config;
    CHECK(memq_broker_new(&broker));
    CHECK(memq_topic_config_init(&config));
    config.capacity = 1024;
    config.partitions = PARTITIONS;
    CHECK(memq_broker_create_topic(broker, "orders", &config, &run.topic));

    /* The dead-letter topic: one partition, read as it fills, with room for every dead
     * letter of the run (2 jobs in 10), so that a slow reader never fills it: a rejected
     * job whose dead letter finds the topic full goes back to the group instead. */
    memq_topic_config dlq_config;
    CHECK(memq_topic_config_init(&dlq_config));
    dlq_config.capacity = count / 5 + 1;
    CHECK(memq_dead_letter_topic_new(&dlq_config, &run.dlq));
    /* Subscribed before any job runs: under MEMQ_OVERFLOW_BLOCK no dead letter is lost. */
    CHECK(memq_dead_letter_subscriber_new(run.dlq, MEMQ_START_EARLIEST, 0, &run.dlq_reader));

    memq_ack_config ack;
    CHECK(memq_ack_config_init(&ack));
    ack.max_deliveries = MAX_DELIVERIES;
    ack.backoff = MEMQ_BACKOFF_EXPONENTIAL;
    ack.backoff_initial_ms = 1;
    ack.backoff_max_ms = 8;
    ack.max_in_flight = 64;
    ack.dead_letter = run.dlq;

    struct worker workers[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (struct worker){.run = &run};
        CHECK(memq_ack_consumer_new(run.topic, "workers", MEMQ_START_EARLIEST, 0, &ack,
                                    &workers[i].consumer));
    }
    /* The group's mode is fixed: an automatic-commit member cannot join it. */
    memq_consumer *wrong = NULL;
    EXPECT(memq_consumer_new(run.topic, "workers", MEMQ_START_EARLIEST, 0, &wrong),
           MEMQ_STATUS_GROUP_MODE_MISMATCH);

    pthread_t threads[WORKERS], producer, dead_reader;
    if (pthread_create(&dead_reader, NULL, read_dead_letters, &run) != 0) {
        FAIL("pthread_create");
    }
    for (int i = 0; i < WORKERS; i++) {
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0) {
            FAIL("pthread_create");
        }
    }
    if (pthread_create(&producer, NULL, produce, &run) != 0) {
        FAIL("pthread_create");
    }
    pthread_join(producer, NULL);
    uint64_t settled = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(threads[i], NULL);
        settled += workers[i].settled;
    }
    /* Every job is settled: the dead-letter reader may finish once it has read them. */
    CHECK(memq_dead_letter_topic_close(run.dlq));
    pthread_join(dead_reader, NULL);

    /* Every job, checked. */
    uint64_t want_acked = 0, want_dead = 0, want_redelivered = 0, want_deliveries = 0;
    for (uint64_t seq = 0; seq < count; seq++) {
        enum fate f = fate_of(seq);
        uint32_t n = deliveries_of(f);
        want_deliveries += n;
        want_redelivered += n - 1;
        if (run.deliveries[seq] != n || run.attempts_seen[seq] != (uint8_t)((1u << n) - 1)) {
            FAIL("job %" PRIu64 " delivered %u times (attempts 0x%x), expected %u", seq,
                 run.deliveries[seq], run.attempts_seen[seq], n);
        }
        if (f == POISON || f == REJECT) {
            want_dead++;
            uint32_t reason = f == POISON ? MEMQ_DEAD_LETTER_REASON_MAX_DELIVERIES
                                          : MEMQ_DEAD_LETTER_REASON_REJECTED;
            if (run.acked[seq] != 0 || run.dead[seq] != 1 || run.dead_reason[seq] != reason ||
                run.dead_deliveries[seq] != n ||
                run.dead_origin_offset[seq] != run.receipts[seq].offset ||
                run.dead_origin_partition[seq] != run.receipts[seq].partition) {
                FAIL("job %" PRIu64 ": acked %u, dead-lettered %u (reason %u, %u deliveries,"
                     " from %u/%" PRIu64 ")",
                     seq, run.acked[seq], run.dead[seq], run.dead_reason[seq],
                     run.dead_deliveries[seq], run.dead_origin_partition[seq],
                     run.dead_origin_offset[seq]);
            }
        } else {
            want_acked++;
            if (run.acked[seq] != 1 || run.dead[seq] != 0) {
                FAIL("job %" PRIu64 ": acked %u times, dead-lettered %u times", seq,
                     run.acked[seq], run.dead[seq]);
            }
        }
    }
    if (settled != want_deliveries) {
        FAIL("%" PRIu64 " deliveries handled, expected %" PRIu64, settled, want_deliveries);
    }
    memq_ack_group_stats gs;
    CHECK(memq_topic_get_ack_group_stats(run.topic, "workers", &gs));
    if (gs.acked != want_acked || gs.dead_lettered != want_dead || gs.in_flight != 0 ||
        gs.redelivered != want_redelivered || gs.members != WORKERS || gs.lag != 0) {
        FAIL("group stats: acked %" PRIu64 " dead %" PRIu64 " in flight %" PRIu64
             " redelivered %" PRIu64 " members %zu lag %" PRIu64,
             gs.acked, gs.dead_lettered, gs.in_flight, gs.redelivered, gs.members, gs.lag);
    }
    memq_topic_stats ds;
    CHECK(memq_dead_letter_topic_get_stats(run.dlq, &ds));
    if (ds.published != want_dead) {
        FAIL("dead-letter topic got %" PRIu64 " letters, expected %" PRIu64, ds.published,
             want_dead);
    }
    printf("acks: %d workers settled %" PRIu64 " jobs in %" PRIu64
           " deliveries: %" PRIu64 " acked exactly once (",
           WORKERS, count, want_deliveries, want_acked);
    for (int i = 0; i < WORKERS; i++) {
        printf("%s%" PRIu64, i ? " + " : "", workers[i].settled);
    }
    printf(" deliveries), %" PRIu64 " redelivered, %" PRIu64
           " dead-lettered with their origin, %" PRIu64 " spent leases refused\n",
           want_redelivered, want_dead, run.lease_checks);

    for (int i = 0; i < WORKERS; i++) {
        memq_ack_consumer_free(workers[i].consumer);
    }
    memq_dead_letter_subscriber_free(run.dlq_reader);
    memq_dead_letter_topic_free(run.dlq);
    memq_topic_free(run.topic);
    memq_broker_free(broker);
    free(run.receipts);
    free(run.attempts_seen);
    free(run.deliveries);
    free(run.acked);
    free(run.dead);
    free(run.dead_reason);
    free(run.dead_deliveries);
    free(run.dead_origin_offset);
    free(run.dead_origin_partition);
    pthread_mutex_destroy(&run.lock);
    printf("acks: all checks passed\n");
    return 0;
}
