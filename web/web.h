/* web: heapfleet's HTTP API and UI, served by h2o on a libuv loop the caller
 * owns (the collector's loop, or hf-web's own for development).
 *
 * The server knows nothing about SQLite, polling or files: it reads through a
 * narrow data source (struct web_source_ops) and answers with the query
 * library (query/query.h), so the API prints what the `query` CLI prints. Two
 * sources exist: the store-backed one below (what the collector serves) and
 * the folder source (web/folder/folder.h: a folder of profile files, for
 * hf-web and the tests), which lives above web/ because it parses and
 * symbolizes files itself.
 *
 * Threads: web_server_start/stop run on the loop thread. Source callbacks run
 * on libuv worker threads (uv_queue_work), possibly several at once, so a
 * source must be thread-safe. Results come back to the loop thread, which
 * writes the responses.
 *
 * The process must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)), as with any
 * libuv server: a client that hangs up mid-response must not kill it. */
#ifndef HP_WEB_H
#define HP_WEB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

struct uv_loop_s;
struct web_server;
struct query_opts;
struct query_snapshot;
struct query_stored;
struct query_trend_opts;

/* ---- the data source ------------------------------------------------------ */

/* A parsed snapshot selector, as the CLI takes it (DESIGN.md): NODE (latest),
 * NODE@TIME (at or before TIME) or #ID. The web layer has validated it. */
struct web_selector {
    const char *node; /* NULL for #ID */
    int64_t at_ms;    /* NODE@TIME: wall clock ms; 0 for "latest" */
    int64_t id;       /* #ID, else 0 */
};

/* Memory figures a snapshot may carry besides the profile itself (the node's
 * /metrics, jemalloc stats, its memory tracker). NaN when unknown. */
struct web_figures {
    double rss;
    double je_allocated, je_active, je_resident, je_metadata, je_retained;
    double tracker_total; /* the node's own accounting of what it uses */
    double symbolized_ratio; /* share of in-use bytes whose frames are named */
};

struct web_tracker {
    const char *name; /* as the node reports it ("Query", "SegmentCache", ...) */
    double bytes;
};

/* One figure exactly as the node published it (Prometheus or bvar name,
 * "tracker:<label>" rows): what the discrepancy rules match against. */
struct web_raw_figure {
    const char *name;
    double value;
};

struct web_snapshot_info {
    int64_t id;
    const char *node;
    int64_t time_ms;            /* when it was taken */
    const char *format;         /* "jemalloc", "gperf", "pprof", "collapsed" */
    int64_t raw_bytes;          /* size of the stored dump */
    double total[PV_COUNT];     /* un-sampled totals; NaN when not computed */
    struct web_figures fig;
    struct web_tracker *trackers; /* may be NULL */
    size_t ntrackers;
    struct web_raw_figure *raw;   /* every stored figure; may be NULL */
    size_t nraw;
    /* A loaded snapshot over the source's view budget keeps only its
     * heaviest stacks (by `pruned_rank`): how many it has, how many were
     * dropped, and what they held (un-sampled). stacks_dropped 0: whole. */
    int64_t stacks_total, stacks_dropped;
    double dropped[PV_COUNT];
    enum profile_value pruned_rank;
};

struct web_node_info {
    const char *name;
    const char *kind;       /* doris, starrocks, databend, agent, url, dir */
    const char *address;    /* HOST:PORT or URL; may be NULL */
    const char *status;     /* "ok", "failing", "never" */
    const char *error;      /* last failure in words, or NULL */
    int64_t last_attempt_ms; /* 0 when never */
    int64_t nsnapshots;
    bool has_latest;
    struct web_snapshot_info latest; /* valid when has_latest */
};

/* Everything returned is allocated in the arena the caller passes (strings
 * and arrays alike) and lives as long as that arena. Return codes: 0, or
 * HP_ENOTFOUND (unknown node or nothing matches the selector, message in err),
 * or another HP_E* with a message in err. A NULL op means "this source cannot
 * answer that" and the endpoint says 501. Called on worker threads. */
struct web_source_ops {
    int (*list_nodes)(void *ctx, struct hp_arena *a, struct web_node_info **ret, size_t *ret_n,
                      struct hp_buf *err);
    /* Snapshots of one node taken at or after since_ms (0: all), oldest
     * first, at most `limit` (the newest ones). */
    int (*list_snapshots)(void *ctx, const char *node, int64_t since_ms, size_t limit,
                          struct hp_arena *a, struct web_snapshot_info **ret, size_t *ret_n,
                          struct hp_buf *err);
    /* Resolve a selector and load that snapshot's profile (symbolized where
     * the source can). *ret_profile is owned by the caller (profile_free).
     * A source with a view budget keeps a bigger snapshot's heaviest stacks
     * by `rank` (the value the view draws) and says so in ret_info. */
    int (*load_snapshot)(void *ctx, const struct web_selector *sel, enum profile_value rank,
                         struct hp_arena *a, struct web_snapshot_info *ret_info,
                         struct profile **ret_profile, struct hp_buf *err);
    /* Optional (the store source): fill snaps[0..n) (one node's, each
     * with its id from list_snapshots) with their samples as stack ids and
     * values for leaks, as `query leaks` reads them (query/stored.h: no
     * profile is loaded). What they point into is *ret's, freed with
     * query_stored_free. Without it, leaks loads and folds profiles. */
    int (*load_stored)(void *ctx, const struct query_opts *o, struct query_snapshot *snaps,
                       size_t n, struct query_stored **ret, struct hp_buf *err);
    /* Optional (the store source): trend's function columns for snaps[0..n)
     * (with ids from list_snapshots) from the stored function totals, as
     * `query trend` takes them (query_stored_trend_functions; only where
     * query_stored_trend_ok(o)). Without it, trend loads and folds
     * profiles. */
    int (*trend_functions)(void *ctx, const struct query_opts *o,
                           const struct query_snapshot *snaps, size_t n,
                           struct query_trend_opts *t, struct query_stored **ret,
                           struct hp_buf *err);
    /* Optional (the store source): the raw dump the snapshot `sel` names
     * was read from, byte for byte as the node served it (by #ID also a
     * failed attempt's); *ret_data malloc'd, the caller frees it.
     * ret_info: its id and node. */
    int (*raw_dump)(void *ctx, const struct web_selector *sel, struct hp_arena *a,
                    struct web_snapshot_info *ret_info, void **ret_data, size_t *ret_len,
                    struct hp_buf *err);
    /* Symbolization status as a JSON object text appended to out. */
    int (*symbolization)(void *ctx, struct hp_buf *out, struct hp_buf *err);
    /* Extra Prometheus exposition lines (the collector's own health:
     * rounds, failures, fetch latency, store size), appended to out. */
    int (*metrics)(void *ctx, struct hp_buf *out);
};

/* A source backed by the SQLite store (what the collector serves): a small
 * pool of read-only connections, so worker threads never share one. The
 * database must exist. Thread-safe. */
struct web_source_store;
int web_source_store_new(const char *db, struct web_source_store **ret, struct hp_buf *err);
void web_source_store_free(struct web_source_store *w);
/* The view budget: a snapshot with more than max_stacks stacks is not
 * loaded for a view (HP_ETOOBIG, said in words) instead of taking seconds
 * and GBs per request. 0: no budget. Before serving starts. */
void web_source_store_set_max_stacks(struct web_source_store *w, uint64_t max_stacks);
extern const struct web_source_ops web_source_store_ops;

/* ---- polling on request ----------------------------------------------------- */

/* How a poll asked for through POST /api/v1/nodes/NAME/snapshot ended.
 * Borrowed for the duration of the callback. */
struct web_poll_outcome {
    int status;        /* 0: a snapshot was recorded and is readable through the source */
    const char *error; /* the failure in words; NULL on success */
    int64_t started_ms, finished_ms; /* wall clock; the snapshot's time is started_ms */
    size_t nattempts;  /* HTTP requests made for it, retries included */
};
typedef void web_poll_done_cb(void *arg, const struct web_poll_outcome *o);

/* Start polling `node` now (the web library reaches the poller only through
 * this hook; the collector sets it). Loop thread. Returns 0 and later calls
 * done(arg, outcome) on the loop thread exactly once (never from inside
 * this call), before the poller lets the server stop; or returns without
 * calling done: HP_ENOTFOUND (unknown node, "did you mean" in err),
 * HP_ERR(EBUSY) (a poll of that node is under way), HP_ERR(ECANCELED)
 * (shutting down), another HP_E*, each with its message in err. */
typedef int web_poll_now_fn(void *ctx, const char *node, web_poll_done_cb *done, void *arg,
                            struct hp_buf *err);

/* ---- the server ------------------------------------------------------------ */

struct web_config {
    const char *listen;     /* "HOST:PORT"; port 0 picks a free one. Default 127.0.0.1:7070 */
    const char *static_dir; /* folder of the UI files; NULL serves no UI (404) */
    const char *token;      /* bearer token required for all but /metrics; NULL: none */
    unsigned max_jobs;      /* data requests in flight before 503 (default 16) */
    size_t max_body;        /* cap on one response body (default 256 MiB) */
    /* Without a token, the Host names (comma-separated, "name" or
     * "name:port") answered besides IP literals and localhost; anything else
     * gets 403 (DNS rebinding). NULL: none. */
    const char *allowed_hosts;
    unsigned max_connections; /* open connections; the oldest is evicted past it (1024) */
    unsigned header_timeout_ms; /* request headers and idle keep-alive (default 10000) */
    /* Text of a discrepancy rules file (query/INTERNALS.md §6) applied on top
     * of each node kind's built-in rules, for /api/v1/discrepancy and the
     * /metrics tracker series; NULL: none. web_server_start refuses text
     * that does not parse (err says file:line). Copied. */
    const char *rules;
    const char *rules_origin; /* its file name, for messages */
    /* "Take a snapshot now" (POST /api/v1/nodes/NAME/snapshot): with a
     * token, for bearers of it; without, for loopback clients only. NULL:
     * the endpoint answers 501 (hf-web polls nothing). */
    web_poll_now_fn *poll_now;
    void *poll_ctx;
};

/* Defaults: 127.0.0.1:7070, the UI from web_static_dir_default(), no token,
 * 16 jobs, 256 MiB bodies. */
void web_config_init(struct web_config *c);
/* The installed UI folder (DATADIR/heapfleet/web) if present, else the
 * source tree's web/static. */
const char *web_static_dir_default(void);

/* Read a token file: the first line, trailing whitespace dropped; refuses
 * empty tokens and files over 4 KiB. *ret is malloc'd. */
int web_token_read(const char *path, char **ret, struct hp_buf *err) HP_MUST_CHECK;

/* Bind and start serving on `loop` (loop thread). The source is borrowed and
 * must outlive the server. On failure err says why (bad address, port in
 * use) and at most a closing handle is left, gone after the loop runs once. */
int web_server_start(struct uv_loop_s *loop, const struct web_config *cfg,
                     const struct web_source_ops *src, void *src_ctx, struct web_server **ret,
                     struct hp_buf *err) HP_MUST_CHECK;

/* The bound port (useful with port 0). */
int web_server_port(const struct web_server *s);

typedef void web_server_stopped_cb(void *arg);
/* Stop (loop thread): stop accepting, cancel queued jobs, let running ones
 * finish, close every connection and every handle h2o opened, then free the
 * server and call cb(arg) on the loop. After cb the loop holds nothing of the
 * server, so uv_loop_close() can return 0. cb may be NULL. */
void web_server_stop(struct web_server *s, web_server_stopped_cb *cb, void *arg);

#endif
