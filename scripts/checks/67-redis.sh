# memq-redis (remote/): memq's topics on Redis Streams, tested against real servers that
# the tests start themselves on free ports of 127.0.0.1 (single nodes, and a 3-master
# Redis Cluster for the partition tests), in directories under a run directory of this
# stage. redis-server and redis-cli come from Debian's packages. A missing server is a
# loud skip of this stage, never a pass: with MEMQ_REDIS_REQUIRED set, a test that cannot
# start its server fails.

if ! ensure_apt redis-server redis-server || ! ensure_apt redis-tools redis-cli; then
    skip "memq-redis against Redis (stage 67-redis)" \
        "redis-server or redis-cli missing and apt-get cannot install them"
    return 0
fi
note "$(redis-server --version)"

export MEMQ_REDIS_REQUIRED=1
MEMQ_REDIS_RUN_DIR=$(mktemp -d)
export MEMQ_REDIS_RUN_DIR
# Servers stop themselves when their test ends; a test process killed on a timeout cannot,
# so each server's pid file (under the run directory) is used to stop it here, by pid.
redis_cleanup() {
    local f pid
    for f in "$MEMQ_REDIS_RUN_DIR"/*/redis.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
            echo "stopping redis-server $pid left by a killed test"
            kill -9 "$pid" || true
        fi
    done
    rm -rf "$MEMQ_REDIS_RUN_DIR"
}
trap redis_cleanup EXIT

# Semantics (single node and cluster), members in three processes, the SIGKILL fault
# test, the bridges; then the doc tests.
run cargo test -p memq-redis --features testing --all-targets --profile "$MEMQ_PROFILE" --no-run
bounded 600 cargo test -p memq-redis --features testing --all-targets --profile "$MEMQ_PROFILE"
bounded 300 cargo test -p memq-redis --features testing --doc --profile "$MEMQ_PROFILE"
# The same worker program in memory, on a durable topic and on Redis.
bounded 300 cargo run -p memq-redis --features testing --profile "$MEMQ_PROFILE" --example redis_worker
# The publish benchmark, once, small: it runs; its figures are docs/BENCHMARKS.md's.
bounded 300 cargo run -p memq-redis --features testing --profile "$MEMQ_PROFILE" --example redis_bench -- --quick
