//! rsnode: a demo Databend query node or RisingWave compute node for
//! `sh deploy/run.sh demo`, written in Rust and linked with Debian's jemalloc
//! (profiling on through MALLOC_CONF), so its heap dumps are real dumps of a
//! Rust process with Rust call paths.
//!
//!   databend    GET /debug/mem/pprof/profile on the admin port answers the
//!               dump itself; /metrics (databend_*) on the metrics port
//!   risingwave  dumps are written with jemalloc's prof_prefix into a folder
//!               (as RisingWave's heap profiling does) for an agent to serve;
//!               /metrics (jemalloc_*_bytes, stream_memory_usage) on the
//!               Prometheus port
//!
//! The workload ticks every --tick seconds (and on GET /demo/tick): queries
//! or streaming jobs come and go, caches stay within their capacity.
//!
//!   rsnode --kind databend|risingwave [--port P] [--metrics-port P]
//!          [--tick SECONDS] [--scale BYTES] [--warm TICKS]
//!
//! Prints "ready http=PORT metrics=PORT" once listening. Builds with rustc
//! 1.63 (Debian 12) and newer: std only.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[link(name = "jemalloc")]
extern "C" {
    fn mallctl(
        name: *const c_char,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int;
}

static SCALE: AtomicI64 = AtomicI64::new(1 << 20);
static TICKS: AtomicU32 = AtomicU32::new(0);
/// What the node's own accounting says it holds (RisingWave's
/// stream_memory_usage; Databend's query memory).
static TRACKED: AtomicI64 = AtomicI64::new(0);
/* When this process started (Unix seconds), as Prometheus' process collector
 * publishes it: a restart shows as a new value. */
static STARTED: AtomicI64 = AtomicI64::new(0);

/// A buffer whose pages are written, counted on the tracker while alive.
pub struct Block {
    data: Vec<u8>,
}

impl Block {
    // Inlined: the function that asked for the memory is the stack's leaf.
    #[inline(always)]
    fn new(n: usize) -> Block {
        TRACKED.fetch_add(n as i64, Ordering::SeqCst);
        Block { data: vec![0x5a; n] }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        TRACKED.fetch_sub(self.data.len() as i64, Ordering::SeqCst);
    }
}

fn scale() -> usize {
    SCALE.load(Ordering::SeqCst) as usize
}

pub mod databend_query {
    pub mod pipelines {
        use super::super::{scale, Block};
        /// The build side of a hash join keeps its hash table until the
        /// probe finishes.
        pub struct HashJoinBuildState {
            pub chunks: Vec<Block>,
        }
        impl HashJoinBuildState {
            #[inline(never)]
            pub fn build(units: usize) -> HashJoinBuildState {
                let mut chunks = Vec::new();
                for _ in 0..units {
                    chunks.push(Block::new(scale()));
                }
                HashJoinBuildState { chunks }
            }
        }
        pub struct AggregateHashTable {
            pub arena: Vec<Block>,
        }
        impl AggregateHashTable {
            #[inline(never)]
            pub fn add_groups(units: usize) -> AggregateHashTable {
                let mut arena = Vec::new();
                for _ in 0..units * 2 {
                    arena.push(Block::new(scale() / 2));
                }
                AggregateHashTable { arena }
            }
        }
    }
    pub mod storages {
        use super::super::{scale, Block};
        use std::collections::BTreeMap;
        /// Segment info cache with a capacity (entries are evicted).
        pub struct SegmentInfoCache {
            pub map: BTreeMap<u64, Block>,
        }
        impl SegmentInfoCache {
            #[inline(never)]
            pub fn put(&mut self, key: u64) {
                self.map.insert(key, Block::new(scale() / 2));
                while self.map.len() > 16 {
                    let first = *self.map.keys().next().unwrap();
                    self.map.remove(&first);
                }
            }
        }
    }
}

pub mod risingwave_stream {
    pub mod executor {
        use super::super::{scale, Block};
        use std::collections::VecDeque;
        /// Join state cached per key, evicted by the memory manager's LRU.
        pub struct JoinHashMap {
            pub entries: VecDeque<Block>,
        }
        impl JoinHashMap {
            #[inline(never)]
            pub fn insert_row(&mut self) {
                self.entries.push_back(Block::new(scale()));
                while self.entries.len() > 10 {
                    self.entries.pop_front();
                }
            }
        }
        pub struct HashAggExecutor {
            pub groups: VecDeque<Block>,
        }
        impl HashAggExecutor {
            #[inline(never)]
            pub fn apply_chunk(&mut self) {
                self.groups.push_back(Block::new(scale() / 2));
                while self.groups.len() > 12 {
                    self.groups.pop_front();
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Databend,
    RisingWave,
}

struct Work {
    kind: Kind,
    queries: VecDeque<(databend_query::pipelines::HashJoinBuildState,
                       databend_query::pipelines::AggregateHashTable)>,
    segments: databend_query::storages::SegmentInfoCache,
    join: risingwave_stream::executor::JoinHashMap,
    agg: risingwave_stream::executor::HashAggExecutor,
}

#[inline(never)]
fn tick(w: &mut Work) {
    let t = TICKS.fetch_add(1, Ordering::SeqCst) as usize;
    match w.kind {
        Kind::Databend => {
            let q = (
                databend_query::pipelines::HashJoinBuildState::build(6 + t % 4),
                databend_query::pipelines::AggregateHashTable::add_groups(2 + t % 3),
            );
            w.queries.push_back(q);
            while w.queries.len() > 2 {
                w.queries.pop_front();
            }
            w.segments.put(t as u64);
        }
        Kind::RisingWave => {
            w.join.insert_row();
            w.agg.apply_chunk();
        }
    }
}

/// The workload runs on one thread whoever asks for a tick, so a call path
/// is the same stack in every dump. Send a reply channel; it answers after
/// the tick.
type Executor = std::sync::mpsc::Sender<std::sync::mpsc::Sender<()>>;

fn executor(mut w: Work) -> Executor {
    let (tx, rx) = std::sync::mpsc::channel::<std::sync::mpsc::Sender<()>>();
    thread::spawn(move || {
        for done in rx {
            tick(&mut w);
            let _ = done.send(());
        }
    });
    tx
}

fn tick_wait(ex: &Mutex<Executor>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = ex.lock().unwrap().send(tx);
    let _ = rx.recv();
}

fn stat(name: &str) -> i64 {
    let mut epoch: u64 = 1;
    let mut sz = std::mem::size_of::<u64>();
    let e = b"epoch\0";
    let cname = format!("{}\0", name);
    let mut v: usize = 0;
    let mut vsz = std::mem::size_of::<usize>();
    unsafe {
        mallctl(e.as_ptr() as *const c_char, &mut epoch as *mut u64 as *mut c_void, &mut sz,
                &mut epoch as *mut u64 as *mut c_void, sz);
        if mallctl(cname.as_ptr() as *const c_char, &mut v as *mut usize as *mut c_void,
                   &mut vsz, std::ptr::null_mut(), 0) != 0 {
            return 0;
        }
    }
    v as i64
}

fn proc_bytes(key: &str) -> i64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(key) {
            if let Some(rest) = rest.strip_prefix(':') {
                let kb: i64 = rest.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                return kb * 1024;
            }
        }
    }
    0
}

/// A dump of this process; with a null name jemalloc writes
/// <prof_prefix>.<pid>.<seq>.m<mseq>.heap (RisingWave's folder layout).
fn dump(path: Option<&str>) -> Result<String, String> {
    let c;
    let r = unsafe {
        match path {
            Some(p) => {
                c = format!("{}\0", p);
                let mut ptr = c.as_ptr() as *const c_char;
                mallctl(b"prof.dump\0".as_ptr() as *const c_char, std::ptr::null_mut(),
                        std::ptr::null_mut(), &mut ptr as *mut *const c_char as *mut c_void,
                        std::mem::size_of::<*const c_char>())
            }
            None => mallctl(b"prof.dump\0".as_ptr() as *const c_char, std::ptr::null_mut(),
                            std::ptr::null_mut(), std::ptr::null_mut(), 0),
        }
    };
    if r != 0 {
        return Err(format!("opt.prof is not ON, please start the application with proper MALLOC env. e.g.  MALLOC_CONF=prof:true (mallctl error {})", r));
    }
    Ok(path.unwrap_or("").to_string())
}

fn metrics(kind: Kind) -> String {
    let mut s = String::new();
    let mut g = |name: &str, v: i64| {
        s.push_str(&format!("# TYPE {} gauge\n{} {}\n", name, name, v));
    };
    let rss = proc_bytes("VmRSS");
    let vm = proc_bytes("VmSize");
    g("process_start_time_seconds", STARTED.load(Ordering::SeqCst));
    match kind {
        Kind::Databend => {
            g("databend_process_resident_memory_bytes", rss);
            g("databend_process_virtual_memory_bytes", vm);
            g("databend_query_memory_usage_bytes", TRACKED.load(Ordering::SeqCst));
        }
        Kind::RisingWave => {
            g("jemalloc_allocated_bytes", stat("stats.allocated"));
            g("jemalloc_active_bytes", stat("stats.active"));
            g("jemalloc_resident_bytes", stat("stats.resident"));
            g("jemalloc_metadata_bytes", stat("stats.metadata"));
            g("stream_memory_usage", TRACKED.load(Ordering::SeqCst));
            g("process_resident_memory_bytes", rss);
            g("process_virtual_memory_bytes", vm);
        }
    }
    s
}

fn reply(mut s: &TcpStream, code: u32, reason: &str, ctype: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        code, reason, ctype, body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

fn serve(mut s: TcpStream, kind: Kind, is_metrics: bool, ex: &Arc<Mutex<Executor>>, dir: &str) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 65536 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&req);
    let target = text.split(' ').nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/");
    if path == "/demo/tick" {
        tick_wait(ex);
        let b = format!("tick {}\n", TICKS.load(Ordering::SeqCst));
        reply(&s, 200, "OK", "text/plain", b.as_bytes());
        return;
    }
    if path == "/metrics" && (is_metrics || kind == Kind::Databend) {
        reply(&s, 200, "OK", "text/plain; version=0.0.4", metrics(kind).as_bytes());
        return;
    }
    if path == "/demo/dump" && kind == Kind::RisingWave {
        // The RisingWave dashboard's "dump heap profile" (a file in the folder).
        let r = dump(None);
        match r {
            Ok(_) => reply(&s, 200, "OK", "application/json", b"{}"),
            Err(e) => reply(&s, 500, "Internal Server Error", "text/plain", e.as_bytes()),
        }
        return;
    }
    if !is_metrics && kind == Kind::Databend && path == "/debug/mem/pprof/profile" {
        let file = format!("{}/heap_dump_{}_{}.prof", dir, std::process::id(),
                           TICKS.load(Ordering::SeqCst));
        match dump(Some(&file)).and_then(|f| std::fs::read(&f).map_err(|e| e.to_string())) {
            Ok(bytes) => {
                let _ = std::fs::remove_file(&file);
                reply(&s, 200, "OK", "application/octet-stream", &bytes)
            }
            Err(e) => reply(&s, 500, "Internal Server Error", "text/plain", e.as_bytes()),
        }
        return;
    }
    reply(&s, 404, "Not Found", "text/plain", b"not found\n");
}

fn usage() -> ! {
    eprintln!("usage: rsnode --kind databend|risingwave [--dir DIR] [--port P] [--metrics-port P] [--tick SECONDS] [--scale BYTES] [--warm TICKS]");
    std::process::exit(2);
}

fn main() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    STARTED.store(now, Ordering::SeqCst);
    let args: Vec<String> = std::env::args().collect();
    let mut kind = None;
    let (mut port, mut mport, mut tick_s, mut dir) = (0u16, 0u16, 5f64, String::from("."));
    // Ticks before listening: a node that has run a while (16), or a fresh
    // restart (0), whose heap starts small and fills up again.
    let mut warm = 16u32;
    let mut i = 1;
    while i < args.len() {
        if i + 1 >= args.len() {
            usage();
        }
        let v = &args[i + 1];
        match args[i].as_str() {
            "--kind" => {
                kind = match v.as_str() {
                    "databend" => Some(Kind::Databend),
                    "risingwave" => Some(Kind::RisingWave),
                    _ => usage(),
                }
            }
            "--port" => port = v.parse().unwrap_or_else(|_| usage()),
            "--metrics-port" => mport = v.parse().unwrap_or_else(|_| usage()),
            "--tick" => tick_s = v.parse().unwrap_or_else(|_| usage()),
            "--dir" => dir = v.clone(),
            "--warm" => warm = v.parse().unwrap_or_else(|_| usage()),
            "--scale" => {
                let s: i64 = v.parse().unwrap_or_else(|_| usage());
                if s < 4096 {
                    usage();
                }
                SCALE.store(s, Ordering::SeqCst);
            }
            _ => usage(),
        }
        i += 2;
    }
    let kind = kind.unwrap_or_else(|| usage());
    let ex = Arc::new(Mutex::new(executor(Work {
        kind,
        queries: VecDeque::new(),
        segments: databend_query::storages::SegmentInfoCache { map: BTreeMap::new() },
        join: risingwave_stream::executor::JoinHashMap { entries: VecDeque::new() },
        agg: risingwave_stream::executor::HashAggExecutor { groups: VecDeque::new() },
    })));
    for _ in 0..warm {
        tick_wait(&ex);
    }
    let bind = |p: u16| {
        TcpListener::bind(("127.0.0.1", p)).unwrap_or_else(|e| {
            eprintln!("rsnode: listen on 127.0.0.1:{}: {}", p, e);
            std::process::exit(1);
        })
    };
    let http = bind(port);
    let met = bind(mport);
    println!(
        "ready http={} metrics={}",
        http.local_addr().unwrap().port(),
        met.local_addr().unwrap().port()
    );
    let _ = std::io::stdout().flush();
    if tick_s > 0.0 {
        let e = ex.clone();
        thread::spawn(move || loop {
            thread::sleep(Duration::from_secs_f64(tick_s));
            tick_wait(&e);
        });
    }
    {
        let e = ex.clone();
        let d = dir.clone();
        thread::spawn(move || {
            for s in met.incoming().flatten() {
                serve(s, kind, true, &e, &d);
            }
        });
    }
    for s in http.incoming().flatten() {
        serve(s, kind, false, &ex, &dir);
    }
}
