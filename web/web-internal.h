/* Private to web/: the request object passed from the h2o side (server.c,
 * loop thread) to the API side (api.c, worker threads) and back. */
#ifndef HP_WEB_INTERNAL_H
#define HP_WEB_INTERNAL_H

#include "query/query.h"
#include "web/web.h"

#define WEB_MAX_PARAMS 16
#define WEB_MAX_SEGMENTS 8
#define WEB_MAX_SELECTOR 256
#define WEB_MAX_NODE 128
#define WEB_MAX_REGEX 256
#define WEB_MAX_PATH 2048

struct web_route;

/* Validated parameters, decoded into typed fields. */
struct web_params {
    struct query_opts qo;      /* sample, focus, ignore, top, no_inline, ... */
    enum query_format format;
    bool has_format;
    bool download;
    int64_t since_ms;          /* 0: all */
    size_t limit;              /* 0: default */
    size_t spark;              /* points of sparkline per node */
    size_t points;             /* snapshots: downsample to about this many (0: off) */
    bool normalize;            /* diff: compare shares of each side's total */
    double prune;              /* tree: merge children under this share */
    struct web_selector sel;   /* {sel} in the path */
    struct web_selector a, b;  /* diff */
    const char *node;          /* {node} in the path or ?node= */
    const char *function;      /* trend: functions to chart (regex) */
    const char *sel_text;      /* selector as given, for messages */
    const char *a_text, *b_text;
};

struct web_request {
    struct hp_arena arena;     /* everything below that is not the body */
    const struct web_route *route;
    struct web_params p;
    const struct web_source_ops *src;
    void *src_ctx;
    struct web_verdicts *verdicts; /* /metrics only: the server's verdict cache */
    const char *rules;             /* the server's rules text (web_config.rules) or NULL */
    size_t max_body;
    bool post;                     /* the method is POST (else GET) */
    bool can_poll;                 /* the server has a poller (web_config.poll_now) */
    struct web_poll_outcome poll;  /* POST .../snapshot: how the poll ended (error NULL) */
    /* result */
    int status;
    const char *content_type;
    const char *disposition;   /* Content-Disposition value or NULL */
    const char *allow;         /* with 405: the method the path takes */
    struct hp_buf body;
};

void web_request_init(struct web_request *r, const struct web_source_ops *src, void *src_ctx,
                      size_t max_body);
void web_request_release(struct web_request *r);

/* Loop thread: route `path` (raw, before '?') and validate `query` (raw text
 * after '?', may be NULL), for r->post's method. Returns 1 when the request
 * needs web_api_run on a worker (or, for a POST, the server's poller), 0
 * when the response is already in r (404, 400, 405, 501 ...). */
int web_api_prepare(struct web_request *r, const char *path, size_t path_len, const char *query,
                    size_t query_len);
/* Worker thread: run the handler, filling status/content_type/body. */
void web_api_run(struct web_request *r);

/* The API's handlers (api.c), one per route of the route table (params.c);
 * worker threads. */
void web_h_nodes(struct web_request *r);
void web_h_snapshots(struct web_request *r);
void web_h_snapshot(struct web_request *r);
void web_h_top(struct web_request *r);
void web_h_tree(struct web_request *r);
void web_h_profile(struct web_request *r);
void web_h_raw(struct web_request *r);
void web_h_diff(struct web_request *r);
void web_h_symbolization(struct web_request *r);
void web_h_discrepancy(struct web_request *r);
void web_h_leaks(struct web_request *r);
void web_h_trend(struct web_request *r);
void web_h_fleet(struct web_request *r);
/* POST /api/v1/nodes/{node}/snapshot, once the poll succeeded (r->poll):
 * the snapshot it stored. */
void web_h_poll_result(struct web_request *r);

/* Set a JSON error response {"error": msg, "status": code}. */
void web_api_error(struct web_request *r, int status, const char *fmt, ...) HP_PRINTF(3, 4);

/* Snapshots loaded and folded for the series analyses (leaks, fleet,
 * trend, the verdict series of /metrics): profiles and folds owned here,
 * query_snapshot views of them (names in r's arena). Worker thread. */
struct web_loaded {
    struct query_folded **folds;
    struct query_snapshot *qs;
    size_t n;
    struct query_stored *stored; /* web_api_load_series: what qs point into */
};
int web_api_load_many(struct web_request *r, const int64_t *ids, size_t n, struct web_loaded *L,
                      struct hp_buf *err);
/* One stored snapshot loaded and folded (its profile freed at once): *ret_qs
 * points at *ret_fold (the caller's, query_folded_free) and at figures in
 * r's arena. For analyses that keep one snapshot at a time. */
int web_api_load_one(struct web_request *r, int64_t id, struct query_snapshot *ret_qs,
                     struct query_folded **ret_fold, struct hp_buf *err);
void web_api_loaded_release(struct web_loaded *L);
/* One node's snapshots snaps[0..n) (from list_snapshots) for leaks: by
 * stack ids where the source reads them so (the store: the path `query
 * leaks` takes, no profile loaded), else loaded and folded. */
int web_api_load_series(struct web_request *r, const struct web_snapshot_info *snaps, size_t n,
                        struct web_loaded *L, struct hp_buf *err);
/* The discrepancy rules for a node of `kind` with these figures: the kind's
 * built-in rules, then the server's rules text on top. */
int web_api_rules(const struct web_request *r, const char *kind, const struct query_figure *figs,
                  size_t n, struct query_rules **ret, struct hp_buf *err);

/* The verdict series of /metrics (leak suspects, fleet outliers, tracker
 * disagreements), computed on a worker thread and cached per round: the
 * cache is reused while every node's latest snapshot id is unchanged. One
 * per server; thread-safe. */
struct web_verdicts;
struct web_verdicts *web_verdicts_new(void);
void web_verdicts_free(struct web_verdicts *v);
/* Append the series for `nodes` (as list_nodes returned them) to out. */
void web_verdicts_metrics(struct web_verdicts *v, struct web_request *r,
                          const struct web_node_info *nodes, size_t n, struct hp_buf *out);

/* Server health figures /metrics prints (kept by server.c on the loop). */
struct web_stats {
    uint64_t started_ms;
    uint64_t requests[6];      /* by status class: 1xx..5xx, [0] unused */
    uint64_t connections_open, connections_total, connections_evicted;
    uint64_t jobs_running, jobs_rejected;
    /* Handler latency histogram (seconds), cumulative buckets. */
    uint64_t lat_bucket[10];
    double lat_sum;
    uint64_t lat_count;
};

extern const double web_latency_bounds[10];

/* Prometheus text: HELP and TYPE lines (label values: hp_buf_prom_label). */
void web_metrics_family(struct hp_buf *b, const char *name, const char *type, const char *help);

/* Worker thread: render the /metrics page into r (source figures included). */
void web_metrics_run(struct web_request *r, const struct web_stats *snapshot);

/* Selector syntax check and parse (see DESIGN.md); message in err. */
int web_selector_parse(const char *s, int64_t now_ms, struct hp_arena *a,
                       struct web_selector *ret, struct hp_buf *err);
/* ISO 8601 (2026-11-22T07:00:00Z, ±HH:MM offsets, date only) or relative
 * (-6h, -7d) time into wall ms. */
int web_time_parse(const char *s, int64_t now_ms, int64_t *ret_ms);

#endif
