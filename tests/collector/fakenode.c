/* fakenode: loopback HTTP servers that impersonate fleet nodes, for the
 * collector's integration tests, its benchmark and the README quick start.
 *
 * The process is linked with jemalloc and runs with profiling on (its own
 * malloc_conf below; MALLOC_CONF overrides), so every heap dump it serves is
 * a real prof.dump of this very process, made when the request arrives. It
 * allocates along a few named call paths first (and a little more on every
 * dump request, so successive dumps grow like a slow leak).
 *
 *   fakenode [--list FILE] [--dir DIR] [--stacks N] [--cache] SPEC...
 *   fakenode demo [--nodes N] [--bad] [--list FILE] [--dir DIR]
 *
 * SPEC is KIND[:MODE][xCOUNT]: KIND starrocks, doris, databend, agent, url;
 * MODE (default ok) one of
 *   ok        behave
 *   refuse    port bound but not listening: connection refused
 *   hang      accept, read the request, never answer
 *   trickle   announce the dump's length, then send one byte per 200 ms
 *   close     announce the dump's length, send half, close the connection
 *   500       HTTP 500 with Doris' "jemalloc heap dump failed" text
 *   empty     HTTP 200 with an empty body (StarRocks' failed dump)
 *   garbage   HTTP 200 with a heap_v2 header and a broken record on line 3
 *   huge      Content-Length: 2147483648, then zeros until the client goes
 *   flood     no Content-Length, zeros until the client goes
 *   html      HTTP 200 text/html login page instead of a dump
 *   redirect  302 to itself, forever
 *   gzip      the dump gzip-encoded (Content-Encoding: gzip)
 *   auth      HTTP basic auth required (user heapfleet, password in DIR/password)
 *   inactive  Doris with prof.active false until /jeheap/active/true
 *   noagent   Doris without agent= in the list (the collector cannot fetch)
 *   old       Doris before ~2.1: inactive, only /jeheap/prof/true switches it on
 *   notactive Doris with prof.active false and no activate=yes in the list
 * Misbehaviour applies to the dump endpoint; /metrics and the tracker pages
 * behave (except refuse, which takes the whole port). Doris nodes are served
 * with one shared agent listener (agent=) that serves /dumps/file?path=.
 *
 * It writes a node list (be.list) naming every node and prints one line per
 * node "NAME KIND MODE PORT" and then "ready" on stdout. --cache makes one
 * dump at start and serves it to every request (benchmarks: the node side
 * must not be the bottleneck); --vary (with --cache) serves that dump with
 * the bytes of its first two stacks and the totals changed per node and per
 * request, so every dump is new to the store yet differs from the node's
 * previous one by a few numbers, as a steady node's do (a store
 * deduplicates identical dumps: a benchmark of identical ones measures that
 * shortcut); --stacks N
 * allocates along N distinct call stacks (default 16; 2600 gives a dump of
 * about 1 MB). SIGINT/SIGTERM stop it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <jemalloc/jemalloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "store/hp.h"

/* Profiling on by default for this program (MALLOC_CONF still overrides). */
const char *malloc_conf = "prof:true,prof_active:true,lg_prof_sample:0";

#define NOINLINE __attribute__((noinline))
#define MAX_REQ 16384

enum kind { K_STARROCKS, K_DORIS, K_DATABEND, K_AGENT, K_URL, K_AGENT_LISTENER };
static const char *const kind_names[] = {"starrocks", "doris", "databend",
                                         "agent",     "url",   "agent-listener"};

enum mode {
    M_OK,
    M_REFUSE,
    M_HANG,
    M_TRICKLE,
    M_CLOSE,
    M_500,
    M_EMPTY,
    M_GARBAGE,
    M_HUGE,
    M_FLOOD,
    M_HTML,
    M_REDIRECT,
    M_GZIP,
    M_AUTH,
    M_INACTIVE,
    M_NOAGENT,
    M_OLD,
    M_NOTACTIVE,
    M_COUNT
};
static const char *const mode_names[] = {"ok",      "refuse",   "hang",     "trickle", "close",
                                         "500",     "empty",    "garbage",  "huge",    "flood",
                                         "html",    "redirect", "gzip",     "auth",    "inactive",
                                         "noagent", "old",      "notactive"};

struct fnode {
    enum kind kind;
    enum mode mode;
    char name[64];
    uv_tcp_t server;
    int refuse_fd;
    int port;
    bool active; /* Doris prof.active as the node believes it */
    unsigned dumps;
    unsigned idx; /* its place among the nodes */
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t sh;
    struct fnode *n;
    char req[MAX_REQ];
    size_t reqlen;
    bool responded;
    int closes; /* handles still open */
    char *head;
    size_t head_len;
    char *body; /* owned unless body_shared */
    bool body_shared;
    size_t body_len, sent;
    int stream; /* 1: zeros forever, 2: trickle */
    char zeros[65536];
};

static uv_loop_t *loop;
static const char *dir = ".";
static unsigned nstacks = 16;
static bool cache_mode, vary_mode;
static char *cached_dump;
static size_t cached_len;
static int agent_port;
static uv_signal_t sig_int, sig_term;
static struct fnode **nodes;
static size_t nnodes, nodes_cap;
static unsigned dump_seq;

/* ---- allocations along known paths ------------------------------------ */

static void **kept;
static size_t nkept, kept_cap;

static void keep(void *p)
{
    kept = hp_xgrow(kept, &kept_cap, nkept + 1, sizeof(*kept));
    kept[nkept++] = p;
}

static NOINLINE void *leaf_alloc(size_t sz)
{
    void *p = malloc(sz);
    memset(p, 0x5a, sz);
    return p;
}

static NOINLINE void *path_a(int depth, unsigned bits, size_t sz);
static NOINLINE void *path_b(int depth, unsigned bits, size_t sz);

/* Two mutually recursive functions: each bit of `bits` picks one of them at
 * one level, so 2^depth distinct call stacks end in leaf_alloc. */
static NOINLINE void *path_a(int depth, unsigned bits, size_t sz)
{
    void *p =
        depth == 0 ? leaf_alloc(sz) : ((bits & 1) ? path_b : path_a)(depth - 1, bits >> 1, sz + 8);
    __asm__ volatile("" ::: "memory"); /* keep the call a real call */
    return p;
}

static NOINLINE void *path_b(int depth, unsigned bits, size_t sz)
{
    void *p =
        depth == 0 ? leaf_alloc(sz) : ((bits & 1) ? path_b : path_a)(depth - 1, bits >> 1, sz + 16);
    __asm__ volatile("" ::: "memory");
    return p;
}

static NOINLINE void tablet_schema_cache_grow(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        keep(leaf_alloc(512 + (i % 5) * 64));
}

static NOINLINE void segment_reader_open(void)
{
    int depth = 0;
    while ((1u << depth) < nstacks)
        depth++;
    for (unsigned i = 0; i < nstacks; i++)
        keep(path_a(depth, i, 64));
}

/* ---- dumps ------------------------------------------------------------- */

static int dump_to(const char *path)
{
    const char *p = path;
    return mallctl("prof.dump", NULL, NULL, &p, sizeof(p));
}

static int make_dump(char **ret, size_t *ret_len, char **ret_path, bool keep_file)
{
    tablet_schema_cache_grow(8); /* a slow leak between dumps */
    char *path =
        hp_xasprintf("%s/jeheap_dump.%ld.%d.%u.heap", dir, (long)time(NULL), getpid(), dump_seq++);
    int r = dump_to(path);
    if (r != 0) {
        fprintf(stderr, "fakenode: prof.dump failed: %s (MALLOC_CONF needs prof:true)\n",
                strerror(r));
        free(path);
        return -1;
    }
    if (ret) {
        struct hp_buf err = HP_BUF_INIT(0);
        if (hp_file_read(path, (size_t)1 << 30, ret, ret_len, &err) < 0) {
            fprintf(stderr, "fakenode: %s\n", err.data);
            hp_buf_release(&err);
            free(path);
            return -1;
        }
        hp_buf_release(&err);
    }
    if (!keep_file)
        unlink(path);
    if (ret_path)
        *ret_path = path;
    else
        free(path);
    return 0;
}

/* ---- figures ------------------------------------------------------------ */

static uint64_t je_stat(const char *name)
{
    uint64_t epoch = 1;
    size_t sz = sizeof(epoch);
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t v = 0;
    sz = sizeof(v);
    if (mallctl(name, &v, &sz, NULL, 0) != 0)
        return 0;
    return v;
}

static uint64_t proc_status_kb(const char *key)
{
    char *data = NULL;
    size_t len = 0;
    uint64_t v = 0;
    if (hp_file_read("/proc/self/status", 1 << 20, &data, &len, NULL) < 0)
        return 0;
    const char *p = strstr(data, key);
    if (p) {
        p += strlen(key);
        while (*p == ' ' || *p == '\t' || *p == ':')
            p++;
        size_t n = strspn(p, "0123456789");
        if (hp_parse_u64(p, n, &v) < 0)
            v = 0;
    }
    free(data);
    return v * 1024;
}

static char *metrics_text(const struct fnode *n)
{
    uint64_t alloc = je_stat("stats.allocated"), active = je_stat("stats.active"),
             meta = je_stat("stats.metadata"), res = je_stat("stats.resident"),
             mapped = je_stat("stats.mapped"), retained = je_stat("stats.retained");
    uint64_t rss = proc_status_kb("VmRSS"), vm = proc_status_kb("VmSize");
    switch (n->kind) {
    case K_STARROCKS:
        return hp_xasprintf("# TYPE starrocks_be_fragment_requests_total counter\n"
                            "starrocks_be_fragment_requests_total %u\n"
                            "# TYPE starrocks_be_process_fd_num_used gauge\n"
                            "starrocks_be_process_fd_num_used 43\n"
                            "# TYPE starrocks_be_disks_avail_capacity gauge\n"
                            "starrocks_be_disks_avail_capacity{path=\"/data/storage\"} 1.2345e+12\n"
                            "# TYPE starrocks_be_process_mem_bytes gauge\n"
                            "starrocks_be_process_mem_bytes %llu\n"
                            "# TYPE starrocks_be_query_mem_bytes gauge\n"
                            "starrocks_be_query_mem_bytes %llu\n"
                            "# TYPE starrocks_be_load_mem_bytes gauge\n"
                            "starrocks_be_load_mem_bytes 0\n"
                            "# TYPE starrocks_be_metadata_mem_bytes gauge\n"
                            "starrocks_be_metadata_mem_bytes %llu\n"
                            "# TYPE starrocks_be_tablet_schema_mem_bytes gauge\n"
                            "starrocks_be_tablet_schema_mem_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_allocated_bytes gauge\n"
                            "starrocks_be_jemalloc_allocated_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_active_bytes gauge\n"
                            "starrocks_be_jemalloc_active_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_metadata_bytes gauge\n"
                            "starrocks_be_jemalloc_metadata_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_resident_bytes gauge\n"
                            "starrocks_be_jemalloc_resident_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_mapped_bytes gauge\n"
                            "starrocks_be_jemalloc_mapped_bytes %llu\n"
                            "# TYPE starrocks_be_jemalloc_retained_bytes gauge\n"
                            "starrocks_be_jemalloc_retained_bytes %llu\n",
                            n->dumps, (unsigned long long)alloc, (unsigned long long)(alloc / 4),
                            (unsigned long long)(alloc / 3), (unsigned long long)(alloc / 8),
                            (unsigned long long)alloc, (unsigned long long)active,
                            (unsigned long long)meta, (unsigned long long)res,
                            (unsigned long long)mapped, (unsigned long long)retained);
    case K_DORIS:
        return hp_xasprintf("# TYPE doris_be_fragment_requests_total counter\n"
                            "doris_be_fragment_requests_total %u\n"
                            "# TYPE doris_be_disks_total_capacity gauge\n"
                            "doris_be_disks_total_capacity{path=\"/data/doris\"} 999999999999\n"
                            "# TYPE doris_be_memory_allocated_bytes gauge\n"
                            "doris_be_memory_allocated_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_allocated_bytes gauge\n"
                            "doris_be_memory_jemalloc_allocated_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_active_bytes gauge\n"
                            "doris_be_memory_jemalloc_active_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_metadata_bytes gauge\n"
                            "doris_be_memory_jemalloc_metadata_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_resident_bytes gauge\n"
                            "doris_be_memory_jemalloc_resident_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_mapped_bytes gauge\n"
                            "doris_be_memory_jemalloc_mapped_bytes %llu\n"
                            "# TYPE doris_be_memory_jemalloc_retained_bytes gauge\n"
                            "doris_be_memory_jemalloc_retained_bytes %llu\n"
                            "# TYPE doris_be_memory_pgpgin gauge\n"
                            "doris_be_memory_pgpgin 12345\n",
                            n->dumps, (unsigned long long)rss, (unsigned long long)alloc,
                            (unsigned long long)active, (unsigned long long)meta,
                            (unsigned long long)res, (unsigned long long)mapped,
                            (unsigned long long)retained);
    default:
        return hp_xasprintf(
            "# HELP databend_process_resident_memory_bytes Resident memory size in bytes.\n"
            "# TYPE databend_process_resident_memory_bytes gauge\n"
            "databend_process_resident_memory_bytes %llu\n"
            "# TYPE databend_process_virtual_memory_bytes gauge\n"
            "databend_process_virtual_memory_bytes %llu\n"
            "# TYPE databend_query_http_requests_count counter\n"
            "databend_query_http_requests_count{method=\"GET\",api=\"/v1/query\"} 17\n"
            "# TYPE databend_session_connections_total counter\n"
            "databend_session_connections_total 3\n",
            (unsigned long long)rss, (unsigned long long)vm);
    }
}

static char *tracker_html(void)
{
    uint64_t alloc = je_stat("stats.allocated"), rss = proc_status_kb("VmRSS");
    uint64_t q = alloc / 4, g = alloc / 2, o = alloc / 16;
    return hp_xasprintf(
        "<!DOCTYPE html><html><head><title>Doris</title></head><body>\n"
        "<h2>Memory Tracker</h2>\n"
        "<p>MemTracker only counts the memory on part of the main execution path, which is "
        "usually less than the real process memory.</p>\n"
        "<table data-toggle='table' data-pagination='true' data-search='true' class='table "
        "table-hover'>\n"
        "<thead><tr><th data-sortable='true'>Type</th><th data-sortable='true'>Label</th>"
        "<th>Parent Label</th><th>Limit</th><th data-sortable='true'>Current "
        "Consumption(Bytes)</th><th>Current Consumption(Normalize)</th>"
        "<th>Peak Consumption(Bytes)</th><th>Peak Consumption(Normalize)</th></tr></thead>\n"
        "<tbody>\n"
        "<tr><td>overview</td><td>process resident memory</td><td></td><td>none</td>"
        "<td>%llu</td><td>%.2f MB</td><td>%llu</td><td>%.2f MB</td></tr>\n"
        "<tr><td>overview</td><td>sum of all trackers</td><td></td><td>none</td>"
        "<td>%llu</td><td>%.2f MB</td><td>%llu</td><td>%.2f MB</td></tr>\n"
        "<tr><td>global</td><td>Orphan &amp; Global</td><td></td><td>none</td>"
        "<td>%llu</td><td>x</td><td>%llu</td><td>x</td></tr>\n"
        "<tr><td>query</td><td>Query#Id=4f1c2e7a9b0d4e11-a3c5e7f901234567</td><td></td>"
        "<td>2.00 GB</td><td>%llu</td><td>x</td><td>%llu</td><td>x</td></tr>\n"
        "<tr><td>other</td><td>SchemaChange</td><td></td><td>none</td>"
        "<td>%llu</td><td>x</td><td>%llu</td><td>x</td></tr>\n"
        "</tbody></table></body></html>\n",
        (unsigned long long)rss, (double)rss / 1048576.0, (unsigned long long)rss,
        (double)rss / 1048576.0, (unsigned long long)(q + g + o), (double)(q + g + o) / 1048576.0,
        (unsigned long long)(q + g + o), (double)(q + g + o) / 1048576.0, (unsigned long long)g,
        (unsigned long long)g, (unsigned long long)q, (unsigned long long)(q * 2),
        (unsigned long long)o, (unsigned long long)o);
}

static char *vars_text(void)
{
    uint64_t alloc = je_stat("stats.allocated");
    return hp_xasprintf("memory_all_tracked_sum_bytes : %llu\n"
                        "memory_global_trackers_sum_bytes : %llu\n"
                        "memory_query_trackers_sum_bytes : %llu\n"
                        "memory_load_trackers_sum_bytes : 0\n"
                        "memory_untracked_memory_bytes : %llu\n"
                        "memory_reserved_memory_bytes : 0\n",
                        (unsigned long long)(alloc / 2 + alloc / 4),
                        (unsigned long long)(alloc / 2), (unsigned long long)(alloc / 4),
                        (unsigned long long)(alloc / 8));
}

static char *proc_json(void)
{
    return hp_xasprintf("{\"pid\":%d,\"comm\":\"fakenode\",\"rss_bytes\":%llu,\"vm_bytes\":%llu,"
                        "\"jemalloc\":{\"allocated\":%llu,\"active\":%llu,\"resident\":%llu}}",
                        getpid(), (unsigned long long)proc_status_kb("VmRSS"),
                        (unsigned long long)proc_status_kb("VmSize"),
                        (unsigned long long)je_stat("stats.allocated"),
                        (unsigned long long)je_stat("stats.active"),
                        (unsigned long long)je_stat("stats.resident"));
}

/* ---- connections ----------------------------------------------------------- */

static void conn_close_cb(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->closes == 0) {
        free(c->head);
        if (!c->body_shared)
            free(c->body);
        free(c);
    }
}

static void conn_close(struct conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_close_cb);
    uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    conn_close(c);
}

static void conn_finish(struct conn *c)
{
    c->sh.data = c;
    if (uv_shutdown(&c->sh, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
        conn_close(c);
}

static void stream_more(struct conn *c);

static void write_cb(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->stream == 1) {
        stream_more(c);
        return;
    }
    if (c->stream == 2)
        return; /* the trickle timer sends the rest */
    if (c->n->mode == M_CLOSE && c->n->kind != K_AGENT_LISTENER && c->sent < c->body_len) {
        conn_close(c); /* mid-body, without a FIN-delayed shutdown */
        return;
    }
    conn_finish(c);
}

static void stream_more(struct conn *c)
{
    uv_buf_t b = uv_buf_init(c->zeros, sizeof(c->zeros));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, write_cb) < 0)
        conn_close(c);
}

static void trickle_cb(uv_timer_t *t)
{
    struct conn *c = t->data;
    if (c->sent >= c->body_len) {
        uv_timer_stop(t);
        conn_finish(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->body + c->sent, 1);
    c->sent++;
    /* One byte at a time: uv_try_write either takes it or the peer is gone. */
    if (uv_try_write((uv_stream_t *)&c->tcp, &b, 1) < 0)
        conn_close(c);
}

/* Send head + body (body ownership moves to the connection). */
static void respond(struct conn *c, int code, const char *reason, const char *ctype,
                    const char *extra_headers, char *body, size_t body_len, bool shared,
                    size_t send_len)
{
    c->responded = true;
    c->body = body;
    c->body_len = body_len;
    c->body_shared = shared;
    c->head = hp_xasprintf("HTTP/1.1 %d %s\r\nServer: fakenode\r\nContent-Type: %s\r\n"
                           "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
                           code, reason, ctype, body_len, extra_headers ? extra_headers : "");
    c->head_len = strlen(c->head);
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)c->head_len),
                        uv_buf_init(body ? body : (char *)"", (unsigned)send_len)};
    c->sent = send_len;
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, bufs, send_len ? 2 : 1, write_cb) < 0)
        conn_close(c);
}

static void respond_text(struct conn *c, int code, const char *reason, const char *ctype,
                         char *body)
{
    size_t n = strlen(body);
    respond(c, code, reason, ctype, NULL, body, n, false, n);
}

static char *gzip_bytes(const char *data, size_t len, size_t *ret_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    char *out = hp_xmalloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    *ret_len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* Copies heap_v2 count line `line` ("  t*: OBJECTS: BYTES [...]") into out
 * with `delta` added to BYTES; the copy of anything else is verbatim. */
static void count_line_add(struct hp_buf *out, const char *line, size_t len, uint64_t delta)
{
    const char *colon = memchr(line, ':', len);
    const char *second = colon ? memchr(colon + 1, ':', len - (size_t)(colon + 1 - line)) : NULL;
    const char *end = second ? memchr(second, '[', len - (size_t)(second - line)) : NULL;
    uint64_t bytes;
    if (!end || end < second + 3 || hp_parse_u64(second + 2, (size_t)(end - 1 - (second + 2)), &bytes) < 0) {
        hp_buf_append(out, line, len);
        return;
    }
    hp_buf_append(out, line, (size_t)(second + 2 - line));
    hp_buf_printf(out, "%" PRIu64, bytes + delta);
    hp_buf_append(out, end - 1, len - (size_t)(end - 1 - line));
}

/* --vary: the cached dump with 8 * node more bytes in its first stack, 8 *
 * request more in its second, and the totals (lines 2-3) to match: unique
 * per (node, request), each a few KB off the cached dump's 700 KB. */
static char *vary_dump(const char *src, size_t len, uint64_t node, uint64_t request,
                       size_t *ret_len)
{
    struct hp_buf out = HP_BUF_INIT(0);
    size_t off = 0;
    int line = 0, stacks = 0, stack_line = 0;
    while (off < len) {
        const char *nl = memchr(src + off, '\n', len - off);
        size_t l = nl ? (size_t)(nl - (src + off)) + 1 : len - off;
        uint64_t add = 0;
        if (++line == 2 || line == 3)
            add = 8 * (node + request);
        if (src[off] == '@') {
            stacks++;
            stack_line = 0;
        } else if (stacks && stacks <= 2 && ++stack_line <= 2) {
            add = 8 * (stacks == 1 ? node : request);
        }
        if (add)
            count_line_add(&out, src + off, l, add);
        else
            hp_buf_append(&out, src + off, l);
        off += l;
    }
    return hp_buf_detach(&out, ret_len);
}

/* The dump endpoint, with the node's misbehaviour. */
static void serve_dump(struct conn *c, bool accepts_gzip)
{
    struct fnode *n = c->n;
    switch (n->mode) {
    case M_HANG:
        c->responded = true;
        return;
    case M_500:
        respond_text(c, 500, "Internal Server Error", "application/json",
                     hp_xstrdup("jemalloc heap dump failed\n"));
        return;
    case M_EMPTY:
        respond(c, 200, "OK", "text/plain", NULL, NULL, 0, false, 0);
        return;
    case M_GARBAGE:
        respond_text(c, 200, "OK", "text/plain",
                     hp_xstrdup("heap_v2/524288\n  t*: 10: 5120 [0: 0]\n@ 0x55d1c2a01000 "
                                "0xZZZZ not-an-address\n  t*: banana\n"));
        return;
    case M_HTML:
        respond_text(c, 200, "OK", "text/html; charset=utf-8",
                     hp_xstrdup("<!DOCTYPE html>\n<html><head><title>Sign in - corp SSO"
                                "</title></head><body><form action=\"/login\">User <input "
                                "name=u></form></body></html>\n"));
        return;
    case M_REDIRECT: {
        char *loc = hp_xasprintf("Location: http://127.0.0.1:%d/pprof/heap\r\n", n->port);
        c->responded = true;
        respond(c, 302, "Found", "text/plain", loc, NULL, 0, false, 0);
        free(loc);
        return;
    }
    case M_HUGE:
    case M_FLOOD:
        c->responded = true;
        c->head =
            hp_xstrdup(n->mode == M_HUGE ? "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                           "Content-Length: 2147483648\r\nConnection: close\r\n\r\n"
                                         : "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                           "Connection: close\r\n\r\n");
        c->stream = 1;
        {
            uv_buf_t b = uv_buf_init(c->head, (unsigned)strlen(c->head));
            c->wr.data = c;
            if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, write_cb) < 0)
                conn_close(c);
        }
        return;
    default:
        break;
    }
    char *dump;
    size_t len;
    bool shared = false;
    if (vary_mode) {
        dump = vary_dump(cached_dump, cached_len, n->idx, n->dumps, &len);
    } else if (cache_mode) {
        dump = cached_dump;
        len = cached_len;
        shared = true;
    } else if (make_dump(&dump, &len, NULL, false) < 0) {
        respond_text(c, 500, "Internal Server Error", "text/plain",
                     hp_xstrdup("dump jemalloc prof file failed\n"));
        return;
    }
    n->dumps++;
    if (n->mode == M_GZIP && accepts_gzip) {
        size_t zl;
        char *z = gzip_bytes(dump, len, &zl);
        if (!shared)
            free(dump);
        respond(c, 200, "OK", "application/octet-stream", "Content-Encoding: gzip\r\n", z, zl,
                false, zl);
        return;
    }
    if (n->mode == M_TRICKLE) {
        respond(c, 200, "OK", "text/plain", NULL, dump, len, shared, 0);
        c->stream = 2;
        uv_timer_start(&c->timer, trickle_cb, 200, 200);
        return;
    }
    if (n->mode == M_CLOSE) {
        respond(c, 200, "OK", "text/plain", NULL, dump, len, shared, len / 2);
        return;
    }
    /* Databend names the file in Content-Disposition; StarRocks sends plain text. */
    respond(c, 200, "OK", n->kind == K_DATABEND ? "application/octet-stream" : "text/plain",
            n->kind == K_DATABEND
                ? "Content-Disposition: attachment; filename=\"heap_dump_x.prof\"\r\n"
                : NULL,
            dump, len, shared, len);
}

static char *url_decode(const char *s, size_t n)
{
    char *out = hp_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hp_hex_digit(s[i + 1]) >= 0 &&
            hp_hex_digit(s[i + 2]) >= 0) {
            out[o++] = (char)(hp_hex_digit(s[i + 1]) * 16 + hp_hex_digit(s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}

static void serve_agent_file(struct conn *c, const char *query)
{
    const char *p = strstr(query, "path=");
    if (!p) {
        respond_text(c, 400, "Bad Request", "text/plain", hp_xstrdup("missing path=\n"));
        return;
    }
    p += 5;
    char *path = url_decode(p, strcspn(p, "&"));
    size_t dl = strlen(dir);
    /* Only dump files inside our directory, like the real agent. */
    if (strncmp(path, dir, dl) != 0 || path[dl] != '/' || strstr(path, "..")) {
        respond_text(c, 403, "Forbidden", "text/plain",
                     hp_xasprintf("not a dump file: %s\n", path));
        free(path);
        return;
    }
    char *data;
    size_t len;
    if (hp_file_read(path, (size_t)1 << 30, &data, &len, NULL) < 0) {
        respond_text(c, 404, "Not Found", "text/plain", hp_xasprintf("no such dump: %s\n", path));
        free(path);
        return;
    }
    free(path);
    respond(c, 200, "OK", "application/octet-stream", NULL, data, len, false, len);
}

static bool header_has(const char *req, const char *name, const char *value_part)
{
    const char *p = req;
    size_t nl = strlen(name);
    while ((p = strchr(p, '\n'))) {
        p++;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char *line = hp_xstrndup(p, len);
            bool has = strstr(line, value_part) != NULL;
            free(line);
            if (has)
                return true;
        }
    }
    return false;
}

static void handle_request(struct conn *c)
{
    struct fnode *n = c->n;
    char method[8], target[2048];
    const char *sp1 = memchr(c->req, ' ', c->reqlen);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', c->reqlen - (size_t)(sp1 + 1 - c->req)) : NULL;
    if (!sp1 || !sp2 || (size_t)(sp1 - c->req) >= sizeof(method) ||
        (size_t)(sp2 - sp1 - 1) >= sizeof(target)) {
        respond_text(c, 400, "Bad Request", "text/plain", hp_xstrdup("bad request line\n"));
        return;
    }
    memcpy(method, c->req, (size_t)(sp1 - c->req));
    method[sp1 - c->req] = '\0';
    memcpy(target, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    target[sp2 - sp1 - 1] = '\0';
    char *q = strchr(target, '?');
    const char *query = "";
    if (q) {
        *q = '\0';
        query = q + 1;
    }
    bool gz = header_has(c->req, "Accept-Encoding", "gzip");
    if (strcmp(method, "GET") != 0) {
        respond_text(c, 405, "Method Not Allowed", "text/plain", hp_xstrdup("GET only\n"));
        return;
    }
    if (n->mode == M_AUTH &&
        /* heapfleet:s3cret */
        !header_has(c->req, "Authorization", "Basic aGVhcGZsZWV0OnMzY3JldA==")) {
        respond(c, 401, "Unauthorized", "text/plain",
                "WWW-Authenticate: Basic realm=\"fakenode\"\r\n", hp_xstrdup("401 Unauthorized\n"),
                strlen("401 Unauthorized\n"), false, strlen("401 Unauthorized\n"));
        return;
    }
    const char *path = target;
    bool metrics = !strcmp(path, "/metrics") &&
                   (n->kind == K_STARROCKS || n->kind == K_DORIS || n->kind == K_DATABEND);
    if (metrics) {
        respond_text(c, 200, "OK", "text/plain; version=0.0.4", metrics_text(n));
        return;
    }
    switch (n->kind) {
    case K_STARROCKS:
        if (!strcmp(path, "/pprof/heap")) {
            serve_dump(c, gz);
            return;
        }
        break;
    case K_DATABEND:
        if (!strcmp(path, "/debug/mem/pprof/profile")) {
            serve_dump(c, gz);
            return;
        }
        break;
    case K_URL:
        serve_dump(c, gz);
        return;
    case K_DORIS:
        if (!strcmp(path, n->mode == M_OLD ? "/jeheap/prof/true" : "/jeheap/active/true")) {
            n->active = true;
            respond_text(c, 200, "OK", "application/json",
                         hp_xstrdup("Jemalloc heap profiler started\n"));
            return;
        }
        if (!strcmp(path, "/mem_tracker")) {
            respond_text(c, 200, "OK", "text/html", tracker_html());
            return;
        }
        if (!strncmp(path, "/vars/", 6)) {
            respond_text(c, 200, "OK", "text/plain", vars_text());
            return;
        }
        if (!strcmp(path, "/jeheap/dump")) {
            bool inactive = n->mode == M_INACTIVE || n->mode == M_OLD || n->mode == M_NOTACTIVE;
            if (inactive && !n->active) {
                respond_text(c, 500, "Internal Server Error", "application/json",
                             hp_xstrdup("Jemalloc heap profiler is not enabled, refer to the "
                                        "following method to enable it.\ncurl "
                                        "http://be_host:be_webport/jeheap/active/true\n"));
                return;
            }
            if (n->mode != M_OK && !inactive && n->mode != M_NOAGENT) {
                serve_dump(c, gz);
                return;
            }
            char *dpath;
            if (make_dump(NULL, NULL, &dpath, true) < 0) {
                respond_text(c, 500, "Internal Server Error", "application/json",
                             hp_xstrdup("jemalloc heap dump failed\n"));
                return;
            }
            n->dumps++;
            respond_text(c, 200, "OK", "application/json",
                         hp_xasprintf("jemalloc heap dump success, dump file path: %s\n", dpath));
            free(dpath);
            return;
        }
        break;
    case K_AGENT:
    case K_AGENT_LISTENER:
        if (!strcmp(path, "/dumps/file")) {
            serve_agent_file(c, query);
            return;
        }
        if (!strcmp(path, "/dumps/newest")) {
            serve_dump(c, gz);
            return;
        }
        if (!strcmp(path, "/proc")) {
            respond_text(c, 200, "OK", "application/json", proc_json());
            return;
        }
        break;
    }
    respond_text(c, 404, "Not Found", "text/plain", hp_xasprintf("no handler for %s\n", path));
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    size_t room = sizeof(c->req) - 1 - c->reqlen;
    if (room == 0) {
        /* Past the request: read into scratch (we ignore what follows). */
        buf->base = c->zeros;
        buf->len = sizeof(c->zeros);
        return;
    }
    buf->base = c->req + c->reqlen;
    buf->len = room;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->responded || buf->base == c->zeros) {
        memset(c->zeros, 0, sizeof(c->zeros));
        return;
    }
    c->reqlen += (size_t)nread;
    c->req[c->reqlen] = '\0';
    if (strstr(c->req, "\r\n\r\n")) {
        handle_request(c);
    } else if (c->reqlen >= sizeof(c->req) - 1) {
        respond_text(c, 431, "Request Header Fields Too Large", "text/plain",
                     hp_xstrdup("headers too large\n"));
    }
}

static void connection_cb(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct fnode *n = server->data;
    struct conn *c = hp_xcalloc(1, sizeof(*c));
    c->n = n;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->closes = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/* ---- setup ------------------------------------------------------------------- */

static struct fnode *node_add(enum kind k, enum mode m, const char *name)
{
    struct fnode *n = hp_xcalloc(1, sizeof(*n));
    n->kind = k;
    n->mode = m;
    n->refuse_fd = -1;
    snprintf(n->name, sizeof(n->name), "%s", name);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    if (m == M_REFUSE) {
        /* Bound but never listening: connect() gets ECONNREFUSED, and the
         * port cannot be reused by someone else meanwhile. */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        socklen_t al = sizeof(addr);
        if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
            getsockname(fd, (struct sockaddr *)&addr, &al) < 0) {
            fprintf(stderr, "fakenode: socket: %s\n", strerror(errno));
            exit(1);
        }
        n->refuse_fd = fd;
        n->port = ntohs(addr.sin_port);
    } else {
        uv_tcp_init(loop, &n->server);
        n->server.data = n;
        int r = uv_tcp_bind(&n->server, (struct sockaddr *)&addr, 0);
        if (r == 0)
            r = uv_listen((uv_stream_t *)&n->server, 1024, connection_cb);
        if (r < 0) {
            fprintf(stderr, "fakenode: listen: %s\n", uv_strerror(r));
            exit(1);
        }
        struct sockaddr_storage ss;
        int al = sizeof(ss);
        uv_tcp_getsockname(&n->server, (struct sockaddr *)&ss, &al);
        n->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    nodes = hp_xgrow(nodes, &nodes_cap, nnodes + 1, sizeof(*nodes));
    n->idx = (unsigned)nnodes;
    nodes[nnodes++] = n;
    return n;
}

static int parse_spec(const char *spec, enum kind *k, enum mode *m, unsigned *count)
{
    char *s = hp_xstrdup(spec);
    *count = 1;
    *m = M_OK;
    char *x = strrchr(s, 'x');
    if (x && x[1] >= '0' && x[1] <= '9') {
        uint64_t v;
        if (hp_parse_u64(x + 1, strlen(x + 1), &v) < 0 || v == 0 || v > 20000) {
            free(s);
            return -1;
        }
        *count = (unsigned)v;
        *x = '\0';
    }
    char *colon = strchr(s, ':');
    if (colon) {
        *colon = '\0';
        int found = -1;
        for (int i = 0; i < M_COUNT; i++)
            if (!strcmp(colon + 1, mode_names[i]))
                found = i;
        if (found < 0) {
            free(s);
            return -1;
        }
        *m = (enum mode)found;
    }
    int kf = -1;
    for (int i = 0; i <= K_URL; i++)
        if (!strcmp(s, kind_names[i]))
            kf = i;
    free(s);
    if (kf < 0)
        return -1;
    *k = (enum kind)kf;
    return 0;
}

static void list_line(struct hp_buf *b, const struct fnode *n)
{
    switch (n->kind) {
    case K_URL:
        (void)hp_buf_printf(b, "url http://127.0.0.1:%d/debug/heap/profile name=%s", n->port,
                            n->name);
        break;
    case K_DORIS:
        (void)hp_buf_printf(b, "doris 127.0.0.1:%d name=%s brpc=127.0.0.1:%d", n->port, n->name,
                            n->port);
        if (n->mode != M_NOAGENT)
            (void)hp_buf_printf(b, " agent=127.0.0.1:%d", agent_port);
        if (n->mode == M_INACTIVE || n->mode == M_OLD)
            (void)hp_buf_puts(b, " activate=yes");
        break;
    default:
        (void)hp_buf_printf(b, "%s 127.0.0.1:%d name=%s", kind_names[n->kind], n->port, n->name);
        break;
    }
    if (n->mode == M_AUTH)
        (void)hp_buf_printf(b, " user=heapfleet password_file=%s/password", dir);
    (void)hp_buf_printf(b, " mode=%s\n", mode_names[n->mode]);
}

static void signal_cb(uv_signal_t *s, int signum)
{
    /* Listening sockets and connections die with the process. */
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *list_path = NULL;
    bool demo = false, demo_bad = false;
    unsigned demo_n = 6;
    int i = 1;
    if (i < argc && !strcmp(argv[i], "demo")) {
        demo = true;
        i++;
    }
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(a, "--list") && v)
            list_path = v, i++;
        else if (!strcmp(a, "--dir") && v)
            dir = v, i++;
        else if (!strcmp(a, "--cache"))
            cache_mode = true;
        else if (!strcmp(a, "--vary"))
            vary_mode = true;
        else if (!strcmp(a, "--bad"))
            demo_bad = true;
        else if (!strcmp(a, "--stacks") && v && hp_parse_u64(v, strlen(v), &u) == 0 && u > 0 &&
                 u <= 65536)
            nstacks = (unsigned)u, i++;
        else if (!strcmp(a, "--nodes") && v && hp_parse_u64(v, strlen(v), &u) == 0 && u > 0 &&
                 u <= 1000)
            demo_n = (unsigned)u, i++;
        else {
            fprintf(stderr, "fakenode: bad option %s (see the header of fakenode.c)\n", a);
            return 2;
        }
    }
    if (!demo && i >= argc) {
        fprintf(stderr, "usage: fakenode [--list FILE] [--dir DIR] [--stacks N] [--cache [--vary]] "
                        "KIND[:MODE][xCOUNT]...\n       fakenode demo [--nodes N] [--bad] "
                        "[--list FILE] [--dir DIR]\n");
        return 2;
    }
    /* Many nodes mean many sockets. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    mkdir(dir, 0755);
    char abs_dir[4096];
    if (!realpath(dir, abs_dir)) {
        fprintf(stderr, "fakenode: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    dir = hp_xstrdup(abs_dir);
    bool prof = false;
    size_t sz = sizeof(prof);
    if (mallctl("opt.prof", &prof, &sz, NULL, 0) != 0 || !prof) {
        fprintf(stderr, "fakenode: jemalloc profiling is off (run with MALLOC_CONF=prof:true)\n");
        return 1;
    }
    {
        char *pw = hp_xasprintf("%s/password", dir);
        FILE *f = fopen(pw, "w");
        if (f) {
            fputs("s3cret\n", f);
            fclose(f);
        }
        free(pw);
    }
    loop = uv_default_loop();
    segment_reader_open();
    tablet_schema_cache_grow(32);
    if (vary_mode && !cache_mode) {
        fprintf(stderr, "fakenode: --vary changes the --cache dump: give both\n");
        return 2;
    }
    if (cache_mode && make_dump(&cached_dump, &cached_len, NULL, false) < 0)
        return 1;

    /* Node specs. */
    struct spec {
        enum kind k;
        enum mode m;
        unsigned count;
    } specs[256];
    size_t nspecs = 0;
    if (demo) {
        static const enum kind cycle[] = {K_STARROCKS, K_DORIS, K_DATABEND,
                                          K_AGENT,     K_URL,   K_STARROCKS};
        for (unsigned k = 0; k < demo_n && nspecs < 256; k++)
            specs[nspecs++] = (struct spec){cycle[k % 6], M_OK, 1};
        if (demo_bad && nspecs + 3 <= 256) {
            specs[nspecs++] = (struct spec){K_STARROCKS, M_REFUSE, 1};
            specs[nspecs++] = (struct spec){K_STARROCKS, M_EMPTY, 1};
            specs[nspecs++] = (struct spec){K_DORIS, M_NOAGENT, 1};
        }
    } else {
        for (; i < argc && nspecs < 256; i++) {
            if (parse_spec(argv[i], &specs[nspecs].k, &specs[nspecs].m, &specs[nspecs].count) < 0) {
                fprintf(stderr, "fakenode: bad node spec \"%s\" (KIND[:MODE][xCOUNT])\n", argv[i]);
                return 2;
            }
            nspecs++;
        }
    }
    bool need_agent = false;
    for (size_t s = 0; s < nspecs; s++)
        need_agent |= specs[s].k == K_DORIS;
    if (need_agent)
        agent_port = node_add(K_AGENT_LISTENER, M_OK, "agent")->port;
    unsigned seen[5][M_COUNT] = {{0}};
    for (size_t s = 0; s < nspecs; s++) {
        for (unsigned c = 0; c < specs[s].count; c++) {
            char name[64];
            unsigned idx = ++seen[specs[s].k][specs[s].m];
            if (demo && specs[s].m == M_OK)
                snprintf(name, sizeof(name), "%s-%u", kind_names[specs[s].k], idx);
            else if (demo)
                snprintf(name, sizeof(name), "%s-%s", kind_names[specs[s].k],
                         mode_names[specs[s].m]);
            else if (idx == 1 && specs[s].count == 1)
                snprintf(name, sizeof(name), "%s-%s", kind_names[specs[s].k],
                         mode_names[specs[s].m]);
            else
                snprintf(name, sizeof(name), "%s-%s-%u", kind_names[specs[s].k],
                         mode_names[specs[s].m], idx);
            node_add(specs[s].k, specs[s].m, name);
        }
    }
    struct hp_buf list = HP_BUF_INIT(0);
    (void)hp_buf_printf(&list, "# written by fakenode (pid %d); dumps in %s\n", getpid(), dir);
    for (size_t k = 0; k < nnodes; k++) {
        if (nodes[k]->kind == K_AGENT_LISTENER)
            continue;
        list_line(&list, nodes[k]);
        printf("%s %s %s %d\n", nodes[k]->name, kind_names[nodes[k]->kind],
               mode_names[nodes[k]->mode], nodes[k]->port);
    }
    if (list_path) {
        /* Write then rename: a test polling for the file never reads half. */
        char *tmp = hp_xasprintf("%s.tmp", list_path);
        FILE *f = fopen(tmp, "w");
        if (!f || fwrite(list.data, 1, list.len, f) != list.len || fclose(f) != 0 ||
            rename(tmp, list_path) != 0) {
            fprintf(stderr, "fakenode: cannot write %s: %s\n", list_path, strerror(errno));
            return 1;
        }
        free(tmp);
    }
    hp_buf_release(&list);
    printf("ready\n");
    fflush(stdout);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_int, signal_cb, SIGINT);
    uv_signal_init(loop, &sig_term);
    uv_signal_start(&sig_term, signal_cb, SIGTERM);
    uv_run(loop, UV_RUN_DEFAULT);
    return 0;
}
