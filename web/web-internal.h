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
    double prune;              /* tree: merge children under this share */
    struct web_selector sel;   /* {sel} in the path */
    struct web_selector a, b;  /* diff */
    const char *node;          /* {node} in the path or ?node= */
    const char *sel_text;      /* selector as given, for messages */
    const char *a_text, *b_text;
};

struct web_request {
    struct hp_arena arena;     /* everything below that is not the body */
    const struct web_route *route;
    struct web_params p;
    const struct web_source_ops *src;
    void *src_ctx;
    size_t max_body;
    /* result */
    int status;
    const char *content_type;
    const char *disposition;   /* Content-Disposition value or NULL */
    struct hp_buf body;
};

void web_request_init(struct web_request *r, const struct web_source_ops *src, void *src_ctx,
                      size_t max_body);
void web_request_release(struct web_request *r);

/* Loop thread: route `path` (raw, before '?') and validate `query` (raw text
 * after '?', may be NULL). Returns 1 when the request needs web_api_run on a
 * worker, 0 when the response is already in r (404, 400, 501 ...). */
int web_api_prepare(struct web_request *r, const char *path, size_t path_len, const char *query,
                    size_t query_len);
/* Worker thread: run the handler, filling status/content_type/body. */
void web_api_run(struct web_request *r);

/* Whether /profile can render this format in this build. */
bool web_api_format_ready(enum query_format f);

/* Set a JSON error response {"error": msg, "status": code}. */
void web_api_error(struct web_request *r, int status, const char *fmt, ...) HP_PRINTF(3, 4);

/* Server health figures /metrics prints (kept by server.c on the loop). */
struct web_stats {
    uint64_t started_ms;
    uint64_t requests[6];      /* by status class: 1xx..5xx, [0] unused */
    uint64_t connections_open, connections_total;
    uint64_t jobs_running, jobs_rejected;
    /* Handler latency histogram (seconds), cumulative buckets. */
    uint64_t lat_bucket[10];
    double lat_sum;
    uint64_t lat_count;
};

extern const double web_latency_bounds[10];

/* Worker thread: render the /metrics page into r (source figures included). */
void web_metrics_run(struct web_request *r, const struct web_stats *snapshot);

/* Append s as a JSON string (quoted, escaped; invalid UTF-8 replaced). */
void web_json_str(struct hp_buf *b, const char *s);

/* Selector syntax check and parse (see DESIGN.md); message in err. */
int web_selector_parse(const char *s, int64_t now_ms, struct hp_arena *a,
                       struct web_selector *ret, struct hp_buf *err);
/* ISO 8601 (2026-11-22T07:00:00Z, ±HH:MM offsets, date only) or relative
 * (-6h, -7d) time into wall ms. */
int web_time_parse(const char *s, int64_t now_ms, int64_t *ret_ms);

#endif
