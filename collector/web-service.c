/* The web API and UI on the collector's own loop (--listen): a
 * collector_service that serves the store the collector writes, through the
 * store-backed web source. Handlers that read the database run on worker
 * threads (web/), so polling on the loop never waits for a query.
 *
 * "Take a snapshot now" crosses the layers here: web/ knows nothing of the
 * daemon (it is below it in docs/DESIGN.md's table), so the server gets a
 * web_poll_now_fn hook, and this file translates it into
 * collector_daemon_poll_now and the outcome back. Both run on the loop. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "collector/collector-internal.h"
#include "web/web.h"

struct web_service {
    struct collector_service base;
    struct web_source_ops ops;  /* the store source's, with the collector's health added */
    struct collector_health *health; /* borrowed, optional: the collector's own figures */
    struct collector_sink *sink;     /* borrowed, optional: the store sink's (fleet) figures */
    struct web_config cfg;
    char *db;
    char *token;
    char *rules; /* --rules FILE's text */
    struct web_source_store *src;
    struct web_server *srv;
    struct collector_daemon *daemon; /* from start; valid until stop */
    uint64_t max_view_stacks;
};

/* One poll the web server waits for. */
struct svc_poll {
    web_poll_done_cb *done;
    void *arg;
};

static void svc_poll_done_cb(void *arg, const struct collector_poll_outcome *o)
{
    struct svc_poll *p = arg;
    struct web_poll_outcome wo = {
        .status = o->status,
        .error = o->error,
        .started_ms = o->started_ms,
        .finished_ms = o->finished_ms,
        .nattempts = o->nattempts,
    };
    web_poll_done_cb *done = p->done;
    void *darg = p->arg;
    free(p);
    done(darg, &wo);
}

static int svc_poll_now(void *ctx, const char *node, web_poll_done_cb *done, void *arg,
                        struct hp_buf *err)
{
    struct web_service *w = ctx;
    struct svc_poll *p = hp_xcalloc(1, sizeof(*p));
    p->done = done;
    p->arg = arg;
    int r = collector_daemon_poll_now(w->daemon, node, svc_poll_done_cb, p, err);
    if (r < 0)
        free(p);
    return r;
}

/* The source calls are the store source's; metrics adds the collector's own
 * health (rounds, polls by outcome, poll times) to the store's figures. */
static int svc_list_nodes(void *ctx, struct hp_arena *a, struct web_node_info **ret,
                          size_t *ret_n, struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.list_nodes(w->src, a, ret, ret_n, err);
}

static int svc_list_snapshots(void *ctx, const char *node, int64_t since_ms, size_t limit,
                              struct hp_arena *a, struct web_snapshot_info **ret, size_t *ret_n,
                              struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.list_snapshots(w->src, node, since_ms, limit, a, ret, ret_n,
                                               err);
}

static int svc_load_snapshot(void *ctx, const struct web_selector *sel, enum profile_value rank,
                             struct hp_arena *a, struct web_snapshot_info *ret_info,
                             struct profile **ret_profile, struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.load_snapshot(w->src, sel, rank, a, ret_info, ret_profile, err);
}

static int svc_load_stored(void *ctx, const struct query_opts *o, struct query_snapshot *snaps,
                           size_t n, struct query_stored **ret, struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.load_stored(w->src, o, snaps, n, ret, err);
}

static int svc_trend_functions(void *ctx, const struct query_opts *o,
                               const struct query_snapshot *snaps, size_t n,
                               struct query_trend_opts *t, struct query_stored **ret,
                               struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.trend_functions(w->src, o, snaps, n, t, ret, err);
}

static int svc_raw_dump(void *ctx, const struct web_selector *sel, struct hp_arena *a,
                        struct web_snapshot_info *ret_info, void **ret_data, size_t *ret_len,
                        struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.raw_dump(w->src, sel, a, ret_info, ret_data, ret_len, err);
}

static int svc_symbolization(void *ctx, struct hp_buf *out, struct hp_buf *err)
{
    struct web_service *w = ctx;
    return web_source_store_ops.symbolization(w->src, out, err);
}

static int svc_metrics(void *ctx, struct hp_buf *out)
{
    struct web_service *w = ctx;
    if (w->health)
        collector_health_metrics(w->health, out);
    if (w->sink)
        collector_storesink_metrics(w->sink, out);
    return web_source_store_ops.metrics(w->src, out);
}

static int web_service_start(struct collector_service *base, uv_loop_t *loop,
                             struct collector_daemon *d, struct hp_buf *err)
{
    struct web_service *w = hp_container_of(base, struct web_service, base);
    w->daemon = d;
    w->cfg.poll_now = svc_poll_now;
    w->cfg.poll_ctx = w;
    int r = web_source_store_new(w->db, &w->src, err);
    if (r < 0)
        return r;
    web_source_store_set_max_stacks(w->src, w->max_view_stacks);
    r = web_server_start(loop, &w->cfg, &w->ops, w, &w->srv, err);
    if (r < 0) {
        web_source_store_free(w->src);
        w->src = NULL;
        return r;
    }
    const char *colon = strrchr(w->cfg.listen, ':');
    int hostlen = colon ? (int)(colon - w->cfg.listen) : (int)strlen(w->cfg.listen);
    hp_log_info("web", "url=http://%.*s:%d/ msg=\"serving the API and UI\"", hostlen,
                w->cfg.listen, web_server_port(w->srv));
    return 0;
}

static void stopped_cb(void *arg)
{
    struct web_service *w = arg;
    web_source_store_free(w->src);
    w->src = NULL;
    w->srv = NULL;
}

static void web_service_stop(struct collector_service *base)
{
    struct web_service *w = hp_container_of(base, struct web_service, base);
    if (w->srv)
        web_server_stop(w->srv, stopped_cb, w);
}

int collector_web_service_new(const char *listen, const char *allowed_hosts, const char *db,
                              const char *static_dir,
                              const char *token_file, const char *rules_file,
                              uint64_t max_view_stacks, struct collector_health *health,
                              struct collector_sink *sink, struct collector_service **ret,
                              struct hp_buf *err)
{
    struct web_service *w = hp_xcalloc(1, sizeof(*w));
    w->max_view_stacks = max_view_stacks;
    w->health = health;
    w->sink = sink;
    /* Every op named: one copied from the store source would be called
     * with this service as its context (an op added there, not here, read
     * a web_service as a web_source_store). One missing here is only
     * missing: the API says 501, or takes its slower path. */
    w->ops = (struct web_source_ops){
        .list_nodes = svc_list_nodes,
        .list_snapshots = svc_list_snapshots,
        .load_snapshot = svc_load_snapshot,
        .load_stored = svc_load_stored,
        .trend_functions = svc_trend_functions,
        .raw_dump = svc_raw_dump,
        .symbolization = svc_symbolization,
        .metrics = svc_metrics,
    };
    web_config_init(&w->cfg);
    w->cfg.listen = listen;
    w->cfg.allowed_hosts = allowed_hosts;
    w->cfg.static_dir = static_dir;
    if (token_file && web_token_read(token_file, &w->token, err) < 0) {
        free(w);
        return HP_EUSAGE;
    }
    w->cfg.token = w->token;
    if (rules_file) {
        size_t len = 0;
        if (hp_file_read(rules_file, 1u << 20, &w->rules, &len, err) < 0) {
            free(w->token);
            free(w);
            return HP_EUSAGE;
        }
        if (memchr(w->rules, '\0', len)) {
            hp_err_printf(err, "%s: NUL byte in a rules file", rules_file);
            free(w->rules);
            free(w->token);
            free(w);
            return HP_EUSAGE;
        }
        w->cfg.rules = w->rules;
        w->cfg.rules_origin = rules_file;
    }
    w->db = hp_xstrdup(db);
    w->base.start = web_service_start;
    w->base.stop = web_service_stop;
    *ret = &w->base;
    return 0;
}

void collector_web_service_free(struct collector_service *base)
{
    if (!base)
        return;
    struct web_service *w = hp_container_of(base, struct web_service, base);
    free(w->db);
    free(w->token);
    free(w->rules);
    free(w);
}
