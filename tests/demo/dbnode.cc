/* dbnode: one demo "database backend" process for `sh deploy/run.sh demo`.
 *
 * It looks like a Doris BE or a StarRocks BE from the inside: the memory it
 * holds is allocated along call paths named as in those code bases
 * (doris::vectorized::HashJoinNode, doris::segment_v2::Segment,
 * doris::TabletSchema, starrocks::pipeline::HashJoinBuildOperator, ...), with
 * Debian's jemalloc and profiling on, so every dump it serves is a real
 * prof.dump of this process. Its memory trackers are counters those same
 * paths move (consume on allocate, release on free), exported under each
 * kind's real names and endpoints:
 *
 *   starrocks  GET /pprof/heap (the dump itself), /metrics (starrocks_be_*)
 *   doris      GET /jeheap/dump (writes a dump into --dir, answers its path;
 *              the collector fetches it through an agent), /jeheap/active/true,
 *              /metrics (doris_be_*), /mem_tracker (HTML table), and on a
 *              second port the brpc bvars /vars/memory_*
 *
 * A role decides the node's part in the demo's story:
 *   steady      queries come and go, caches stay within their capacity
 *   leak        a tablet-schema metadata cache that never evicts
 *   bigjoin     one query holds a hash table far larger than the fleet's
 *   undercount  the hash join build's memory is not consumed on the query
 *               tracker, so the tracker reads far less than the heap holds
 *   login       every page is an HTML login page (a proxy in front of it)
 *
 * The workload advances one "tick" every --tick seconds, and on
 * GET /demo/tick (the demo's backdated history drives ticks itself, with
 * --tick 0). A tick stands for 15 minutes of the node's life unless
 * GET /demo/tick?minutes=M says otherwise: the metadata cache sees new
 * tablets at a rate per minute, so a leak grows along the clock whether the
 * ticks come from the backdated past (15 minutes each) or from the live
 * demo (seconds each), and a time fit sees one straight line.
 *
 * Every block a cache turns over is at least 8 sample periods (scale/2 =
 * 512 KiB at lg_prof_sample:16), so jemalloc samples it with probability
 * 1 - e^-8 and a steady cache's estimate stays put. With blocks of 2
 * periods (scale/4, until this was written) one block in 55 went unsampled;
 * a cache of 48 that turns over within the history then walks by whole
 * blocks, and about one story run in a few hundred walked up past the leak
 * test's 3 sigma on a steady node (query/INTERNALS.md §4).
 * tests/demo/test-sampling.sh checks the sizes on real dumps.
 * Output: "ready http=PORT brpc=PORT" on stdout once listening.
 *
 *   dbnode --kind doris|starrocks --role ROLE --dir DIR [--port P] [--brpc-port P]
 *          [--tick SECONDS] [--scale MIB]
 */
#include <jemalloc/jemalloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

/* Sample every 64 KiB on average, as a production node would (Doris and
 * StarRocks default to 512 KiB); the figures are un-sampled by the reader. */
extern "C" {
const char *malloc_conf = "prof:true,prof_active:true,lg_prof_sample:16";
}

#define NOINLINE __attribute__((noinline))

namespace demo {

enum class Kind { doris, starrocks };
enum class Role { steady, leak, bigjoin, undercount, login };

struct Options {
    Kind kind = Kind::doris;
    Role role = Role::steady;
    std::string dir = ".";
    int port = 0, brpc_port = 0;
    double tick_s = 5;
    size_t scale = 1 << 20; /* one "MiB" of the story; tests shrink it */
};
Options opt;

/* The trackers, by category, as the database's MemTrackers would count. */
struct Trackers {
    std::atomic<int64_t> query{0}, metadata{0}, cache{0}, load{0}, global{0};
};
Trackers trackers;

std::mutex work_mu; /* the workload and a dump never interleave */
unsigned ticks;

/* A block that consumes its tracker while alive. touch: the pages are
 * written, so they count in RSS as a real hash table's would. */
struct Block {
    char *p = nullptr;
    size_t n = 0;
    std::atomic<int64_t> *tracker = nullptr;
    Block() = default;
    /* The memory comes from DEMO_BLOCK's malloc, called in the database
     * function itself, so that function is the leaf of the recorded stack
     * as in the real servers (an inlined constructor would still be a frame
     * of its own once the symbolizer expands inlines). */
    Block(char *mem, size_t size, std::atomic<int64_t> *t) : p(mem), n(size), tracker(t)
    {
        if (!p) {
            fprintf(stderr, "dbnode: out of memory (%zu bytes)\n", n);
            abort();
        }
        memset(p, 0x5a, n);
        if (tracker)
            *tracker += (int64_t)n;
    }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
    ~Block()
    {
        if (tracker)
            *tracker -= (int64_t)n;
        free(p);
    }
};
using BlockPtr = std::unique_ptr<Block>;
/* A new Block of `size` bytes counted on tracker `t` (may be null). */
#define DEMO_BLOCK(size, t) (new demo::Block(static_cast<char *>(malloc(size)), (size), (t)))

} // namespace demo

/* Names as in the databases; the bodies only allocate what those functions
 * allocate in spirit. Every function that allocates is NOINLINE so it is a
 * frame in the stacks jemalloc records. */

namespace doris {

class TabletSchema {
public:
    NOINLINE void init_from_pb(size_t columns)
    {
        for (size_t i = 0; i < columns; i++)
            _columns.emplace_back(DEMO_BLOCK(demo::opt.scale / 2, &demo::trackers.metadata));
    }
    std::vector<demo::BlockPtr> _columns;
};

/* The metadata cache: the leak role never evicts (the bug in the story). */
class TabletSchemaCache {
public:
    NOINLINE std::shared_ptr<TabletSchema> insert(uint64_t key)
    {
        auto s = std::make_shared<TabletSchema>();
        s->init_from_pb(1); /* one column group of scale/2: see the header */
        _cache[key] = s;
        if (demo::opt.role != demo::Role::leak)
            while (_cache.size() > 24)
                _cache.erase(_cache.begin());
        return s;
    }
    std::map<uint64_t, std::shared_ptr<TabletSchema>> _cache;
};

namespace segment_v2 {
class Segment {
public:
    NOINLINE static std::unique_ptr<Segment> open(uint64_t id)
    {
        auto s = std::make_unique<Segment>();
        s->_id = id;
        s->_load_index(); /* short key index, zone maps */
        return s;
    }
    NOINLINE void _load_index()
    {
        _index.reset(DEMO_BLOCK(demo::opt.scale / 2, &demo::trackers.metadata));
    }
    uint64_t _id = 0;
    demo::BlockPtr _index;
};
} // namespace segment_v2

class StoragePageCache {
public:
    NOINLINE void insert(uint64_t key)
    {
        _pages.emplace_back(key, demo::BlockPtr(DEMO_BLOCK(demo::opt.scale, &demo::trackers.cache)));
        while (_pages.size() > 12)
            _pages.pop_front();
    }
    std::deque<std::pair<uint64_t, demo::BlockPtr>> _pages;
};

namespace vectorized {
/* The build side of a hash join: the table is sized by the build rows. */
class HashJoinNode {
public:
    NOINLINE void _build_hash_table(size_t rows_mib)
    {
        /* The undercount role builds outside the query's tracker (a path
         * that forgot to switch to the query's thread context). */
        auto *t = demo::opt.role == demo::Role::undercount ? nullptr : &demo::trackers.query;
        for (size_t i = 0; i < rows_mib; i++)
            _hash_table.emplace_back(DEMO_BLOCK(demo::opt.scale, t));
    }
    std::vector<demo::BlockPtr> _hash_table;
};
class AggregationNode {
public:
    NOINLINE void _execute_with_serialized_key(size_t mib)
    {
        for (size_t i = 0; i < mib; i++)
            _agg_arena.emplace_back(DEMO_BLOCK(demo::opt.scale, &demo::trackers.query));
    }
    std::vector<demo::BlockPtr> _agg_arena;
};
} // namespace vectorized

struct QueryContext {
    vectorized::HashJoinNode join;
    vectorized::AggregationNode agg;
};

} // namespace doris

namespace starrocks {

class TabletSchema {
public:
    NOINLINE void _init_columns(size_t columns)
    {
        for (size_t i = 0; i < columns; i++)
            _cols.emplace_back(DEMO_BLOCK(demo::opt.scale / 2, &demo::trackers.metadata));
    }
    std::vector<demo::BlockPtr> _cols;
};

namespace lake {
/* Tablet metadata cache; the leak role's cache never evicts. */
class MetaCache {
public:
    NOINLINE void cache_tablet_metadata(uint64_t key)
    {
        auto s = std::make_shared<TabletSchema>();
        s->_init_columns(1); /* one column group of scale/2: see the header */
        _cache[key] = s;
        if (demo::opt.role != demo::Role::leak)
            while (_cache.size() > 24)
                _cache.erase(_cache.begin());
    }
    std::map<uint64_t, std::shared_ptr<TabletSchema>> _cache;
};
} // namespace lake

class Segment {
public:
    NOINLINE static std::unique_ptr<Segment> open(uint64_t id)
    {
        auto s = std::make_unique<Segment>();
        s->_short_key_index.reset(DEMO_BLOCK(demo::opt.scale / 2, &demo::trackers.metadata));
        (void)id;
        return s;
    }
    demo::BlockPtr _short_key_index;
};

class StoragePageCache {
public:
    NOINLINE void insert(uint64_t key)
    {
        _pages.emplace_back(key, demo::BlockPtr(DEMO_BLOCK(demo::opt.scale, &demo::trackers.cache)));
        while (_pages.size() > 12)
            _pages.pop_front();
    }
    std::deque<std::pair<uint64_t, demo::BlockPtr>> _pages;
};

class JoinHashTable {
public:
    NOINLINE void build(size_t mib)
    {
        auto *t = demo::opt.role == demo::Role::undercount ? nullptr : &demo::trackers.query;
        for (size_t i = 0; i < mib; i++)
            _buckets.emplace_back(DEMO_BLOCK(demo::opt.scale, t));
    }
    std::vector<demo::BlockPtr> _buckets;
};

namespace pipeline {
class HashJoinBuildOperator {
public:
    NOINLINE void push_chunk(size_t mib)
    {
        _ht.build(mib);
        __asm__ volatile("" ::: "memory"); /* a real call, not a tail jump */
    }
    JoinHashTable _ht;
};
class AggregateBlockingSinkOperator {
public:
    NOINLINE void push_chunk(size_t mib)
    {
        for (size_t i = 0; i < mib; i++)
            _states.emplace_back(DEMO_BLOCK(demo::opt.scale, &demo::trackers.query));
    }
    std::vector<demo::BlockPtr> _states;
};
} // namespace pipeline

struct QueryContext {
    pipeline::HashJoinBuildOperator join;
    pipeline::AggregateBlockingSinkOperator agg;
};

} // namespace starrocks

namespace demo {

/* ---- the workload -------------------------------------------------------- */

doris::TabletSchemaCache doris_schema_cache;
doris::StoragePageCache doris_page_cache;
std::deque<std::unique_ptr<doris::segment_v2::Segment>> doris_segments;
std::deque<std::unique_ptr<doris::QueryContext>> doris_queries;

starrocks::lake::MetaCache sr_meta_cache;
starrocks::StoragePageCache sr_page_cache;
std::deque<std::unique_ptr<starrocks::Segment>> sr_segments;
std::deque<std::unique_ptr<starrocks::QueryContext>> sr_queries;

/* Join build sizes in units of opt.scale: the big join holds 10x the
 * fleet's (well over 64 MiB above the median at the demo's scale). */
size_t join_units() { return opt.role == Role::bigjoin ? 200 : opt.role == Role::undercount ? 32 : 8; }

/* One tick: a query finishes and a new one starts, segments are opened and
 * closed, pages come and go; the metadata cache sees new tablets. */
NOINLINE void tick(double minutes)
{
    std::lock_guard<std::mutex> g(work_mu);
    unsigned t = ticks++;
    /* New tablets reach the metadata cache at 2 per 15 minutes of the
     * node's life (see the header): whole inserts only, the rest carried. */
    static double tablets_due;
    static uint64_t next_tablet;
    tablets_due += minutes * 2 / 15;
    unsigned tablets = (unsigned)tablets_due;
    tablets_due -= tablets;
    size_t agg = 2 + t % 3;
    if (opt.kind == Kind::doris) {
        auto q = std::make_unique<doris::QueryContext>();
        /* The big join is one long query that stays; others churn. */
        if (opt.role == Role::bigjoin || opt.role == Role::undercount) {
            if (doris_queries.empty()) {
                q->join._build_hash_table(join_units());
                doris_queries.push_back(std::move(q));
            }
            auto small = std::make_unique<doris::QueryContext>();
            small->agg._execute_with_serialized_key(agg);
            doris_queries.push_back(std::move(small));
            while (doris_queries.size() > 3)
                doris_queries.erase(doris_queries.begin() + 1);
        } else {
            q->join._build_hash_table(join_units() + t % 4);
            q->agg._execute_with_serialized_key(agg);
            doris_queries.push_back(std::move(q));
            while (doris_queries.size() > 2)
                doris_queries.pop_front();
        }
        for (unsigned i = 0; i < tablets; i++)
            doris_schema_cache.insert(next_tablet++);
        doris_segments.push_back(doris::segment_v2::Segment::open(t));
        while (doris_segments.size() > 8)
            doris_segments.pop_front();
        doris_page_cache.insert(t);
    } else {
        auto q = std::make_unique<starrocks::QueryContext>();
        if (opt.role == Role::bigjoin || opt.role == Role::undercount) {
            if (sr_queries.empty()) {
                q->join.push_chunk(join_units());
                sr_queries.push_back(std::move(q));
            }
            auto small = std::make_unique<starrocks::QueryContext>();
            small->agg.push_chunk(agg);
            sr_queries.push_back(std::move(small));
            while (sr_queries.size() > 3)
                sr_queries.erase(sr_queries.begin() + 1);
        } else {
            q->join.push_chunk(join_units() + t % 4);
            q->agg.push_chunk(agg);
            sr_queries.push_back(std::move(q));
            while (sr_queries.size() > 2)
                sr_queries.pop_front();
        }
        for (unsigned i = 0; i < tablets; i++)
            sr_meta_cache.cache_tablet_metadata(next_tablet++);
        sr_segments.push_back(starrocks::Segment::open(t));
        while (sr_segments.size() > 8)
            sr_segments.pop_front();
        sr_page_cache.insert(t);
    }
}

/* The workload runs on one thread (a BE's query executor), whoever asks
 * for a tick, so a call path is the same stack in every dump. */
std::mutex tick_mu;
std::condition_variable tick_cv;
unsigned ticks_wanted, ticks_done;
std::deque<double> tick_minutes; /* what each wanted tick stands for */
volatile sig_atomic_t stop;

NOINLINE void executor_thread()
{
    std::unique_lock<std::mutex> l(tick_mu);
    while (!stop) {
        if (ticks_done < ticks_wanted) {
            double minutes = 15;
            if (!tick_minutes.empty()) {
                minutes = tick_minutes.front();
                tick_minutes.pop_front();
            }
            l.unlock();
            tick(minutes);
            l.lock();
            ticks_done++;
            tick_cv.notify_all();
            continue;
        }
        tick_cv.wait_for(l, std::chrono::milliseconds(200));
    }
}

/* Asks for n ticks of `minutes` each and waits until they are done. */
void tick_wait(unsigned n, double minutes = 15)
{
    std::unique_lock<std::mutex> l(tick_mu);
    for (unsigned i = 0; i < n; i++)
        tick_minutes.push_back(minutes);
    unsigned want = ticks_wanted += n;
    tick_cv.notify_all();
    tick_cv.wait(l, [want] { return ticks_done >= want || stop; });
}

/* ---- figures ------------------------------------------------------------- */

uint64_t je_stat(const char *name)
{
    uint64_t epoch = 1;
    size_t sz = sizeof(epoch);
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t v = 0;
    sz = sizeof(v);
    if (mallctl(name, &v, &sz, nullptr, 0) != 0)
        return 0;
    return v;
}

uint64_t proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            kb = strtoull(line + kl + 1, nullptr, 10);
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

void add(std::string &s, const char *type, const char *name, long long v)
{
    char b[256];
    snprintf(b, sizeof(b), "# TYPE %s %s\n%s %lld\n", name, type, name, v);
    s += b;
}

std::string metrics_text()
{
    long long q = trackers.query, m = trackers.metadata, c = trackers.cache, l = trackers.load,
              gl = trackers.global;
    long long alloc = (long long)je_stat("stats.allocated"), active = (long long)je_stat("stats.active"),
              meta = (long long)je_stat("stats.metadata"), res = (long long)je_stat("stats.resident"),
              mapped = (long long)je_stat("stats.mapped"), ret = (long long)je_stat("stats.retained");
    long long rss = (long long)proc_status_bytes("VmRSS");
    std::string s;
    if (opt.kind == Kind::starrocks) {
        add(s, "counter", "starrocks_be_fragment_requests_total", ticks);
        add(s, "gauge", "starrocks_be_process_mem_bytes", q + m + c + l + gl);
        add(s, "gauge", "starrocks_be_query_mem_bytes", q);
        add(s, "gauge", "starrocks_be_load_mem_bytes", l);
        add(s, "gauge", "starrocks_be_metadata_mem_bytes", m);
        add(s, "gauge", "starrocks_be_tablet_metadata_mem_bytes", m);
        add(s, "gauge", "starrocks_be_storage_page_cache_mem_bytes", c);
        add(s, "gauge", "starrocks_be_jemalloc_allocated_bytes", alloc);
        add(s, "gauge", "starrocks_be_jemalloc_active_bytes", active);
        add(s, "gauge", "starrocks_be_jemalloc_metadata_bytes", meta);
        add(s, "gauge", "starrocks_be_jemalloc_resident_bytes", res);
        add(s, "gauge", "starrocks_be_jemalloc_mapped_bytes", mapped);
        add(s, "gauge", "starrocks_be_jemalloc_retained_bytes", ret);
    } else {
        add(s, "counter", "doris_be_fragment_requests_total", ticks);
        add(s, "gauge", "doris_be_memory_allocated_bytes", rss); /* VmRSS, as Doris sets it */
        add(s, "gauge", "doris_be_memory_jemalloc_allocated_bytes", alloc);
        add(s, "gauge", "doris_be_memory_jemalloc_active_bytes", active);
        add(s, "gauge", "doris_be_memory_jemalloc_metadata_bytes", meta);
        add(s, "gauge", "doris_be_memory_jemalloc_resident_bytes", res);
        add(s, "gauge", "doris_be_memory_jemalloc_mapped_bytes", mapped);
        add(s, "gauge", "doris_be_memory_jemalloc_retained_bytes", ret);
    }
    return s;
}

/* Doris bvars on the brpc port ("name : value" lines). */
std::string vars_text()
{
    long long q = trackers.query, m = trackers.metadata, c = trackers.cache, l = trackers.load,
              gl = trackers.global;
    long long rss = (long long)proc_status_bytes("VmRSS");
    char b[1024];
    snprintf(b, sizeof(b),
             "memory_all_tracked_sum_bytes : %lld\n"
             "memory_global_trackers_sum_bytes : %lld\n"
             "memory_metadata_trackers_sum_bytes : %lld\n"
             "memory_cache_trackers_sum_bytes : %lld\n"
             "memory_query_trackers_sum_bytes : %lld\n"
             "memory_load_trackers_sum_bytes : %lld\n"
             "memory_compaction_trackers_sum_bytes : 0\n"
             "memory_schema_change_trackers_sum_bytes : 0\n"
             "memory_other_trackers_sum_bytes : 0\n"
             "memory_reserved_memory_bytes : 0\n"
             "memory_all_tasks_memory_bytes : %lld\n"
             "memory_untracked_memory_bytes : %lld\n",
             q + m + c + l + gl, gl, m, c, q, l, q + l, rss - (q + m + c + l + gl));
    return b;
}

std::string tracker_html()
{
    long long q = trackers.query, m = trackers.metadata, c = trackers.cache, l = trackers.load,
              gl = trackers.global;
    long long rss = (long long)proc_status_bytes("VmRSS"), sum = q + m + c + l + gl;
    std::string s =
        "<!DOCTYPE html><html><head><title>Doris BE</title></head><body>\n"
        "<h2>Memory Tracker</h2>\n"
        "<p>MemTracker only counts the memory on part of the main execution path, which is "
        "usually less than the real process memory.</p>\n"
        "<table class='table table-hover'>\n<thead><tr><th>Type</th><th>Label</th><th>Parent "
        "Label</th><th>Limit</th><th>Current Consumption(Bytes)</th><th>Current "
        "Consumption(Normalize)</th><th>Peak Consumption(Bytes)</th><th>Peak "
        "Consumption(Normalize)</th></tr></thead>\n<tbody>\n";
    struct Row {
        const char *label;
        long long v;
    } rows[] = {{"process resident memory", rss}, {"sum of all trackers", sum}, {"global", gl},
                {"query", q}, {"load", l}, {"metadata", m}, {"cache", c}};
    for (auto &r : rows) {
        char b[512];
        snprintf(b, sizeof(b),
                 "<tr><td>overview</td><td>%s</td><td></td><td>none</td><td>%lld</td><td>%.2f "
                 "MB</td><td>%lld</td><td>%.2f MB</td></tr>\n",
                 r.label, r.v, (double)r.v / 1048576.0, r.v, (double)r.v / 1048576.0);
        s += b;
    }
    s += "</tbody></table></body></html>\n";
    return s;
}

const char login_page[] =
    "<!DOCTYPE html>\n<html><head><title>Sign in - Corp SSO</title></head>\n"
    "<body><form method=\"post\" action=\"/login\"><h1>Sign in to continue</h1>\n"
    "<input name=\"user\"><input name=\"password\" type=\"password\">"
    "<button>Sign in</button></form></body></html>\n";

/* ---- dumps --------------------------------------------------------------- */

unsigned dump_seq;

/* Writes a dump into opt.dir with Doris' or StarRocks' file name; returns its
 * path, or "" when prof.dump fails. */
std::string dump_file()
{
    std::lock_guard<std::mutex> g(work_mu);
    char path[4096];
    if (opt.kind == Kind::doris)
        snprintf(path, sizeof(path), "%s/jeheap_dump.%ld.%d.%u.heap", opt.dir.c_str(),
                 (long)time(nullptr), (int)getpid(), dump_seq++);
    else
        snprintf(path, sizeof(path), "%s/heap_profile.%d.%u", opt.dir.c_str(), (int)getpid(),
                 dump_seq++);
    const char *p = path;
    if (mallctl("prof.dump", nullptr, nullptr, &p, sizeof(p)) != 0)
        return "";
    return path;
}

bool read_file(const std::string &path, std::string &out)
{
    FILE *f = fopen(path.c_str(), "rb");
    if (!f)
        return false;
    char b[65536];
    size_t n;
    while ((n = fread(b, 1, sizeof(b), f)) > 0)
        out.append(b, n);
    fclose(f);
    return true;
}

/* ---- HTTP ---------------------------------------------------------------- */

void reply(int fd, int code, const char *reason, const char *ctype, const std::string &body)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, reason, ctype, body.size());
    std::string all(head, (size_t)n);
    all += body;
    size_t off = 0;
    while (off < all.size()) {
        ssize_t w = send(fd, all.data() + off, all.size() - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

void serve(int fd, bool brpc)
{
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string req;
    char b[4096];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        req.append(b, (size_t)n);
    }
    size_t sp1 = req.find(' '), sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
    if (sp2 == std::string::npos) {
        reply(fd, 400, "Bad Request", "text/plain", "bad request line\n");
        return;
    }
    std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string query = path.find('?') == std::string::npos ? "" : path.substr(path.find('?') + 1);
    path = path.substr(0, path.find('?'));
    if (path == "/demo/tick") { /* the demo's own control, not a database endpoint */
        double minutes = 15;
        if (query.rfind("minutes=", 0) == 0) {
            char *end;
            minutes = strtod(query.c_str() + 8, &end);
            if (*end || !(minutes >= 0 && minutes <= 1440)) {
                reply(fd, 400, "Bad Request", "text/plain", "minutes=M: 0 to 1440\n");
                return;
            }
        }
        tick_wait(1, minutes);
        reply(fd, 200, "OK", "text/plain", "tick " + std::to_string(ticks) + "\n");
        return;
    }
    if (opt.role == Role::login) {
        reply(fd, 200, "OK", "text/html; charset=utf-8", login_page);
        return;
    }
    if (brpc) {
        if (path.compare(0, 6, "/vars/") == 0)
            reply(fd, 200, "OK", "text/plain", vars_text());
        else
            reply(fd, 404, "Not Found", "text/plain", "not found\n");
        return;
    }
    if (path == "/metrics") {
        reply(fd, 200, "OK", "text/plain; version=0.0.4", metrics_text());
        return;
    }
    if (opt.kind == Kind::starrocks && path == "/pprof/heap") {
        std::string f = dump_file(), body;
        if (f.empty() || !read_file(f, body)) {
            reply(fd, 200, "OK", "text/plain", ""); /* StarRocks' failed dump: empty 200 */
            return;
        }
        unlink(f.c_str()); /* StarRocks keeps it; the demo cleans up */
        reply(fd, 200, "OK", "text/plain", body);
        return;
    }
    if (opt.kind == Kind::doris) {
        if (path == "/jeheap/active/true") {
            bool on = true;
            mallctl("prof.active", nullptr, nullptr, &on, sizeof(on));
            reply(fd, 200, "OK", "application/json", "Jemalloc heap profiler started\n");
            return;
        }
        if (path == "/jeheap/dump") {
            std::string f = dump_file();
            if (f.empty())
                reply(fd, 500, "Internal Server Error", "application/json",
                      "jemalloc heap dump failed\n");
            else
                reply(fd, 200, "OK", "application/json",
                      "jemalloc heap dump success, dump file path: " + f + "\n");
            return;
        }
        if (path == "/mem_tracker") {
            reply(fd, 200, "OK", "text/html", tracker_html());
            return;
        }
        if (path == "/pprof/heap") {
            reply(fd, 200, "OK", "text/plain",
                  "Heap profiling is not available with address sanitizer or jemalloc builds.");
            return;
        }
    }
    reply(fd, 404, "Not Found", "text/plain", "not found\n");
}

int listen_on(int port, int *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    socklen_t al = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        fprintf(stderr, "dbnode: listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        close(fd);
        return -1;
    }
    *ret_port = ntohs(a.sin_port);
    return fd;
}

void on_signal(int) { stop = 1; }

int usage()
{
    fprintf(stderr, "usage: dbnode --kind doris|starrocks --role "
                    "steady|leak|bigjoin|undercount|login --dir DIR [--port P] "
                    "[--brpc-port P] [--tick SECONDS] [--scale BYTES]\n");
    return 2;
}

int run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc)
            return usage();
        std::string v = argv[++i];
        char *end = nullptr;
        if (a == "--kind" && (v == "doris" || v == "starrocks"))
            opt.kind = v == "doris" ? Kind::doris : Kind::starrocks;
        else if (a == "--role") {
            static const std::map<std::string, Role> roles = {
                {"steady", Role::steady}, {"leak", Role::leak}, {"bigjoin", Role::bigjoin},
                {"undercount", Role::undercount}, {"login", Role::login}};
            auto it = roles.find(v);
            if (it == roles.end())
                return usage();
            opt.role = it->second;
        } else if (a == "--dir")
            opt.dir = v;
        else if (a == "--port" || a == "--brpc-port") {
            long p = strtol(v.c_str(), &end, 10);
            if (*end || p < 0 || p > 65535)
                return usage();
            (a == "--port" ? opt.port : opt.brpc_port) = (int)p;
        } else if (a == "--tick") {
            opt.tick_s = strtod(v.c_str(), &end);
            if (*end || opt.tick_s < 0)
                return usage();
        } else if (a == "--scale") {
            unsigned long long s = strtoull(v.c_str(), &end, 10);
            if (*end || s < 4096)
                return usage();
            opt.scale = (size_t)s;
        } else
            return usage();
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    int http_port = 0, brpc_port = 0;
    int http = listen_on(opt.port, &http_port);
    int brpc = opt.kind == Kind::doris ? listen_on(opt.brpc_port, &brpc_port) : -2;
    if (http < 0 || brpc == -1)
        return 1;
    /* A node starts with its caches warm and a query running, so a steady
     * node's history is flat from the first dump on. */
    std::thread executor(executor_thread);
    tick_wait(12);
    printf("ready http=%d brpc=%d\n", http_port, brpc_port);
    fflush(stdout);
    std::thread worker([] {
        while (!stop && opt.tick_s > 0) {
            for (int i = 0; i < (int)(opt.tick_s * 10) && !stop; i++)
                usleep(100000);
            if (!stop)
                tick_wait(1, opt.tick_s / 60);
        }
    });
    struct pollfd pf[2] = {{http, POLLIN, 0}, {brpc, POLLIN, 0}};
    while (!stop) {
        int n = poll(pf, brpc >= 0 ? 2 : 1, 200);
        if (n <= 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (pf[k].fd < 0 || !(pf[k].revents & POLLIN))
                continue;
            int c = accept(pf[k].fd, nullptr, nullptr);
            if (c < 0)
                continue;
            serve(c, k == 1);
            close(c);
        }
    }
    worker.join();
    tick_cv.notify_all();
    executor.join();
    close(http);
    if (brpc >= 0)
        close(brpc);
    return 0;
}

} // namespace demo

int main(int argc, char **argv) { return demo::run(argc, argv); }
