// memq from C++: RAII wrappers over libmemq (std::unique_ptr with deleters, exceptions for
// failed calls) and a demo that checks every message it receives.
//
// Build (see scripts/checks/60-ffi.sh), linking the shared library with an rpath:
//   g++ -std=c++17 -Wall -Wextra -Werror -Iinclude examples/cpp/demo.cpp
//       -Ltarget/ci -lmemq -Wl,-rpath,$PWD/target/ci -pthread -o demo
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "memq.h"

namespace memq {

// A failed call: its status, what was called, and what memq said about it (the detail
// of the last failure on this thread, so an Error is made right after the failed call).
class Error : public std::runtime_error {
public:
    Error(memq_status status, const std::string &what)
        : std::runtime_error(what + ": " + memq_status_str(status) + ": " +
                             memq_last_error_message()),
          status_(status) {}
    memq_status status() const noexcept { return status_; }

private:
    memq_status status_;
};

inline void check(memq_status status, const char *what) {
    if (status != MEMQ_STATUS_OK) {
        throw Error(status, what);
    }
}

// One deleter for every handle type: each calls the matching memq_*_free.
struct Deleter {
    void operator()(memq_broker *p) const noexcept { memq_broker_free(p); }
    void operator()(memq_topic *p) const noexcept { memq_topic_free(p); }
    void operator()(memq_subscriber *p) const noexcept { memq_subscriber_free(p); }
    void operator()(memq_consumer *p) const noexcept { memq_consumer_free(p); }
    void operator()(memq_message *p) const noexcept { memq_message_free(p); }
};

template <typename T> using Handle = std::unique_ptr<T, Deleter>;

// A received message. Its payload is the one in the log (zero copy), valid while it lives.
class Message {
public:
    explicit Message(memq_message *m) : handle_(m) {
        check(memq_message_get_meta(m, &meta_), "memq_message_get_meta");
        check(memq_message_data(m, &data_), "memq_message_data");
    }
    std::string_view view() const {
        return {reinterpret_cast<const char *>(data_), meta_.len};
    }
    const uint8_t *data() const noexcept { return data_; }
    size_t size() const noexcept { return meta_.len; }
    uint64_t offset() const noexcept { return meta_.offset; }
    uint32_t partition() const noexcept { return meta_.partition; }
    std::optional<uint64_t> timestamp_ns() const {
        return meta_.has_timestamp ? std::optional<uint64_t>(meta_.timestamp_ns) : std::nullopt;
    }

private:
    Handle<memq_message> handle_;
    memq_message_meta meta_{};
    const uint8_t *data_ = nullptr;
};

// What a receive got: a message, or the status that explains why not (EMPTY, TIMEOUT,
// CLOSED, LAGGED with the number missed). Other failures throw.
struct Received {
    std::optional<Message> message;
    memq_status status = MEMQ_STATUS_OK;
    uint64_t lagged = 0;
};

inline Received received(memq_status st, memq_message *m, uint64_t lagged, const char *what) {
    switch (st) {
    case MEMQ_STATUS_OK:
        return {Message(m), st, 0};
    case MEMQ_STATUS_EMPTY:
    case MEMQ_STATUS_TIMEOUT:
    case MEMQ_STATUS_CLOSED:
    case MEMQ_STATUS_LAGGED:
        return {std::nullopt, st, lagged};
    default:
        throw Error(st, what);
    }
}

class Subscriber {
public:
    explicit Subscriber(memq_subscriber *s) : handle_(s) {}

    Received recv(int64_t timeout_ms) {
        memq_message *m = nullptr;
        uint64_t lagged = 0;
        memq_status st = memq_subscriber_recv(handle_.get(), timeout_ms, &m, &lagged);
        return received(st, m, lagged, "memq_subscriber_recv");
    }

    // Up to `max` messages, waiting up to `timeout_ms` for the first; empty if none came.
    std::vector<Message> recv_many(size_t max, int64_t timeout_ms) {
        std::vector<memq_message *> raw(max, nullptr);
        size_t n = 0;
        memq_status st = memq_subscriber_recv_many(handle_.get(), timeout_ms, raw.data(), max,
                                                   &n, nullptr);
        std::vector<Message> out;
        if (st == MEMQ_STATUS_OK) {
            try {
                out.reserve(n);
            } catch (...) {
                // Nothing owns the handles yet: free them before passing the error on.
                memq_message_free_many(raw.data(), n);
                throw;
            }
            // No allocation from here on. A Message that fails to read its handle frees
            // it as it unwinds; the handles after it are freed here.
            for (size_t i = 0; i < n; i++) {
                try {
                    out.emplace_back(raw[i]);
                } catch (...) {
                    memq_message_free_many(raw.data() + i + 1, n - i - 1);
                    throw;
                }
            }
        } else if (st != MEMQ_STATUS_EMPTY && st != MEMQ_STATUS_TIMEOUT) {
            throw Error(st, "memq_subscriber_recv_many");
        }
        return out;
    }

    // Receives into `buf`, growing it when the message does not fit (the library keeps
    // the message for the retry). Returns the payload's length.
    size_t recv_into(std::vector<uint8_t> &buf, int64_t timeout_ms, int &retries) {
        for (;;) {
            size_t len = 0;
            memq_status st = memq_subscriber_recv_into(handle_.get(), timeout_ms, buf.data(),
                                                       buf.size(), &len, nullptr, nullptr);
            if (st == MEMQ_STATUS_BUFFER_TOO_SMALL) {
                buf.resize(len);
                retries++;
                continue;
            }
            check(st, "memq_subscriber_recv_into");
            return len;
        }
    }

private:
    Handle<memq_subscriber> handle_;
};

class Consumer {
public:
    explicit Consumer(memq_consumer *c) : handle_(c) {}

    Received recv(int64_t timeout_ms) {
        memq_message *m = nullptr;
        uint64_t lagged = 0;
        memq_status st = memq_consumer_recv(handle_.get(), timeout_ms, &m, &lagged);
        return received(st, m, lagged, "memq_consumer_recv");
    }

private:
    Handle<memq_consumer> handle_;
};

class Topic {
public:
    explicit Topic(memq_topic *t) : handle_(t) {}

    static Topic create(const memq_topic_config &config) {
        memq_topic *t = nullptr;
        check(memq_topic_new(&config, &t), "memq_topic_new");
        return Topic(t);
    }

    memq_receipt publish(std::string_view payload, int64_t timeout_ms = -1) {
        memq_receipt r{};
        check(memq_topic_publish(handle_.get(), bytes(payload), payload.size(), timeout_ms, &r),
              "memq_topic_publish");
        return r;
    }

    memq_receipt publish_keyed(std::string_view key, std::string_view payload) {
        memq_receipt r{};
        check(memq_topic_publish_keyed(handle_.get(), bytes(key), key.size(), bytes(payload),
                                       payload.size(), -1, &r),
              "memq_topic_publish_keyed");
        return r;
    }

    memq_receipt publish_batch(const std::vector<std::string> &payloads) {
        std::vector<memq_slice> items;
        for (const auto &p : payloads) {
            items.push_back({bytes(p), p.size()});
        }
        memq_receipt r{};
        check(memq_topic_publish_batch(handle_.get(), items.data(), items.size(), -1, &r),
              "memq_topic_publish_batch");
        return r;
    }

    // Hands `frame` to memq without a copy; it is destroyed (on whichever thread lets go
    // last) once no reader needs it. `on_release` runs just before.
    memq_receipt publish_owned(std::vector<uint8_t> frame, std::atomic<int> *on_release) {
        auto owned = std::make_unique<Owned>(Owned{std::move(frame), on_release});
        memq_receipt r{};
        memq_status st = memq_topic_publish_owned(handle_.get(), owned->frame.data(),
                                                  owned->frame.size(), &Owned::release,
                                                  owned.get(), -1, &r);
        // Only a published frame is memq's; a failed publish leaves it here, and the
        // unique_ptr frees it as the exception leaves.
        if (st == MEMQ_STATUS_OK) {
            owned.release();
        }
        check(st, "memq_topic_publish_owned");
        return r;
    }

    Subscriber subscribe(memq_start start, uint64_t offset = 0) {
        memq_subscriber *s = nullptr;
        check(memq_subscriber_new(handle_.get(), start, offset, &s), "memq_subscriber_new");
        return Subscriber(s);
    }

    Consumer join(const std::string &group) {
        memq_consumer *c = nullptr;
        check(memq_consumer_new(handle_.get(), group.c_str(), MEMQ_START_EARLIEST, 0, &c),
              "memq_consumer_new");
        return Consumer(c);
    }

    memq_topic_stats stats() const {
        memq_topic_stats s{};
        check(memq_topic_get_stats(handle_.get(), &s), "memq_topic_get_stats");
        return s;
    }

    void close() { check(memq_topic_close(handle_.get()), "memq_topic_close"); }

private:
    struct Owned {
        std::vector<uint8_t> frame;
        std::atomic<int> *released;

        static void release(void *user_data, const uint8_t *, size_t) {
            auto *owned = static_cast<Owned *>(user_data);
            owned->released->fetch_add(1);
            delete owned;
        }
    };

    static const uint8_t *bytes(std::string_view s) {
        return reinterpret_cast<const uint8_t *>(s.data());
    }

    Handle<memq_topic> handle_;
};

class Broker {
public:
    Broker() {
        memq_broker *b = nullptr;
        check(memq_broker_new(&b), "memq_broker_new");
        handle_.reset(b);
    }

    Topic create(const std::string &name, const memq_topic_config &config) {
        memq_topic *t = nullptr;
        check(memq_broker_create_topic(handle_.get(), name.c_str(), &config, &t),
              "memq_broker_create_topic");
        return Topic(t);
    }

    Topic get(const std::string &name) {
        memq_topic *t = nullptr;
        check(memq_broker_get_topic(handle_.get(), name.c_str(), &t), "memq_broker_get_topic");
        return Topic(t);
    }

private:
    Handle<memq_broker> handle_;
};

inline memq_topic_config config(size_t capacity, uint32_t partitions = 1,
                                memq_overflow overflow = MEMQ_OVERFLOW_BLOCK) {
    memq_topic_config c{};
    check(memq_topic_config_init(&c), "memq_topic_config_init");
    c.capacity = capacity;
    c.partitions = partitions;
    c.overflow = overflow;
    return c;
}

} // namespace memq

static void require(bool ok, const std::string &what) {
    if (!ok) {
        throw std::runtime_error("check failed: " + what);
    }
}

// Large frames published without a copy, read by two subscribers that see the very same
// bytes, each released once when nothing needs it any more.
static void zero_copy_frames() {
    std::atomic<int> released{0};
    std::vector<const uint8_t *> addresses;
    std::optional<memq::Message> last; // outlives the topic and the broker
    {
        memq::Broker broker;
        auto c = memq::config(8);
        c.flags = MEMQ_TOPIC_TIMESTAMPS;
        memq::Topic frames = broker.create("frames", c);
        memq::Subscriber a = broker.get("frames").subscribe(MEMQ_START_EARLIEST);
        memq::Subscriber b = frames.subscribe(MEMQ_START_EARLIEST);
        for (uint8_t i = 0; i < 3; i++) {
            std::vector<uint8_t> frame(1 << 20, i);
            addresses.push_back(frame.data());
            frames.publish_owned(std::move(frame), &released);
        }
        for (uint8_t i = 0; i < 3; i++) {
            for (memq::Subscriber *s : {&a, &b}) {
                memq::Received r = s->recv(0);
                require(r.message.has_value(), "frame received");
                const memq::Message &m = *r.message;
                require(m.data() == addresses[i], "the reader sees the publisher's own bytes");
                require(m.size() == (1u << 20) && m.data()[12345] == i, "frame contents");
                require(m.offset() == i && m.timestamp_ns().has_value(), "frame metadata");
                if (i == 2 && s == &b) {
                    last = std::move(r.message);
                }
            }
        }
        require(released.load() == 0, "nothing released while the log holds the frames");
    }
    require(released.load() == 2, "frames no message holds are released with the topic");
    require(last->data()[0] == 2 && last->data()[(1 << 20) - 1] == 2, "a held frame stays valid");
    last.reset();
    require(released.load() == 3, "each frame released exactly once");
    std::printf("zero copy: 3 frames of 1 MiB read by 2 subscribers in the publisher's own "
                "memory, each released exactly once\n");
}

// Keyed orders on a partitioned topic, shared by two members of a group on two threads.
static void keyed_group() {
    memq::Topic orders = memq::Topic::create(memq::config(64, 4));
    memq::Consumer members[] = {orders.join("billing"), orders.join("billing")};
    std::set<std::string> sent;
    for (int i = 0; i < 40; i++) {
        std::string key = "customer-" + std::to_string(i % 8);
        std::string payload = key + "/order-" + std::to_string(i);
        memq_receipt r = orders.publish_keyed(key, payload);
        uint32_t want = 0;
        memq::check(memq_key_partition(reinterpret_cast<const uint8_t *>(key.data()), key.size(),
                                       4, &want),
                    "memq_key_partition");
        require(r.partition == want, "a key lands on its partition");
        sent.insert(payload);
    }
    orders.close();
    std::vector<std::string> got[2];
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; i++) {
        threads.emplace_back([&, i] {
            for (;;) {
                memq::Received r = members[i].recv(-1);
                if (r.status == MEMQ_STATUS_CLOSED) {
                    return;
                }
                got[i].emplace_back(r.message.value().view());
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    std::set<std::string> all(got[0].begin(), got[0].end());
    all.insert(got[1].begin(), got[1].end());
    require(got[0].size() + got[1].size() == sent.size() && all == sent,
            "every order delivered to exactly one member");
    std::printf("group: 40 keyed orders on 4 partitions, %zu + %zu to two members, each "
                "exactly once\n",
                got[0].size(), got[1].size());
}

// A batch in, batches out, and a receive into a buffer that grows when a message does not
// fit (the library keeps the message for the retry).
static void batches_and_buffers() {
    memq::Topic t = memq::Topic::create(memq::config(128));
    memq::Subscriber s = t.subscribe(MEMQ_START_EARLIEST);
    std::vector<std::string> batch;
    for (int i = 0; i < 100; i++) {
        batch.push_back("batch message " + std::to_string(i) + std::string(size_t(i), '.'));
    }
    require(t.publish_batch(batch).offset == 0, "a batch's receipt is its first offset");
    size_t got = 0;
    while (got < batch.size()) {
        std::vector<memq::Message> msgs = s.recv_many(32, 0);
        require(!msgs.empty() && msgs.size() <= 32, "a batch of at most 32");
        for (const memq::Message &m : msgs) {
            require(m.view() == batch[got] && m.offset() == got, "batch message in order");
            got++;
        }
    }
    t.publish(std::string(5000, 'x'));
    std::vector<uint8_t> buf(16);
    int retries = 0;
    size_t len = s.recv_into(buf, 0, retries);
    require(len == 5000 && retries == 1, "BUFFER_TOO_SMALL once, then the same message");
    require(std::string(buf.begin(), buf.begin() + 5000) == std::string(5000, 'x'),
            "copied payload");
    std::printf("batches: 100 messages in one batch, read back in batches of up to 32; a 5000-byte "
                "message into a 16-byte buffer after one retry\n");
}

// A DROP_OLDEST topic tells a slow reader how much it missed, and counts it.
static void lag_and_stats() {
    memq::Topic t = memq::Topic::create(memq::config(4, 1, MEMQ_OVERFLOW_DROP_OLDEST));
    memq::Subscriber s = t.subscribe(MEMQ_START_EARLIEST);
    for (int i = 0; i < 10; i++) {
        t.publish("m" + std::to_string(i));
    }
    memq::Received r = s.recv(0);
    require(r.status == MEMQ_STATUS_LAGGED && r.lagged == 6, "lagged by 6");
    for (int i = 6; i < 10; i++) {
        r = s.recv(0);
        require(r.message && r.message->view() == "m" + std::to_string(i), "the retained ones");
    }
    require(s.recv(0).status == MEMQ_STATUS_EMPTY, "then nothing");
    require(s.recv(10).status == MEMQ_STATUS_TIMEOUT, "and a wait times out");
    memq_topic_stats st = t.stats();
    require(st.published == 10 && st.evicted == 6 && st.depth == 4, "stats");
    std::printf("lag: a reader 6 behind is told so; stats: %llu published, %llu evicted, %llu "
                "retained\n",
                (unsigned long long)st.published, (unsigned long long)st.evicted,
                (unsigned long long)st.depth);
}

int main() {
    try {
        std::printf("memq %s\n", memq_version());
        zero_copy_frames();
        keyed_group();
        batches_and_buffers();
        lag_and_stats();
        std::printf("demo: all checks passed\n");
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "demo: %s\n", e.what());
        return 1;
    }
}
