/* The SQLite sink: keeps every poll result in the store (store/store.h).
 *
 * Runs on a libuv worker thread; the daemon never calls record twice at once,
 * so the sink owns one writer connection and one symbolizer without locks.
 * Each fetched dump is symbolized here, once per binary: the symbolizer keeps
 * what it resolved in memory and in the store's symbol cache (keyed by
 * build-id), so the next hourly profile of the same binary resolves from the
 * cache. The raw dump is stored in the same transaction as everything derived
 * from it; a dump that did not parse is stored raw with its error, so a later
 * `query reindex` can re-derive it. */
#include <stdlib.h>
#include <string.h>

#include "collector/daemon.h"
#include "collector/poll/poll.h"
#include "collector/sym/sym.h"
#include "store/profile.h"
#include "store/store.h"

struct store_sink {
    struct collector_sink base;
    struct store *st;
    struct symbolizer *sym;
    struct sym_cache_ops cache_ops;
    struct hp_arena cache_arena; /* strings of the last cache answer */
    uint64_t stored, failed;
};

static int cache_load_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame **ret_frames, uint32_t *ret_n)
{
    struct store_sink *s = ctx;
    /* Frames of one answer live until the next call (sym.h's contract). */
    hp_arena_release(&s->cache_arena);
    struct profile_frame *frames = NULL;
    uint32_t n = 0;
    int r = store_symcache_get(s->st, build_id, vaddr, &s->cache_arena, &frames, &n, NULL);
    if (r == 1) {
        *ret_frames = frames;
        *ret_n = n;
    }
    return r;
}

static int cache_save_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame *frames, uint32_t n)
{
    struct store_sink *s = ctx;
    return store_symcache_put(s->st, build_id, vaddr, frames, n, NULL);
}

static const char *unit_of(const char *name)
{
    /* Units as the series name states them (Prometheus naming rules). */
    const char *brace = strchr(name, '{');
    size_t n = brace ? (size_t)(brace - name) : strlen(name);
    if (n >= 6 && memcmp(name + n - 6, "_bytes", 6) == 0)
        return "bytes";
    if (n >= 4 && memcmp(name + n - 4, "_num", 4) == 0)
        return "count";
    return NULL;
}

static enum store_status failure_status(const struct collector_result *r)
{
    if (r->dump && r->parse_error)
        return STORE_STATUS_PARSE_FAILED;
    if (r->status == HP_ETOOBIG)
        return STORE_STATUS_TOO_BIG;
    if (r->error && (strstr(r->error, "not enabled") || strstr(r->error, "not activ")))
        return STORE_STATUS_INACTIVE;
    return STORE_STATUS_FETCH_FAILED;
}

static int store_sink_record(struct collector_sink *base, const struct collector_result *r,
                             struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    const struct poll_node *node = r->node;
    struct hp_buf labels = HP_BUF_INIT(0);
    for (size_t i = 0; i < node->nlabels; i++)
        hp_buf_printf(&labels, "%s%s=%s", i ? " " : "", node->labels[i].key,
                      node->labels[i].value);
    struct store_node_info ni = {
        .name = node->name,
        .kind = poll_kind_name(node->kind),
        .address = node->addr,
        .labels = labels.data,
    };
    int64_t node_id = 0, snap_id = 0;
    struct store_stat *stats = NULL;
    size_t nstats = 0;
    int rc = store_node_upsert(s->st, &ni, &node_id, err);
    if (rc < 0)
        goto out;
    if (r->figures && r->figures->n) {
        stats = hp_xcalloc(r->figures->n, sizeof(*stats));
        for (size_t i = 0; i < r->figures->n; i++) {
            stats[nstats].name = r->figures->v[i].name;
            stats[nstats].unit = unit_of(r->figures->v[i].name);
            stats[nstats].value = r->figures->v[i].value;
            nstats++;
        }
    }
    struct store_fetch_info fi = STORE_FETCH_INFO_INIT;
    fi.source = r->dump_url;
    fi.fetch_ms = (int64_t)r->dump_ms;
    if (r->activated_ms)
        fi.prof_active = 1;
    if (r->status == 0 && r->profile) {
        /* The daemon hands the parsed profile over for this call; the sink
         * symbolizes it in place before storing (see daemon.h). */
        struct profile *p = (struct profile *)r->profile;
        uint64_t t0 = hp_now_ns();
        struct hp_buf serr = HP_BUF_INIT(0);
        struct sym_stats st;
        if (sym_profile(s->sym, p, &st, &serr) == 0) {
            for (size_t i = 0; i < st.nobjects; i++)
                if (st.objects[i].status < 0 && st.objects[i].addresses > 0)
                    hp_log_debug("sink", "node=%s object=%s msg=\"%s\"", node->name,
                                 st.objects[i].path, st.objects[i].message);
        } else {
            hp_log_warn("sink", "node=%s msg=\"symbolization failed: %s\"", node->name,
                        serr.data ? serr.data : "");
        }
        hp_buf_release(&serr);
        fi.symbolize_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        rc = store_snapshot_insert(s->st, node_id, r->started_ms, p, r->dump, r->dump_len, &fi,
                                   stats, nstats, &snap_id, err);
        if (rc == 0)
            s->stored++;
    } else {
        struct hp_buf why = HP_BUF_INIT(0);
        hp_buf_puts(&why, r->parse_error ? r->parse_error : r->error ? r->error : "no dump");
        if (r->figures_error)
            hp_buf_printf(&why, "; figures: %s", r->figures_error);
        rc = store_snapshot_attempt_record(s->st, node_id, r->started_ms, failure_status(r),
                                           why.data, r->dump, r->dump_len, &fi, stats, nstats,
                                           &snap_id, err);
        hp_buf_release(&why);
        s->failed++;
    }
out:
    free(stats);
    hp_buf_release(&labels);
    return rc;
}

static void store_sink_close(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    hp_log_info("sink", "stored=%llu failed=%llu db=%s msg=\"closing the database\"",
                (unsigned long long)s->stored, (unsigned long long)s->failed,
                store_path(s->st));
    sym_free(s->sym);
    store_close(s->st);
    hp_arena_release(&s->cache_arena);
    free(s);
}

int collector_storesink_new(const char *db, const struct collector_sym_config *symcfg,
                            struct collector_sink **ret, struct hp_buf *err)
{
    struct store *st = NULL;
    int r = store_open(db, STORE_OPEN_WRITE, &st, err);
    if (r < 0)
        return r;
    struct store_sink *s = hp_xcalloc(1, sizeof(*s));
    s->st = st;
    hp_arena_init(&s->cache_arena);
    s->cache_ops = (struct sym_cache_ops){
        .ctx = s,
        .load_cb = cache_load_cb,
        .save_cb = cache_save_cb,
    };
    struct sym_options so = {
        .binary = symcfg ? symcfg->binary : NULL,
        .symbols_dir = symcfg ? symcfg->symbols_dir : NULL,
        .cache_ops = &s->cache_ops,
    };
    s->sym = sym_new(&so);
    s->base.record = store_sink_record;
    s->base.close = store_sink_close;
    *ret = &s->base;
    return 0;
}
