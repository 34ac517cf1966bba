/* Private to the collector executable: pieces main.c wires together. */
#ifndef HP_COLLECTOR_INTERNAL_H
#define HP_COLLECTOR_INTERNAL_H

#include "collector/daemon.h"
#include "store/store.h"

struct sym_server;

/* How the store sink symbolizes (see sym.h's sym_options). */
struct collector_sym_config {
    const char *binary;      /* the main executable, or NULL */
    const char *symbols_dir; /* folder of binaries and debug files, or NULL */
    /* symbols_dir is the local mirror of the store's uploaded files
     * (store_symfiles_sync): the sink fills it at start and keeps it in
     * step while it runs. */
    bool symbols_from_store;
    const struct sym_server *servers; /* --debuginfod, asked in order, before */
    size_t nservers;                  /* $DEBUGINFOD_URLS */
    const char *cache_dir;   /* downloaded binaries; NULL: the symbolizer's default */
    uint64_t cache_max;      /* their cache in all, least recently used out; 0: 16 GiB */
    /* Snapshots stored with a build unnamed: the first wait before every
     * source is asked again (it doubles up to 1 h), 0: 1 min. */
    uint64_t resym_backoff_ms;
    /* Collectors sharing a fleet (a PostgreSQL --db): this one's identity
     * (NULL: HOST:PID), its lease (a collector silent this long is dead and
     * its nodes go to the others), the round interval. */
    const char *collector_id;
    int64_t lease_s;
    uint64_t interval_ms;
};

/* The SQLite sink (sink-store.c): every attempt into the store at `db`,
 * dumps symbolized once per binary with the store's symbol cache. Retention
 * (--retain, --thin-after; NULL or zeros keep everything) runs at most hourly
 * between two records. */
int collector_storesink_new(const char *db, const struct collector_sym_config *symcfg,
                            const struct store_retain_policy *retain,
                            struct collector_sink **ret, struct hp_buf *err) HP_MUST_CHECK;

/* The store sink's figures in Prometheus text, appended to out: the
 * collectors sharing a fleet (PostgreSQL), nothing on SQLite. Any thread;
 * the sink must be a store sink and still open. */
void collector_storesink_metrics(struct collector_sink *sink, struct hp_buf *out);

/* The web API/UI on the daemon's loop, serving the store at db. listen is
 * "HOST:PORT"; static_dir the UI files (NULL: API only); token_file optional;
 * max_view_stacks the view budget (0: none); health (borrowed, optional) adds
 * the collector's own figures to /metrics, sink (borrowed, optional) those of
 * the store sink (collectors sharing a fleet). */
int collector_web_service_new(const char *listen, const char *allowed_hosts, const char *db,
                              const char *static_dir, const char *token_file,
                              const char *rules_file, uint64_t max_view_stacks,
                              struct collector_health *health, struct collector_sink *sink,
                              struct collector_service **ret, struct hp_buf *err) HP_MUST_CHECK;
void collector_web_service_free(struct collector_service *s);

#endif
