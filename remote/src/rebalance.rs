//! Partition ownership for a group's members ([`GroupConfig::rebalance`]): who is in the
//! group, which partitions each member owns, and the hand-over when members join or
//! leave. Owns the member hash and the owner keys of a group in Redis, and each
//! member's coordinator task, which starts and stops that member's partition readers
//! (`group::read_group`); knows nothing of leases or deliveries.
//!
//! In Redis, with the topic's hash tag (one slot, so one script sees them all on a
//! cluster): `memq:{topic}:group:<group>:members`, a hash of member name → expiry (ms,
//! the server's clock), and `memq:{topic}:group:<group>:owner:<p>`, the name of the
//! member that owns partition `p`, expiring after the session. Every `session / 4` each
//! member runs one script that renews its entry, drops expired ones, deals the partitions
//! out over the live members in name order (partition `p` to the `p mod k`-th), and takes
//! or renews the owner keys of its own that are free or already its own. A partition
//! dealt to another member is given up only after this member's reader of it stopped;
//! its new owner takes it at its next heartbeat.
//!
//! [`GroupConfig::rebalance`]: crate::GroupConfig::rebalance

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::group::{read_group, Ctx};
use crate::rt::Task;
use crate::subscriber::backoff;
use crate::{Error, RedisDelivery};

/// Heartbeats this member, deals the partitions out, and takes or renews its own
/// owner keys. Returns the partitions it owns, and those it owns but must give up.
const HEARTBEAT_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1]
local session = tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  if all[i] ~= me then
    if tonumber(all[i + 1]) <= now then
      redis.call('HDEL', KEYS[1], all[i])
    else
      table.insert(live, all[i])
    end
  end
end
if ARGV[3] == 'leave' then
  redis.call('HDEL', KEYS[1], me)
  for p = 2, #KEYS do
    if redis.call('GET', KEYS[p]) == me then redis.call('DEL', KEYS[p]) end
  end
  return {{}, {}}
end
redis.call('HSET', KEYS[1], me, now + session)
redis.call('PEXPIRE', KEYS[1], session * 2)
table.insert(live, me)
table.sort(live)
local index = 0
for i, m in ipairs(live) do
  if m == me then index = i - 1 end
end
local owned, release = {}, {}
for p = 0, #KEYS - 2 do
  local key = KEYS[p + 2]
  local owner = redis.call('GET', key)
  if p % #live == index then
    if not owner or owner == me then
      redis.call('SET', key, me, 'PX', session)
      table.insert(owned, p)
    end
  elseif owner == me then
    redis.call('PEXPIRE', key, session)
    table.insert(release, p)
  end
end
return {owned, release}
";

/// Gives up one partition: deletes its owner key if this member holds it.
const RELEASE_SCRIPT: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

fn members_key(ctx: &Ctx) -> String {
    format!("memq:{{{}}}:group:{}:members", ctx.topic.name(), ctx.group)
}

fn owner_key(ctx: &Ctx, p: u32) -> String {
    format!(
        "memq:{{{}}}:group:{}:owner:{p}",
        ctx.topic.name(),
        ctx.group
    )
}

/// Runs the heartbeat script (`beat` or `leave`).
async fn heartbeat(ctx: &Ctx, session: Duration, op: &str) -> Result<(Vec<u32>, Vec<u32>), Error> {
    let script = redis::Script::new(HEARTBEAT_SCRIPT);
    let mut inv = script.prepare_invoke();
    inv.key(members_key(ctx));
    for p in 0..ctx.topic.partitions() {
        inv.key(owner_key(ctx, p));
    }
    inv.arg(&ctx.consumer)
        .arg(session.as_millis().max(1) as u64)
        .arg(op);
    let mut conn = ctx.topic.redis().conn();
    let (owned, release): (Vec<u32>, Vec<u32>) = match &mut conn {
        crate::conn::Conn::Single(c) => inv.invoke_async(c).await?,
        crate::conn::Conn::Cluster(c) => inv.invoke_async(c).await?,
    };
    Ok((owned, release))
}

async fn release(ctx: &Ctx, p: u32) -> Result<(), Error> {
    let script = redis::Script::new(RELEASE_SCRIPT);
    let mut inv = script.prepare_invoke();
    inv.key(owner_key(ctx, p)).arg(&ctx.consumer);
    let mut conn = ctx.topic.redis().conn();
    let _: i64 = match &mut conn {
        crate::conn::Conn::Single(c) => inv.invoke_async(c).await?,
        crate::conn::Conn::Cluster(c) => inv.invoke_async(c).await?,
    };
    Ok(())
}

fn publish(assignment: &Mutex<Vec<u32>>, readers: &BTreeMap<u32, Task>) {
    let now: Vec<u32> = readers.keys().copied().collect();
    match assignment.lock() {
        Ok(mut a) => *a = now,
        Err(e) => *e.into_inner() = now,
    }
}

/// One member's coordinator: heartbeats every `session / 4`, starts a reader for each
/// partition it comes to own and stops the reader of each it must give up (then gives
/// it up); stops every reader before its ownership could run out unrenewed.
/// When the member is dropped (its channel closed), stops its readers and leaves.
pub(crate) async fn coordinate(
    ctx: Arc<Ctx>,
    tx: mpsc::Sender<RedisDelivery>,
    assignment: Arc<Mutex<Vec<u32>>>,
    session: Duration,
) {
    let every = (session / 4).max(Duration::from_millis(1));
    let mut readers: BTreeMap<u32, Task> = BTreeMap::new();
    let mut renewed = Instant::now();
    let mut attempt = 0;
    loop {
        // A heartbeat slower than its period counts as failed: ownership must be known
        // to be renewed before it can run out.
        let beat = crate::rt::timeout(every, heartbeat(&ctx, session, "beat"))
            .await
            .unwrap_or(Err(Error::Closed));
        match beat {
            Ok((owned, give_up)) => {
                renewed = Instant::now();
                attempt = 0;
                let lost: Vec<u32> = readers
                    .keys()
                    .copied()
                    .filter(|p| !owned.contains(p))
                    .collect();
                for p in lost {
                    if let Some(t) = readers.remove(&p) {
                        t.stop().await;
                    }
                }
                for p in give_up {
                    let _ = release(&ctx, p).await;
                }
                for p in owned {
                    if let std::collections::btree_map::Entry::Vacant(v) = readers.entry(p) {
                        if let Ok(t) = crate::rt::spawn(read_group(ctx.clone(), p, tx.clone())) {
                            v.insert(t);
                        }
                    }
                }
                publish(&assignment, &readers);
            }
            Err(_) => {
                // Its owner keys run out a session after the last renewal, and may then go
                // to another member: stop reading before that, while a next attempt
                // could not be known to succeed in time.
                if renewed.elapsed() + every >= session {
                    for (_, t) in std::mem::take(&mut readers) {
                        t.stop().await;
                    }
                    publish(&assignment, &readers);
                }
                if tx.is_closed() {
                    break;
                }
                ctx.count_retry();
                backoff(attempt).await;
                attempt += 1;
                continue;
            }
        }
        tokio::select! {
            biased;
            _ = tx.closed() => break,
            _ = crate::rt::sleep(every) => {}
        }
    }
    for (_, t) in std::mem::take(&mut readers) {
        t.stop().await;
    }
    let _ = heartbeat(&ctx, session, "leave").await;
}
