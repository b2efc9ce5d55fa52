//! Redis servers for tests, examples and benchmarks: [`RedisServer`] starts
//! `redis-server` on a free port of 127.0.0.1 in a temporary directory (append-only file
//! with `appendfsync always`), waits until it answers `PING`, and kills it when dropped;
//! [`RedisCluster`] starts three such masters and joins them into a Redis Cluster.
//!
//! When `MEMQ_REDIS_REQUIRED` is set (the check script sets it), a server that cannot be
//! started is an error the tests fail on; otherwise tests may skip, saying so loudly.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that says Redis servers are expected (tests must not skip).
pub const REQUIRED_ENV: &str = "MEMQ_REDIS_REQUIRED";

/// The environment variable naming a directory for the servers' directories (else the
/// system's temporary directory). Each server writes its pid to `redis.pid` there, so
/// that a script can stop, by pid, the servers of a test process that was killed before
/// it could stop them itself.
pub const RUN_DIR_ENV: &str = "MEMQ_REDIS_RUN_DIR";

fn server_dir() -> std::io::Result<tempfile::TempDir> {
    let mut b = tempfile::Builder::new();
    b.prefix("memq-redis-");
    match std::env::var_os(RUN_DIR_ENV) {
        Some(dir) => b.tempdir_in(dir),
        None => b.tempdir(),
    }
}

/// How long a server may take to answer `PING` (far beyond the milliseconds it takes).
const START_LIMIT: Duration = Duration::from_secs(30);

/// Whether tests may skip when no server can be started (`MEMQ_REDIS_REQUIRED` unset).
pub fn may_skip() -> bool {
    std::env::var_os(REQUIRED_ENV).is_none()
}

/// A `redis-server` of this process; killed (SIGKILL) and its directory removed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    cluster: bool,
    extra: Vec<String>,
}

/// A free TCP port of 127.0.0.1 (and its cluster bus port + 10000 free too).
pub fn free_port() -> std::io::Result<u16> {
    for _ in 0..100 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::other("no free port pair found"))
}

impl RedisServer {
    /// Starts a server on a free port.
    ///
    /// # Errors
    ///
    /// If `redis-server` is missing or does not answer `PING` in time.
    pub fn start() -> std::io::Result<RedisServer> {
        Self::start_inner(false, &[])
    }

    /// Starts a server with more `redis-server` arguments, which override the defaults
    /// (for example `["--appendonly", "no"]` for a benchmark of the server's own limit).
    ///
    /// # Errors
    ///
    /// As [`RedisServer::start`].
    pub fn start_with(args: &[&str]) -> std::io::Result<RedisServer> {
        Self::start_inner(false, args)
    }

    fn start_inner(cluster: bool, args: &[&str]) -> std::io::Result<RedisServer> {
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut s = RedisServer {
                child: None,
                port,
                dir: server_dir()?,
                cluster,
                extra: args.iter().map(|a| a.to_string()).collect(),
            };
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("redis-server did not start")))
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .args(["--save", ""])
            .args(["--protected-mode", "no"])
            .arg("--pidfile")
            .arg(self.dir.path().join("redis.pid"))
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(self.dir.path().join("nodes.conf"))
                .args(["--cluster-node-timeout", "5000"]);
        }
        cmd.args(&self.extra);
        let child = cmd.spawn()?;
        self.child = Some(child);
        let t0 = Instant::now();
        while t0.elapsed() < START_LIMIT {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(std::io::Error::other(format!(
                    "redis-server exited with {status}: {}",
                    self.log_tail()
                )));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(std::io::Error::other(
            "redis-server did not answer PING in time",
        ))
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills it with SIGKILL (no shutdown, no final write) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and directory (after [`RedisServer::kill`]): it
    /// loads its append-only file.
    ///
    /// # Errors
    ///
    /// If it does not answer `PING` in time.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn()
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `PING` and waits for `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Three masters joined into a Redis Cluster (`redis-cli --cluster create`), each killed
/// on drop.
#[derive(Debug)]
pub struct RedisCluster {
    /// Its nodes.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers and joins them, waiting until the cluster
    /// says `cluster_state:ok` on every node.
    ///
    /// # Errors
    ///
    /// If a server does not start, `redis-cli` is missing, or the cluster does not come
    /// up in time.
    pub fn start() -> std::io::Result<RedisCluster> {
        let nodes = (0..3)
            .map(|_| RedisServer::start_inner(true, &[]))
            .collect::<std::io::Result<Vec<_>>>()?;
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = cmd
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let t0 = Instant::now();
        loop {
            let ok = nodes.iter().all(|n| cluster_ok(n.port));
            if ok {
                return Ok(RedisCluster { nodes });
            }
            if t0.elapsed() > START_LIMIT {
                return Err(std::io::Error::other(
                    "the cluster did not reach cluster_state:ok",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URLs of its nodes.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

fn cluster_ok(port: u16) -> bool {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "cluster", "info"])
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
        .unwrap_or(false)
}

/// Where `redis-server` is, if on PATH.
pub fn redis_server_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("redis-server"))
            .find(|p| p.is_file())
    })
}
