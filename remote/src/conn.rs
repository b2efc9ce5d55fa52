//! Connections: [`Redis`], a handle on one Redis server or one Redis Cluster, and the
//! connections made from it. Shared commands go over one multiplexed connection that
//! reconnects with backoff on its own; each blocking reader (a partition of a subscriber
//! or a group member) gets a connection of its own, so that `XREAD BLOCK` holds up
//! nothing else.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, Pipeline, RedisResult};

use crate::Error;

/// How long a command may take before it counts as failed (a blocking read is given its
/// own block time on top of this).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A handle on a Redis server or a Redis Cluster; cheap to clone (clones share two
/// multiplexed connections).
///
/// Connections reconnect with exponential backoff (from 100 ms, up to 2 s) when the
/// server goes away: a command that fails meanwhile returns its error (a publish hands
/// its messages back in [`PublishError`](crate::PublishError)); readers reconnect on
/// their own and resume from their group's position.
#[derive(Clone)]
pub struct Redis {
    inner: Arc<Inner>,
}

struct Inner {
    kind: Kind,
    /// Shared connections, taken in turn: a multiplexed connection has one task that
    /// encodes and decodes for every caller, so two share that work over two threads.
    conns: Vec<Conn>,
    next: std::sync::atomic::AtomicUsize,
}

/// Shared connections per handle.
const SHARED: usize = 2;

enum Kind {
    Single(redis::Client),
    Cluster(Box<ClusterClient>),
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.inner.kind {
            Kind::Single(c) => format!("single {}", c.get_connection_info().addr()),
            Kind::Cluster(_) => "cluster".to_string(),
        };
        f.debug_struct("Redis").field("kind", &kind).finish()
    }
}

impl Redis {
    /// Connects to one Redis server, for example `redis://127.0.0.1:6379/`.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if the URL is bad or the server cannot be reached now.
    pub async fn connect(url: &str) -> Result<Redis, Error> {
        let client = redis::Client::open(url)?;
        let mut conns = Vec::with_capacity(SHARED);
        for _ in 0..SHARED {
            conns.push(Conn::Single(manager(&client, RESPONSE_TIMEOUT).await?));
        }
        Ok(Redis {
            inner: Arc::new(Inner {
                kind: Kind::Single(client),
                conns,
                next: Default::default(),
            }),
        })
    }

    /// Connects to a Redis Cluster through any of its nodes (`redis://127.0.0.1:7000/`,
    /// ...). Each partition of a topic is a stream with a hash tag of its own, so the
    /// partitions spread over the cluster's masters.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if no node can be reached now.
    pub async fn connect_cluster(urls: &[String]) -> Result<Redis, Error> {
        let client = cluster_client(urls)?;
        let mut conns = Vec::with_capacity(SHARED);
        for _ in 0..SHARED {
            conns.push(Conn::Cluster(client.get_async_connection().await?));
        }
        Ok(Redis {
            inner: Arc::new(Inner {
                kind: Kind::Cluster(Box::new(client)),
                conns,
                next: Default::default(),
            }),
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.kind, Kind::Cluster(_))
    }

    /// A shared connection (the next in turn).
    pub(crate) fn conn(&self) -> Conn {
        let n = self
            .inner
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.conns[n % self.inner.conns.len()].clone()
    }

    /// A connection of its own for a blocking reader that blocks for up to `block`.
    pub(crate) async fn dedicated(&self, block: Duration) -> Result<Conn, Error> {
        let timeout = RESPONSE_TIMEOUT + block;
        Ok(match &self.inner.kind {
            Kind::Single(client) => Conn::Single(manager(client, timeout).await?),
            Kind::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_response_timeout(timeout)
                    .set_connection_timeout(CONNECT_TIMEOUT);
                Conn::Cluster(client.get_async_connection_with_config(config).await?)
            }
        })
    }
}

fn cluster_client(urls: &[String]) -> Result<ClusterClient, Error> {
    if urls.is_empty() {
        return Err(Error::InvalidArgument(
            "a cluster needs at least one node URL",
        ));
    }
    Ok(ClusterClient::builder(urls.iter().map(String::as_str))
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retries(6)
        .min_retry_wait(100)
        .max_retry_wait(2000)
        .build()?)
}

async fn manager(client: &redis::Client, timeout: Duration) -> RedisResult<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_min_delay(Duration::from_millis(100))
        .set_max_delay(Duration::from_secs(2))
        .set_number_of_retries(6);
    client.get_connection_manager_with_config(config).await
}

/// One connection, to a single node or to a cluster (routed by key).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    pub(crate) async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Conn::Single(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => cmd.query_async(c).await,
        }
    }

    pub(crate) async fn pipe<T: FromRedisValue>(&mut self, pipe: &Pipeline) -> RedisResult<T> {
        match self {
            Conn::Single(c) => pipe.query_async(c).await,
            Conn::Cluster(c) => pipe.query_async(c).await,
        }
    }
}
