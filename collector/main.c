/* collector: poll every node of a fleet for heap profiles on a schedule.
 *
 *   collector --nodes be.list [--interval 1h] [--db heapfleet.db]
 *             [--listen 127.0.0.1:7070] [--once] [--out DIR] ...
 *
 * This file only turns argv into a collector_config, picks the sink and the
 * parser, and calls collector_daemon_run(); everything else is in daemon.c. */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <uv.h>

#include "collector/collector-internal.h"
#include "collector/daemon.h"
#include "web/web.h"
#include "collector/ingest/ingest.h"
#include "store/store.h"
#include "collector/poll/poll.h"
#include "store/hp-opt.h"
#include "collector/sym/sym.h"

static uint64_t parse_max_bytes;

/* Parse a fetched dump on a worker thread; the limits follow --max-body. */
static int parse_dump(const void *data, size_t len, const struct collector_parse_limits *pl,
                      struct profile **ret, struct hp_buf *err)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    if (parse_max_bytes && parse_max_bytes < lim.max_bytes)
        lim.max_bytes = (size_t)parse_max_bytes;
    if (pl->max_stacks)
        lim.max_stacks = (size_t)pl->max_stacks;
    if (pl->max_frames)
        lim.max_frames = pl->max_frames;
    return ingest_parse(data, len, &lim, ret, err);
}

static const struct hp_opt_usage usage = {
    .prog = "collector",
    .usage = "collector --nodes FILE [options]",
    .text = "Polls every node in FILE (be.list) for a heap profile and memory figures,\n"
            "one round every --interval, and records every attempt.\n",
    .after = "Node list: one node per line, '#' comments:\n"
             "  starrocks HOST:PORT          GET /pprof/heap, /metrics\n"
             "  doris HOST:PORT agent=H:P    /jeheap/dump (file fetched through the agent),\n"
             "                               /metrics, /mem_tracker, brpc=H:P /vars/memory_*\n"
             "  databend HOST:PORT           GET /debug/mem/pprof/profile, /metrics\n"
             "  agent HOST:PORT              the agent's newest dump [process=NAME], /proc\n"
             "  url URL                      a raw profile\n"
             "  options: name= user= password_file= tls=yes|no|insecure activate=yes\n"
             "           metrics=H:P; any other key=value is a label\n"
             "           agent=H:P token_file=F on any line: binaries for symbols come from\n"
             "           the node's agent when this host does not have them\n"
             "\n"
             "Signals: SIGHUP reloads the node list, SIGTERM/SIGINT stop cleanly.\n",
};

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

static const char *fe_state_word(enum poll_fe_state s)
{
    switch (s) {
    case POLL_FE_DEAD:
        return " fe_status=dead (Alive=false: listed, not polled)";
    case POLL_FE_DECOMMISSIONED:
        return " fe_status=decommissioned";
    default:
        return "";
    }
}

struct check_fe {
    const struct poll_node *fe;
    const char *path;
    int failed;
};

static void check_fe_done_cb(struct poll_fe_result *res, void *arg)
{
    struct check_fe *c = arg;
    const struct poll_node *fe = c->fe;
    if (res->status < 0) {
        printf("%s:%u\t%s\t%s\t%s discovery FAILED: %s\n", c->path, fe->line, fe->name,
               poll_kind_name(fe->kind), fe->addr, res->error);
        c->failed = 1;
    } else {
        printf("%s:%u\t%s\t%s\t%s answered by %s: %zu backends\n", c->path, fe->line, fe->name,
               poll_kind_name(fe->kind), fe->addr, res->answered_by ? res->answered_by : "?",
               res->n);
        for (size_t i = 0; i < res->n; i++) {
            struct poll_node *n = poll_fe_backend_node(fe, &res->backends[i]);
            printf("%s:%u\t%s\t%s\t%s%s%s%s\n", c->path, fe->line, n->name,
                   poll_kind_name(n->kind), n->addr, n->agent ? " agent=" : "",
                   n->agent ? n->agent : "", fe_state_word(n->fe_state));
            poll_node_free(n);
        }
    }
    poll_fe_result_release(res);
}

/* Ask each FE line what it has, as a round would, and print the nodes. */
static int check_discover(const struct poll_nodelist *l, const char *path)
{
    size_t nfe = 0;
    for (size_t i = 0; i < l->n; i++)
        nfe += poll_kind_is_fe(l->nodes[i].kind);
    if (!nfe)
        return 0;
    uv_loop_t loop;
    struct poll_fetcher *f = NULL;
    struct check_fe *cs = hp_xcalloc(nfe, sizeof(*cs));
    int failed = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || uv_loop_init(&loop) < 0) {
        free(cs);
        return 1;
    }
    if (poll_fetcher_new(&loop, 16, &f) == 0) {
        size_t k = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (!poll_kind_is_fe(l->nodes[i].kind))
                continue;
            cs[k] = (struct check_fe){ .fe = &l->nodes[i], .path = path };
            if (poll_fe_discover(f, &l->nodes[i], 10000, check_fe_done_cb, &cs[k]) < 0)
                cs[k].failed = 1;
            k++;
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        poll_fetcher_close(f);
        uv_run(&loop, UV_RUN_DEFAULT);
        for (size_t i = 0; i < nfe; i++)
            failed |= cs[i].failed;
    } else {
        failed = 1;
    }
    (void)uv_loop_close(&loop);
    curl_global_cleanup();
    free(cs);
    return failed;
}

/* Option callbacks. defval carries the least value accepted, in ms. */
static int duration_ms_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    uint64_t v;
    if (parse_duration_ms(arg, &v) < 0 || v < (uint64_t)o->defval || v > 365ull * 86400000) {
        hp_err_printf(err, "expected a duration%s (250ms, 1.5s, 15m, 1h)",
                      o->defval >= 1000 ? " of at least 1s" : o->defval ? " above 0" : "");
        return HP_EUSAGE;
    }
    *(uint64_t *)o->value = v;
    return 0;
}

static void duration_ms_show(const struct hp_opt *o, struct hp_buf *out)
{
    uint64_t v = *(const uint64_t *)o->value;
    if (v % 3600000 == 0 && v)
        (void)hp_buf_printf(out, "%lluh", (unsigned long long)(v / 3600000));
    else if (v % 60000 == 0 && v)
        (void)hp_buf_printf(out, "%llum", (unsigned long long)(v / 60000));
    else if (v % 1000 == 0)
        (void)hp_buf_printf(out, "%llus", (unsigned long long)(v / 1000));
    else
        (void)hp_buf_printf(out, "%llums", (unsigned long long)v);
}

static int size_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    if (hp_size_parse(arg, (uint64_t *)o->value) < 0) {
        hp_err_printf(err, "expected a size (64M, 1G, bytes)");
        return HP_EUSAGE;
    }
    return 0;
}

static void size_show(const struct hp_opt *o, struct hp_buf *out)
{
    uint64_t v = *(const uint64_t *)o->value;
    if (v % (1u << 30) == 0)
        (void)hp_buf_printf(out, "%lluG", (unsigned long long)(v >> 30));
    else if (v % (1u << 20) == 0)
        (void)hp_buf_printf(out, "%lluM", (unsigned long long)(v >> 20));
    else
        (void)hp_buf_printf(out, "%llu", (unsigned long long)v);
}

/* --debuginfod servers, each with its own token, header file and CA file
 * (the options after a --debuginfod apply to it). Tokens are read at
 * startup into fixed buffers: no heap to free on any exit path. */
struct dbgd_list {
    struct sym_server v[16];
    char tokens[16][1024];
    size_t n;
};

static int dbgd_url_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct dbgd_list *l = o->value;
    if (l->n == HP_ARRAY_SIZE(l->v)) {
        hp_err_printf(err, "at most 16 servers");
        return HP_EUSAGE;
    }
    l->v[l->n++] = (struct sym_server){ .url = arg };
    return 0;
}

/* The file options of the last --debuginfod (defval: 0 token, 1 header
 * file, 2 CA file). A token is the file's first line, as the agent and the
 * node list read theirs. */
static int dbgd_file_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct dbgd_list *l = o->value;
    if (l->n == 0) {
        hp_err_printf(err, "a file, after the --debuginfod URL it is for");
        return HP_EUSAGE;
    }
    struct sym_server *sv = &l->v[l->n - 1];
    if (o->defval == 1) {
        sv->header_file = arg;
        return 0;
    }
    if (o->defval == 2) {
        sv->ca_file = arg;
        return 0;
    }
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(arg, 64 * 1024, &data, &len, NULL);
    if (r < 0) {
        hp_err_printf(err, "a readable token file (%s)", hp_strerror(r));
        return HP_EUSAGE;
    }
    size_t n = strcspn(data, "\r\n");
    if (n == 0 || n >= sizeof(l->tokens[0])) {
        free(data);
        hp_err_printf(err, "a token on the file's first line (1 to 1023 bytes)");
        return HP_EUSAGE;
    }
    memcpy(l->tokens[l->n - 1], data, n);
    l->tokens[l->n - 1][n] = '\0';
    free(data);
    sv->bearer = l->tokens[l->n - 1];
    return 0;
}

/* --check: what would be polled, and what is wrong with the list. */
static int check_nodes(const char *path)
{
    struct poll_nodelist *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    size_t bad = 0;
    int r = poll_nodelist_load(path, POLL_NODELIST_CHECK, &l, &bad, &err);
    if (err.len)
        fprintf(stderr, "%s\n", err.data);
    hp_buf_release(&err);
    if (r < 0)
        return 2;
    for (size_t i = 0; i < l->n; i++) {
        const struct poll_node *n = &l->nodes[i];
        if (poll_kind_is_fe(n->kind))
            continue; /* printed with what it discovered, below */
        printf("%s:%u\t%s\t%s\t%s%s%s%s%s%s%s%s\n", path, n->line, n->name,
               poll_kind_name(n->kind), n->addr, n->agent ? " agent=" : "", n->agent ? n->agent : "",
               n->user ? " auth=basic" : "", n->activate ? " activate=yes" : "",
               n->tls == POLL_TLS_YES ? " tls=yes" : n->tls == POLL_TLS_INSECURE ? " tls=insecure" : "",
               n->cert_file ? " client-cert" : "",
               n->delete_after_fetch ? " delete_after_fetch=yes" : "");
    }
    int fe_failed = check_discover(l, path);
    printf("%s: %zu nodes, %zu bad lines, %zu warnings\n", path, l->n, bad, l->warnings);
    poll_nodelist_free(l);
    return bad || fe_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
    /* glibc gives each thread that allocates (libuv's pool parses dumps,
     * the web jobs, SQLite) its own arena, up to 8 per core, and keeps what
     * is freed in each: a soak of 300 nodes grew from 22 to 233 MB in 4
     * minutes while the live heap (the collector's own jemalloc profile)
     * stayed at 32-67 MB. Two arenas held it at 140 MB; the daemon also
     * trims after every round. MALLOC_ARENA_MAX still decides if set. */
    if (!getenv("MALLOC_ARENA_MAX"))
        (void)mallopt(M_ARENA_MAX, 2);
#endif
    struct collector_config cfg;
    collector_config_default(&cfg);
    const char *db = NULL, *listen = "127.0.0.1:7070", *out = NULL;
    struct collector_sym_config symcfg = { .lease_s = 30, .cache_max = UINT64_C(16) << 30,
                                           .resym_backoff_ms = 60000 };
    struct store_retain_policy retain = { .retain_s = 90 * 86400, .thin_after_s = 7 * 86400 };
    static struct dbgd_list dbgd;
    /* The installed UI files, or the source tree's when running uninstalled. */
    const char *static_dir = web_static_dir_default();
    const char *token_file = NULL, *rules_file = NULL;
    struct hp_buf allowed = HP_BUF_INIT(0); /* --allowed-host, comma-joined */
    bool check_only = false;
    uint64_t max_view_stacks = 500000;
    /* Durations in ms for the table; the config keeps some in 32 bits. */
    uint64_t spread_ms = UINT64_MAX, connect_timeout_ms = cfg.connect_timeout_ms,
             timeout_ms = cfg.timeout_ms;
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "nodes", &cfg.nodes_path, "FILE",
                      "node list: [KIND] HOST:PORT [name=N] [key=value ...]"),
        HP_OPT_CALLBACK_F(0, "interval", &cfg.interval_ms, "DUR", "time between rounds",
                          duration_ms_cb, duration_ms_show, 0, 1000),
        HP_OPT_CALLBACK_F(0, "spread", &spread_ms, "DUR",
                          "spread each round's start over DUR (default interval/10,\n"
                          "at most 5m; 0 with --once)",
                          duration_ms_cb, NULL, HP_OPT_NODEFAULT, 0),
        HP_OPT_BOOL(0, "once", &cfg.once,
                    "run one round, print a summary, exit 1 if a node failed"),
        HP_OPT_UINT(0, "max-inflight", &cfg.max_inflight, 1, 10000, "N", "nodes polled at once"),
        HP_OPT_UINT(0, "retries", &cfg.retries, 0, 20, "N",
                    "extra tries after a transient failure"),
        HP_OPT_CALLBACK(0, "retry-base", &cfg.retry_base_ms, "DUR",
                        "first retry delay, doubled each time, jittered", duration_ms_cb,
                        duration_ms_show),
        HP_OPT_CALLBACK_F(0, "connect-timeout", &connect_timeout_ms, "DUR", "connecting",
                          duration_ms_cb, duration_ms_show, 0, 1),
        HP_OPT_CALLBACK_F(0, "timeout", &timeout_ms, "DUR", "whole request", duration_ms_cb,
                          duration_ms_show, 0, 1),
        HP_OPT_CALLBACK(0, "max-body", &cfg.max_body, "SIZE",
                        "largest response accepted, on the wire (node line: max_body=)",
                        size_cb, size_show),
        HP_OPT_CALLBACK(0, "max-decoded", &cfg.max_decoded, "SIZE",
                        "largest response after gzip/deflate/zstd decoding\n"
                        "(node line: max_decoded=)",
                        size_cb, size_show),
        HP_OPT_UINT(0, "max-ratio", &cfg.max_ratio, 2, 100000, "N",
                    "a body decoding to over N x its wire size (past 16M)\n"
                    "is a decompression bomb (node line: max_ratio=)"),
        HP_OPT_CALLBACK(0, "max-inflight-bytes", &cfg.max_inflight_bytes, "SIZE",
                        "all response bodies being fetched or parsed at once;\n"
                        "a node that would pass it fails with a clear error",
                        size_cb, size_show),
        HP_OPT_UINT(0, "max-stacks", &cfg.max_stacks, 1, (uint64_t)1 << 32, "N",
                    "distinct stacks in one profile (node line: max_stacks=)"),
        HP_OPT_UINT(0, "max-frames", &cfg.max_frames, 1, 100000, "N",
                    "frames in one stack (node line: max_frames=)"),
        HP_OPT_BOOL(0, "strict", &cfg.strict, "refuse a node list with any bad line"),
        HP_OPT_BOOL(0, "check", &check_only,
                    "only check the node list: print each node and what FE\n"
                    "discovery finds, exit 1 on a bad line or failed FE"),
        HP_OPT_GROUP("where snapshots go:"),
        HP_OPT_STRING(0, "db", &db, "FILE",
                      "SQLite database ($HEAPFLEET_DB or heapfleet.db), or a\n"
                      "PostgreSQL URI (postgresql://...) shared by collectors"),
        HP_OPT_STRING(0, "collector-id", &symcfg.collector_id, "NAME",
                      "this collector among those sharing a PostgreSQL fleet\n"
                      "(default HOST:PID)"),
        HP_OPT_CALLBACK(0, "lease", &symcfg.lease_s, "DUR",
                        "a collector silent this long is dead; the others take\n"
                        "its nodes at their next round (PostgreSQL)",
                        hp_opt_duration_cb, hp_opt_duration_show),
        HP_OPT_STRING(0, "out", &out, "DIR",
                      "instead of a database: dumps and a JSON line per attempt"),
        HP_OPT_CALLBACK(0, "retain", &retain.retain_s, "DUR",
                        "delete snapshots older than DUR (0 keeps all)", hp_opt_duration_cb,
                        hp_opt_duration_show),
        HP_OPT_CALLBACK(0, "thin-after", &retain.thin_after_s, "DUR",
                        "older snapshots: one per node per day (0 off)", hp_opt_duration_cb,
                        hp_opt_duration_show),
        HP_OPT_STRING(0, "binary", &symcfg.binary, "FILE",
                      "the nodes' main executable, for symbolization"),
        HP_OPT_STRING(0, "symbols", &symcfg.symbols_dir, "DIR",
                      "binaries and debug files (also .build-id/xx/rest.debug)"),
        HP_OPT_CALLBACK_F(0, "debuginfod", &dbgd, "URL",
                          "a debuginfod server (repeatable; asked in order, after\n"
                          "each node's agent and before $DEBUGINFOD_URLS)",
                          dbgd_url_cb, NULL, HP_OPT_NODEFAULT, 0),
        HP_OPT_CALLBACK_F(0, "debuginfod-token-file", &dbgd, "FILE",
                          "bearer token for the last --debuginfod", dbgd_file_cb, NULL,
                          HP_OPT_NODEFAULT, 0),
        HP_OPT_CALLBACK_F(0, "debuginfod-header-file", &dbgd, "FILE",
                          "\"Name: value\" header lines for the last --debuginfod",
                          dbgd_file_cb, NULL, HP_OPT_NODEFAULT, 1),
        HP_OPT_CALLBACK_F(0, "debuginfod-ca", &dbgd, "FILE",
                          "CA bundle for the last --debuginfod (private TLS)", dbgd_file_cb,
                          NULL, HP_OPT_NODEFAULT, 2),
        HP_OPT_STRING(0, "symbol-cache", &symcfg.cache_dir, "DIR",
                      "downloaded binaries (default ~/.cache/heapfleet/debuginfod)"),
        HP_OPT_CALLBACK(0, "symbol-cache-max", &symcfg.cache_max, "SIZE",
                        "downloaded binaries in all; the least recently used\n"
                        "are removed past it",
                        size_cb, size_show),
        HP_OPT_CALLBACK_F(0, "resym-backoff", &symcfg.resym_backoff_ms, "DUR",
                          "a build stored unnamed: first wait before every source\n"
                          "is asked again (doubling up to 1h)",
                          duration_ms_cb, duration_ms_show, 0, 1000),
        HP_OPT_GROUP("web:"),
        HP_OPT_STRING(0, "listen", &listen, "ADDR", "HTTP API and UI (off disables)"),
        HP_OPT_STRING(0, "token-file", &token_file, "FILE",
                      "require \"Authorization: Bearer <token>\" (not for /metrics)"),
        HP_OPT_CALLBACK(0, "allowed-host", &allowed, "NAME",
                        "without a token, also answer Host: NAME (besides IP\n"
                        "addresses and localhost); repeatable",
                        hp_opt_name_list_cb, NULL),
        HP_OPT_STRING(0, "static", &static_dir, "DIR",
                      "the UI's files (none: API only)"),
        HP_OPT_UINT(0, "max-view-stacks", &max_view_stacks, 0, (uint64_t)1 << 32, "N",
                    "views (top, tree, diff...) of a snapshot with more\n"
                    "stacks draw its heaviest N, and say what they dropped (0: off)"),
        HP_OPT_STRING(0, "rules", &rules_file, "FILE",
                      "discrepancy rules on top of each kind's built-in ones,\n"
                      "for the API and /metrics (query/INTERNALS.md)"),
        HP_OPT_GROUP("output:"),
        HP_OPT_LOG_LEVEL(),
        HP_OPT_FLAG(0, "no-progress", &cfg.progress, 0, "no progress lines during a round"),
        HP_OPT_END(),
    };
    int rc, npos = hp_opt_parse(&usage, opts, argc, argv, NULL, &rc);
    if (npos < 0)
        return rc;
    if (npos > 0) {
        fprintf(stderr, "collector: unknown argument \"%s\" (see --help)\n", argv[0]);
        return 2;
    }
    if (spread_ms != UINT64_MAX)
        cfg.spread_ms = (int64_t)spread_ms;
    if (connect_timeout_ms > 86400000 || timeout_ms > 86400000)
        return hp_opt_usage_error(&usage, "--%stimeout: at most 24h",
                                  connect_timeout_ms > 86400000 ? "connect-" : "");
    cfg.connect_timeout_ms = (uint32_t)connect_timeout_ms;
    cfg.timeout_ms = (uint32_t)timeout_ms;
    if (static_dir && strcmp(static_dir, "none") == 0)
        static_dir = NULL;
    if (!cfg.nodes_path) {
        fprintf(stderr, "collector: --nodes FILE is required (see --help)\n");
        return 2;
    }
    if (check_only)
        return check_nodes(cfg.nodes_path);
    symcfg.interval_ms = cfg.interval_ms;
    symcfg.servers = dbgd.v;
    symcfg.nservers = dbgd.n;
    /* The store's uploaded files (query symbols add) when no --symbols,
     * mirrored into a local folder, even when there are none yet: an upload
     * made while the collector runs is seen (and re-symbolizes what waited
     * for it), on SQLite and on a PostgreSQL store shared by collectors. */
    static char *store_syms; /* for the life of the process */
    if (!symcfg.symbols_dir && !out &&
        (store_syms = store_symfiles_dir_default(store_path_default(db))) != NULL) {
        symcfg.symbols_dir = store_syms;
        symcfg.symbols_from_store = true;
    }
    /* --out DIR keeps plain files (no database); otherwise everything goes
     * into the SQLite store: --db, else $HEAPFLEET_DB, else heapfleet.db. */
    struct collector_sink *sink = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int sr = out ? collector_dirsink_new(out, &sink, &err)
                 : collector_storesink_new(store_path_default(db), &symcfg, &retain, &sink,
                                           &err);
    if (sr < 0) {
        fprintf(stderr, "collector: %s\n", err.data ? err.data : hp_strerror(sr));
        hp_buf_release(&err);
        return 2;
    }
    /* The API and UI serve what the store holds: on by default, on loopback.
     * Its /metrics adds the collector's own health, which the daemon keeps. */
    struct collector_service *web = NULL;
    struct collector_health *health = collector_health_new();
    cfg.health = health;
    if (strcmp(listen, "off") != 0 && out) {
        hp_log_warn("collector", "msg=\"--out keeps files, not a database: the web UI is off\"");
    } else if (strcmp(listen, "off") != 0) {
        if (collector_web_service_new(listen, allowed.len ? allowed.data : NULL,
                                      store_path_default(db), static_dir, token_file, rules_file,
                                      max_view_stacks, health, sink, &web, &err) < 0) {
            fprintf(stderr, "collector: %s\n", err.data ? err.data : "bad web settings");
            hp_buf_release(&err);
            if (sink->close)
                sink->close(sink);
            collector_health_free(health);
            return 2;
        }
        cfg.service = web;
    }
    hp_buf_release(&err);
    parse_max_bytes = HP_MAX(cfg.max_body, cfg.max_decoded);
    rc = collector_daemon_run(&cfg, sink, parse_dump);
    collector_web_service_free(web);
    collector_health_free(health);
    hp_buf_release(&allowed);
    return rc;
}
