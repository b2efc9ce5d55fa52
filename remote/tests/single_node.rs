//! The semantic scenarios against a single redis-server started by the test.

use crate::common;

use memq_redis::Redis;

macro_rules! scenario {
    ($name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(server) = common::server() else {
                return;
            };
            let redis = Redis::connect(&server.url()).await.unwrap();
            common::scenarios::$name(&redis, stringify!($name)).await;
        }
    };
}

scenario!(replay_and_routing);
scenario!(batches_and_errors);
scenario!(group_exactly_once);
scenario!(acks_and_redelivery);
scenario!(dead_letters);
scenario!(retention);
scenario!(start_past_end);
scenario!(in_flight_and_backoff);
scenario!(rebalance);
