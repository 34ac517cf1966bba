/* The web API and UI on the collector's own loop (--listen): a
 * collector_service that serves the store the collector writes, through the
 * store-backed web source. Handlers that read the database run on worker
 * threads (web/), so polling on the loop never waits for a query. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "collector/collector-internal.h"
#include "web/web.h"

struct web_service {
    struct collector_service base;
    struct web_config cfg;
    char *db;
    char *token;
    struct web_source_store *src;
    struct web_server *srv;
};

static int web_service_start(struct collector_service *base, uv_loop_t *loop,
                             struct hp_buf *err)
{
    struct web_service *w = hp_container_of(base, struct web_service, base);
    int r = web_source_store_new(w->db, &w->src, err);
    if (r < 0)
        return r;
    r = web_server_start(loop, &w->cfg, &web_source_store_ops, w->src, &w->srv, err);
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

int collector_web_service_new(const char *listen, const char *db, const char *static_dir,
                              const char *token_file, struct collector_service **ret,
                              struct hp_buf *err)
{
    struct web_service *w = hp_xcalloc(1, sizeof(*w));
    web_config_init(&w->cfg);
    w->cfg.listen = listen;
    w->cfg.static_dir = static_dir;
    if (token_file && web_token_read(token_file, &w->token, err) < 0) {
        free(w);
        return HP_EUSAGE;
    }
    w->cfg.token = w->token;
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
    free(w);
}
