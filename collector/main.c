/* collector: poll every node of a fleet for heap profiles on a schedule.
 *
 *   collector --nodes be.list [--interval 1h] [--db heapfleet.db]
 *             [--listen 127.0.0.1:7070] [--once] [--out DIR] ...
 *
 * This file only turns argv into a collector_config, picks the sink and the
 * parser, and calls collector_daemon_run(); everything else is in daemon.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collector-internal.h"
#include "collector/daemon.h"
#include "web/web.h"
#include "collector/ingest/ingest.h"
#include "store/store.h"
#include "collector/poll/poll.h"

static uint64_t parse_max_bytes;

/* Parse a fetched dump on a worker thread; the limits follow --max-body. */
static int parse_dump(const void *data, size_t len, struct profile **ret, struct hp_buf *err)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    if (parse_max_bytes && parse_max_bytes < lim.max_bytes)
        lim.max_bytes = (size_t)parse_max_bytes;
    return ingest_parse(data, len, &lim, ret, err);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: collector --nodes FILE [options]\n"
            "\n"
            "Polls every node in FILE (be.list) for a heap profile and memory figures,\n"
            "one round every --interval, and records every attempt.\n"
            "\n"
            "  --nodes FILE          node list: [KIND] HOST:PORT [name=N] [key=value ...]\n"
            "  --interval DUR        time between rounds (default 1h; 90s, 15m, 1h, 1d)\n"
            "  --spread DUR          spread each round's start over DUR (default interval/10,\n"
            "                        at most 5m; 0 with --once)\n"
            "  --once                run one round, print a summary, exit 1 if a node failed\n"
            "  --max-inflight N      nodes polled at once (default 32)\n"
            "  --retries N           extra tries after a transient failure (default 2)\n"
            "  --retry-base DUR      first retry delay, doubled each time, jittered (default 1s)\n"
            "  --connect-timeout DUR (default 5s)\n"
            "  --timeout DUR         whole request (default 60s)\n"
            "  --max-body SIZE       largest response accepted (default 512M)\n"
            "  --strict              refuse a node list with any bad line\n"
            "  --check               only check the node list: print each node, exit 1 on a\n"
            "                        bad line\n"
            "  --db FILE             SQLite database (default $HEAPFLEET_DB or heapfleet.db)\n"
            "  --out DIR             instead of a database: dumps and a JSON line per attempt\n"
            "  --retain DUR          delete snapshots older than DUR (default 90d; 0 keeps all)\n"
            "  --thin-after DUR      older snapshots: one per node per day (default 7d; 0 off)\n"
            "  --binary FILE         the nodes' main executable, for symbolization\n"
            "  --symbols DIR         binaries and debug files (also .build-id/xx/rest.debug)\n"
            "  --listen ADDR         HTTP API and UI (default 127.0.0.1:7070; off disables)\n"
            "  --token-file FILE     require \"Authorization: Bearer <token>\" (not for /metrics)\n"
            "  --static DIR          the UI's files (default: the installed ones; none: API only)\n"
            "  --log-level LEVEL     error, warn, info (default), debug\n"
            "  --no-progress         no progress lines during a round\n"
            "  -h, --help\n"
            "\n"
            "Node list: one node per line, '#' comments:\n"
            "  starrocks HOST:PORT          GET /pprof/heap, /metrics\n"
            "  doris HOST:PORT agent=H:P    /jeheap/dump (file fetched through the agent),\n"
            "                               /metrics, /mem_tracker, brpc=H:P /vars/memory_*\n"
            "  databend HOST:PORT           GET /debug/mem/pprof/profile, /metrics\n"
            "  agent HOST:PORT              the agent's newest dump [process=NAME], /proc\n"
            "  url URL                      a raw profile\n"
            "  options: name= user= password_file= tls=yes|no|insecure activate=yes\n"
            "           metrics=H:P; any other key=value is a label\n"
            "\n"
            "Signals: SIGHUP reloads the node list, SIGTERM/SIGINT stop cleanly.\n");
}

/* "250ms", "1.5s", "15m", "1h", "2d"; a bare number is seconds. */
static int parse_duration_ms(const char *s, uint64_t *ret)
{
    size_t n = strlen(s);
    double mult = 1000;
    char num[64];
    if (n == 0 || n >= sizeof(num))
        return HP_EPARSE;
    if (n > 2 && !strcmp(s + n - 2, "ms"))
        mult = 1, n -= 2;
    else if (s[n - 1] == 's')
        mult = 1000, n--;
    else if (s[n - 1] == 'm')
        mult = 60000, n--;
    else if (s[n - 1] == 'h')
        mult = 3600000, n--;
    else if (s[n - 1] == 'd')
        mult = 86400000, n--;
    memcpy(num, s, n);
    num[n] = '\0';
    double v;
    if (hp_parse_double(num, &v) < 0 || v < 0 || v * mult > 1e15)
        return HP_EPARSE;
    *ret = (uint64_t)(v * mult + 0.5);
    return 0;
}

static int parse_size(const char *s, uint64_t *ret)
{
    size_t n = strlen(s);
    uint64_t mult = 1;
    if (n && (s[n - 1] == 'K' || s[n - 1] == 'k'))
        mult = 1 << 10, n--;
    else if (n && (s[n - 1] == 'M' || s[n - 1] == 'm'))
        mult = 1 << 20, n--;
    else if (n && (s[n - 1] == 'G' || s[n - 1] == 'g'))
        mult = 1 << 30, n--;
    uint64_t v;
    if (hp_parse_u64(s, n, &v) < 0 || v == 0 || v > UINT64_MAX / mult)
        return HP_EPARSE;
    *ret = v * mult;
    return 0;
}

/* --check: what would be polled, and what is wrong with the list. */
static int check_nodes(const char *path)
{
    struct poll_nodelist *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    size_t bad = 0;
    int r = poll_nodelist_load(path, 0, &l, &bad, &err);
    if (err.len)
        fprintf(stderr, "%s\n", err.data);
    hp_buf_release(&err);
    if (r < 0)
        return 2;
    for (size_t i = 0; i < l->n; i++) {
        const struct poll_node *n = &l->nodes[i];
        printf("%s:%u\t%s\t%s\t%s%s%s%s%s\n", path, n->line, n->name, poll_kind_name(n->kind),
               n->addr, n->agent ? " agent=" : "", n->agent ? n->agent : "",
               n->user ? " auth=basic" : "", n->activate ? " activate=yes" : "");
    }
    printf("%s: %zu nodes, %zu bad lines\n", path, l->n, bad);
    poll_nodelist_free(l);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct collector_config cfg;
    collector_config_default(&cfg);
    const char *db = NULL, *listen = NULL, *out = NULL;
    struct collector_sym_config symcfg = { .retain_s = 90 * 86400, .thin_after_s = 7 * 86400 };
    /* The installed UI files, or the source tree's when running uninstalled. */
    const char *static_dir = web_static_dir_default();
    const char *token_file = NULL;
    bool check_only = false;
    uint64_t u;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (!v) {                                                                                  \
            fprintf(stderr, "collector: %s needs a value\n", a);                                   \
            return 2;                                                                              \
        }                                                                                          \
        i++;                                                                                       \
    } while (0)
#define BAD_VALUE(what)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "collector: %s %s: expected %s\n", a, v, what);                            \
        return 2;                                                                                  \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--nodes")) {
            NEED_VALUE();
            cfg.nodes_path = v;
        } else if (!strcmp(a, "--interval")) {
            NEED_VALUE();
            if (parse_duration_ms(v, &cfg.interval_ms) < 0 || cfg.interval_ms < 1000)
                BAD_VALUE("a duration of at least 1s (90s, 15m, 1h)");
        } else if (!strcmp(a, "--spread")) {
            NEED_VALUE();
            if (parse_duration_ms(v, &u) < 0)
                BAD_VALUE("a duration (0, 30s, 5m)");
            cfg.spread_ms = (int64_t)u;
        } else if (!strcmp(a, "--once")) {
            cfg.once = true;
        } else if (!strcmp(a, "--check")) {
            check_only = true;
        } else if (!strcmp(a, "--strict")) {
            cfg.strict = true;
        } else if (!strcmp(a, "--no-progress")) {
            cfg.progress = false;
        } else if (!strcmp(a, "--max-inflight")) {
            NEED_VALUE();
            if (hp_parse_u64(v, strlen(v), &u) < 0 || u == 0 || u > 10000)
                BAD_VALUE("a number from 1 to 10000");
            cfg.max_inflight = (uint32_t)u;
        } else if (!strcmp(a, "--retries")) {
            NEED_VALUE();
            if (hp_parse_u64(v, strlen(v), &u) < 0 || u > 20)
                BAD_VALUE("a number from 0 to 20");
            cfg.retries = (uint32_t)u;
        } else if (!strcmp(a, "--retry-base")) {
            NEED_VALUE();
            if (parse_duration_ms(v, &cfg.retry_base_ms) < 0)
                BAD_VALUE("a duration (250ms, 1s)");
        } else if (!strcmp(a, "--connect-timeout") || !strcmp(a, "--timeout")) {
            NEED_VALUE();
            if (parse_duration_ms(v, &u) < 0 || u == 0 || u > 24u * 3600 * 1000)
                BAD_VALUE("a duration (500ms, 5s, 2m)");
            if (!strcmp(a, "--timeout"))
                cfg.timeout_ms = (uint32_t)u;
            else
                cfg.connect_timeout_ms = (uint32_t)u;
        } else if (!strcmp(a, "--max-body")) {
            NEED_VALUE();
            if (parse_size(v, &cfg.max_body) < 0)
                BAD_VALUE("a size (64M, 1G, bytes)");
        } else if (!strcmp(a, "--out")) {
            NEED_VALUE();
            out = v;
        } else if (!strcmp(a, "--db")) {
            NEED_VALUE();
            db = v;
        } else if (!strcmp(a, "--static")) {
            NEED_VALUE();
            static_dir = strcmp(v, "none") ? v : NULL;
        } else if (!strcmp(a, "--token-file")) {
            NEED_VALUE();
            token_file = v;
        } else if (!strcmp(a, "--retain") || !strcmp(a, "--thin-after")) {
            NEED_VALUE();
            int64_t secs;
            if (hp_parse_duration(v, &secs) < 0)
                BAD_VALUE("a duration (90d, 12w, 0 to keep everything)");
            *(!strcmp(a, "--retain") ? &symcfg.retain_s : &symcfg.thin_after_s) = secs;
        } else if (!strcmp(a, "--binary")) {
            NEED_VALUE();
            symcfg.binary = v;
        } else if (!strcmp(a, "--symbols")) {
            NEED_VALUE();
            symcfg.symbols_dir = v;
        } else if (!strcmp(a, "--listen")) {
            NEED_VALUE();
            listen = v;
        } else if (!strcmp(a, "--log-level")) {
            NEED_VALUE();
            enum hp_log_level lvl;
            if (hp_log_level_parse(v, &lvl) < 0)
                BAD_VALUE("error, warn, info or debug");
            hp_log_set_level(lvl);
        } else {
            fprintf(stderr, "collector: unknown argument \"%s\" (see --help)\n", a);
            return 2;
        }
#undef NEED_VALUE
#undef BAD_VALUE
    }
    if (!cfg.nodes_path) {
        fprintf(stderr, "collector: --nodes FILE is required (see --help)\n");
        return 2;
    }
    if (check_only)
        return check_nodes(cfg.nodes_path);
    /* --out DIR keeps plain files (no database); otherwise everything goes
     * into the SQLite store: --db, else $HEAPFLEET_DB, else heapfleet.db. */
    struct collector_sink *sink = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int sr = out ? collector_dirsink_new(out, &sink, &err)
                 : collector_storesink_new(store_path_default(db), &symcfg, &sink, &err);
    if (sr < 0) {
        fprintf(stderr, "collector: %s\n", err.data ? err.data : hp_strerror(sr));
        hp_buf_release(&err);
        return 2;
    }
    /* The API and UI serve what the store holds: on by default, on loopback. */
    struct collector_service *web = NULL;
    if (!listen)
        listen = "127.0.0.1:7070";
    if (strcmp(listen, "off") != 0 && out) {
        hp_log_warn("collector", "msg=\"--out keeps files, not a database: the web UI is off\"");
    } else if (strcmp(listen, "off") != 0) {
        if (collector_web_service_new(listen, store_path_default(db), static_dir, token_file,
                                      sink, &web, &err) < 0) {
            fprintf(stderr, "collector: %s\n", err.data ? err.data : "bad web settings");
            hp_buf_release(&err);
            if (sink->close)
                sink->close(sink);
            return 2;
        }
        cfg.service = web;
    }
    hp_buf_release(&err);
    parse_max_bytes = cfg.max_body;
    int rc = collector_daemon_run(&cfg, sink, parse_dump);
    collector_web_service_free(web);
    return rc;
}
