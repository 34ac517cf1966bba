/* poll: the node list, the HTTP fetch engine (libcurl multi driven by the
 * libuv loop) and the parsers for what nodes say about their memory
 * (Prometheus /metrics, the Doris /mem_tracker HTML table, brpc /vars, the
 * agent's /proc JSON).
 *
 * The scheduler that decides when each node is polled lives in
 * collector/daemon.c; this module only knows how to describe nodes, fetch
 * URLs and read figures.
 *
 * Thread context: the node list and figure parsers may run on any thread
 * (the daemon runs them on worker threads); the fetcher belongs to the loop
 * thread. */
#ifndef HP_POLL_H
#define HP_POLL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "store/hp.h"

/* ---- node list (be.list) -------------------------------------------------
 * One node per line, '#' starts a comment, blank lines are ignored:
 *   [KIND] HOST:PORT [name=NAME] [option=value ...] [label=value ...]
 * KIND is starrocks (the default when omitted), doris, databend, agent or url
 * (then the address is a full http(s) URL). Options:
 *   name=NAME            display name, unique in the file (default HOST:PORT)
 *   user=USER            HTTP basic auth user
 *   password_file=PATH   file whose first line is the password (read at load)
 *   tls=yes|no|insecure  https to the node (insecure: no certificate check)
 *   agent=HOST:PORT      the node's heapfleet agent (Doris dump files, agent kind)
 *   activate=yes|no      switch profiling on over HTTP first (Doris only)
 *   metrics=HOST:PORT    where /metrics is served (default: the node address)
 *   brpc=HOST:PORT       Doris brpc port for /vars/memory_* (optional)
 *   prefix=NAME          agent kind: dumps whose names start with NAME (default: any;
 *                        process=NAME is the same)
 *   token_file=FILE      bearer token for the node's agent (first line of FILE)
 *   ca_file=FILE         CA certificates (PEM) that sign the node's and agent's
 *                        TLS certificates (implies tls=yes)
 *   cert_file=FILE       client certificate (PEM) presented to the node and agent;
 *   key_file=FILE        its private key (default: in cert_file)
 *   delete_after_fetch=yes  doris: the agent deletes each dump once it is stored
 *   max_body=SIZE max_decoded=SIZE max_ratio=N max_stacks=N max_frames=N
 *                        this node's budgets (default: the collector's flags)
 * Any other key=value is a label kept with every snapshot. A key that looks
 * like a misspelt option ("nmae=") is an error under POLL_NODELIST_CHECK
 * (--check, --strict) and otherwise a warning: the line is kept, the key
 * ignored.
 *
 * FE lines discover the backends of a Doris or StarRocks cluster:
 *   starrocks-fe|doris-fe HOST:PORT[,HOST:PORT...] user=U password_file=F
 *                [name=PREFIX] [agent_port=N] [node options...]
 * The collector asks the FE (the next address when one fails) for
 * /api/show_proc?path=/backends (and /compute_nodes for StarRocks) every
 * round and on SIGHUP; each backend becomes a node PREFIX-be<BackendId> (or
 * PREFIX-cn<ComputeNodeId>) at its host and HttpPort with the line's other
 * options (agent_port=N puts an agent at HOST:N). See collector/poll/fe.c. */
enum poll_kind {
    POLL_KIND_STARROCKS = 0,
    POLL_KIND_DORIS,
    POLL_KIND_DATABEND,
    POLL_KIND_AGENT,
    POLL_KIND_URL,
    POLL_KIND_STARROCKS_FE, /* discovery lines: not polled themselves */
    POLL_KIND_DORIS_FE,
};

static inline bool poll_kind_is_fe(int k)
{
    return k == POLL_KIND_STARROCKS_FE || k == POLL_KIND_DORIS_FE;
}

/* What the FE says of a discovered backend (POLL_FE_NONE for listed nodes). */
enum poll_fe_state {
    POLL_FE_NONE = 0,
    POLL_FE_ALIVE,
    POLL_FE_DEAD,           /* Alive=false: listed, not polled */
    POLL_FE_DECOMMISSIONED, /* polled while it answers, marked */
};

enum poll_tls { POLL_TLS_NO = 0, POLL_TLS_YES, POLL_TLS_INSECURE };
/* follow_redirects=: a node's redirects are not followed unless its line
 * says so; never to another scheme, at most 5. */
enum poll_redirect { POLL_REDIRECT_NO = 0, POLL_REDIRECT_SAME_HOST, POLL_REDIRECT_YES };

struct poll_label {
    char *key;
    char *value;
};

struct poll_node {
    enum poll_kind kind;
    char *name;     /* never NULL */
    char *addr;     /* HOST:PORT, or the URL for the url kind */
    char *user;     /* NULL: no auth */
    char *password; /* read from password_file; NULL when none */
    char *password_file;
    enum poll_tls tls;
    enum poll_redirect redirects;
    char *agent;   /* HOST:PORT or NULL */
    char *metrics; /* HOST:PORT or NULL (= addr) */
    char *brpc;    /* HOST:PORT or NULL */
    char *process; /* agent kind: dump-name prefix filter, or NULL */
    char *token_file; /* agent bearer token file, or NULL */
    char *token;      /* its first line, read at load; NULL when none */
    bool activate;
    char *ca_file;   /* TLS: CA bundle, or NULL for the system store */
    char *cert_file; /* TLS client certificate, or NULL */
    char *key_file;  /* its key, or NULL (then in cert_file) */
    bool delete_after_fetch; /* doris: ask the agent to delete the dump once stored */
    uint16_t agent_port;     /* FE lines: agent at each backend's host, 0: none */
    enum poll_fe_state fe_state; /* discovered nodes: what the FE reported */
    char *fe_line;               /* discovered nodes: the FE line's name (PREFIX) */
    struct poll_label *labels;
    size_t nlabels;
    unsigned line; /* line in the node list */
    /* Budgets for this node's answers; 0: the collector's flag. */
    uint64_t max_body;    /* max_body=SIZE: bytes on the wire */
    uint64_t max_decoded; /* max_decoded=SIZE: bytes after decoding */
    uint32_t max_ratio;   /* max_ratio=N: decoded/wire */
    uint64_t max_stacks;  /* max_stacks=N: distinct stacks in one profile */
    uint32_t max_frames;  /* max_frames=N: frames in one stack */
};

struct poll_nodelist {
    struct poll_node *nodes;
    size_t n;
    size_t warnings; /* lines kept with a warning (in err as "...: warning: ...") */
};

enum poll_nodelist_flags {
    POLL_NODELIST_STRICT = 1 << 0, /* any bad line refuses the whole file */
    POLL_NODELIST_CHECK = 1 << 1,  /* misspelt keys and unusable lines are errors */
};

/* Parse a node list. `source` names it in messages ("be.list"). Each bad line
 * appends one message line "SOURCE:LINE: what (expected ...)" to err (if
 * given) and is skipped; *ret_bad counts them. With POLL_NODELIST_STRICT a bad
 * line makes the call fail with HP_EPARSE. Caps: 1 MiB per line, 100,000
 * nodes. On success *ret (free with poll_nodelist_free) owns everything.
 * Reads password files, so run it off the loop. Any thread. */
int poll_nodelist_parse(const char *text, size_t len, const char *source, unsigned flags,
                        struct poll_nodelist **ret, size_t *ret_bad,
                        struct hp_buf *err) HP_MUST_CHECK;
/* Read and parse a node list file (capped at 64 MiB). */
int poll_nodelist_load(const char *path, unsigned flags, struct poll_nodelist **ret,
                       size_t *ret_bad, struct hp_buf *err) HP_MUST_CHECK;
void poll_nodelist_free(struct poll_nodelist *l);
/* Deep copy / free of one node (the daemon keeps nodes across reloads). */
struct poll_node *poll_node_dup(const struct poll_node *n);
void poll_node_free(struct poll_node *n);
/* True when two nodes would be polled identically. */
bool poll_node_equal(const struct poll_node *a, const struct poll_node *b);
const char *poll_kind_name(enum poll_kind k);

/* ---- FE discovery (fe.c) ---------------------------------------------------- */
struct poll_fetcher;

struct poll_backend {
    char *id;   /* BackendId / ComputeNodeId, digits */
    char *host; /* IP or Host column */
    uint16_t http_port;
    bool alive;
    bool decommissioned;
    bool compute_node; /* from /compute_nodes */
};

/* Parse an FE's /api/show_proc?path=/backends (or /compute_nodes) answer:
 * objects keyed by column names or positional rows, with or without the
 * {"code":0,"data":...} envelope. A bad row fails the whole answer (err
 * names the row and column), so a half-read table never drops backends.
 * Any thread. */
int poll_fe_backends_parse(const char *json, size_t len, bool compute_nodes,
                           struct poll_backend **ret, size_t *ret_n,
                           struct hp_buf *err) HP_MUST_CHECK;
void poll_backends_free(struct poll_backend *b, size_t n);
/* The node polled for backend b of FE line fe: PREFIX-be<ID> / -cn<ID> at
 * HOST:HttpPort, the FE line's options, agent at HOST:agent_port. */
struct poll_node *poll_fe_backend_node(const struct poll_node *fe, const struct poll_backend *b);

struct poll_fe_result {
    int status;          /* 0, HP_EHTTP when every address failed, -ECANCELED */
    char error[1024];    /* each address and why it failed */
    char *answered_by;   /* the address that answered */
    struct poll_backend *backends;
    size_t n;
};
void poll_fe_result_release(struct poll_fe_result *r);
/* The callee owns *res (poll_fe_result_release). Loop thread. */
typedef void poll_fe_done_cb(struct poll_fe_result *res, void *arg);
/* Ask the FE line's addresses in turn until one answers the backends table
 * (then, for StarRocks, also /compute_nodes; an FE without that table just
 * has no CNs). Loop thread; cb runs on it, also on cancellation. */
int poll_fe_discover(struct poll_fetcher *f, const struct poll_node *fe, uint32_t timeout_ms,
                     poll_fe_done_cb *cb, void *arg) HP_MUST_CHECK;

/* ---- the agent's HTTP API, kept in one place -----------------------------
 * The heapfleet agent (agent/) serves dump files and process figures. These
 * are the paths the collector assumes; change them here only. */
#define POLL_AGENT_PATH_FILE "/dumps/file?path=" /* + URL-encoded absolute path */
#define POLL_AGENT_PATH_NEWEST "/dumps/newest"   /* [?prefix=NAME] raw dump */
#define POLL_AGENT_PATH_PROC "/proc"             /* JSON figures of the profiled process */
#define POLL_AGENT_PATH_DELETE "/dumps/delete?path=" /* POST, + URL-encoded path (token needed) */

/* Node endpoints by kind (reference/databases-and-formats.md). */
#define POLL_PATH_STARROCKS_HEAP "/pprof/heap"
#define POLL_PATH_DORIS_DUMP "/jeheap/dump"
#define POLL_PATH_DORIS_ACTIVATE "/jeheap/active/true"
#define POLL_PATH_DORIS_ACTIVATE_OLD "/jeheap/prof/true" /* before ~2.1 */
#define POLL_PATH_DORIS_TRACKER "/mem_tracker"
#define POLL_PATH_DORIS_VARS "/vars/memory_*"
#define POLL_PATH_DATABEND_HEAP "/debug/mem/pprof/profile"
#define POLL_PATH_METRICS "/metrics"

/* ---- figures: named numbers a node reports about its memory -------------- */
enum poll_figure_source {
    POLL_FIG_METRICS = 0, /* Prometheus /metrics */
    POLL_FIG_TRACKER,     /* Doris /mem_tracker table */
    POLL_FIG_VARS,        /* brpc /vars */
    POLL_FIG_PROC,        /* agent /proc */
};

struct poll_figure {
    char *name; /* Prometheus-style series name, labels included */
    double value;
    enum poll_figure_source source;
};

struct poll_figures {
    struct poll_figure *v;
    size_t n, cap;
};

#define POLL_FIGURES_MAX 4096 /* per node and attempt */

void poll_figures_release(struct poll_figures *f);
const char *poll_figure_source_name(enum poll_figure_source s);
/* The value of the first figure named `name`: 1 found, 0 not found. */
int poll_figures_get(const struct poll_figures *f, const char *name, double *ret_value);

/* The three numbers the tracker-versus-heap comparison needs, picked from
 * whatever a node published (the first name found wins, in the order listed
 * in figures.c). NAN when the node offers none. */
struct poll_memory {
    double rss_bytes;       /* resident set (Doris memory_allocated_bytes is RSS) */
    double allocated_bytes; /* allocator's own count (jemalloc stats.allocated) */
    double tracked_bytes;   /* the database's memory tracker total */
};

void poll_memory_pick(const struct poll_figures *f, struct poll_memory *ret);

/* Prometheus text exposition (0.0.4). Keeps the series whose metric name
 * says it is about memory (mem, alloc, jemalloc, resident, rss, heap) so a
 * node's thousands of other series are not stored. Malformed lines are
 * skipped; the first one is described in err ("metrics line N: ...") and the
 * call returns HP_EPARSE after parsing the rest. Lines over 64 KiB or more
 * than POLL_FIGURES_MAX kept series: HP_ETOOBIG. Any thread. */
int poll_metrics_parse(const char *text, size_t len, struct poll_figures *out,
                       struct hp_buf *err) HP_MUST_CHECK;

/* Doris /mem_tracker HTML: the table whose header has "Current Consumption
 * (Bytes)" (and optionally "Peak Consumption(Bytes)") columns. Each row gives
 * mem_tracker_current_bytes{type="T",label="L"} and ..._peak_bytes figures
 * (Type or Level column for T). A page without such a table (the newest
 * Doris prints an "offline" notice; StarRocks rounds its values) returns
 * HP_ENOTFOUND with the reason in err. Any thread. */
int poll_tracker_parse(const char *html, size_t len, struct poll_figures *out,
                       struct hp_buf *err) HP_MUST_CHECK;

/* brpc /vars output: "name : value" lines; numeric values are kept. */
int poll_vars_parse(const char *text, size_t len, struct poll_figures *out,
                    struct hp_buf *err) HP_MUST_CHECK;

/* Agent /proc JSON: every numeric member of the top-level object becomes a
 * figure "proc_<member>". */
int poll_proc_parse(const char *json, size_t len, struct poll_figures *out,
                    struct hp_buf *err) HP_MUST_CHECK;

/* The path out of a Doris /jeheap/dump reply ("... dump file path: PATH").
 * Returns 1 and a malloc'd path, 0 if the reply carries none. */
int poll_doris_dump_path(const char *text, size_t len, char **ret_path);

/* ---- fetcher: libcurl multi on the libuv loop ----------------------------- */
struct poll_fetcher;

struct poll_fetch_opts {
    const char *url;
    const char *user;     /* basic auth, NULL for none */
    const char *password; /* NULL treated as "" when user is set */
    const char *bearer;   /* Authorization: Bearer token, or NULL */
    bool tls_insecure;
    enum poll_redirect redirects; /* which 3xx are followed (default none) */
    const char *ca_file;   /* CURLOPT_CAINFO, or NULL */
    const char *cert_file; /* client certificate, or NULL */
    const char *key_file;  /* its key, or NULL */
    const char *method;    /* NULL: GET; "POST" with an empty body */
    uint32_t connect_timeout_ms;
    uint32_t total_timeout_ms;
    uint64_t max_bytes;   /* body cap on the wire (max_body) */
    uint64_t max_decoded; /* body cap after gzip/deflate/zstd decoding (0: max_bytes) */
    uint32_t max_ratio;   /* decoded/wire past 16 MiB (0: POLL_MAX_RATIO_DEFAULT) */
    struct poll_membudget *budget; /* shared in-flight byte budget, or NULL */
};

/* Heap profiles compress 5-30x; a body that decodes to more than this many
 * times its wire size (once past 16 MiB) is a decompression bomb. */
#define POLL_MAX_RATIO_DEFAULT 200

/* A byte budget shared by every transfer of the collector (the round's bytes
 * in flight): a transfer charges its body as it grows and stops with a clear
 * error when the total would pass limit; it gives its charge back when it
 * ends, and whoever keeps a body charges it again (poll_membudget_charge)
 * until it frees it. Atomic: worker threads release. */
struct poll_membudget {
    _Atomic uint64_t used;
    uint64_t limit;
};
void poll_membudget_charge(struct poll_membudget *b, uint64_t n);
void poll_membudget_release(struct poll_membudget *b, uint64_t n);

struct poll_fetch_result {
    int status;     /* 0: 2xx received in full; HP_EHTTP; HP_ETOOBIG; -ECANCELED */
    bool retryable; /* transport failure or 5xx/429: worth another try */
    long http_code; /* 0 when no response arrived */
    char *body;     /* NUL-terminated, malloc'd, owned by the result */
    size_t body_len;
    char content_type[96];
    char effective_url[256];
    uint64_t elapsed_ms; /* start to end of this transfer */
    uint64_t connect_ms;
    uint64_t wire_bytes; /* bytes on the wire (before gzip decoding) */
    char error[512];     /* the failure in words, "" on success */
};

/* Called on the loop thread when a fetch ends (also when it is cancelled).
 * The callee owns `res` and frees it with poll_fetch_result_free. */
typedef void poll_fetch_done_cb(struct poll_fetch_result *res, void *arg);

/* max_connections caps open connections (CURLMOPT_MAX_TOTAL_CONNECTIONS).
 * Loop thread. */
int poll_fetcher_new(uv_loop_t *loop, uint32_t max_connections,
                     struct poll_fetcher **ret) HP_MUST_CHECK;
/* Start a GET. 0 or a negative error (then cb is never called). Loop thread. */
int poll_fetch_start(struct poll_fetcher *f, const struct poll_fetch_opts *o,
                     poll_fetch_done_cb *cb, void *arg) HP_MUST_CHECK;
size_t poll_fetcher_active(const struct poll_fetcher *f);
/* Abandon every transfer in flight: each callback runs with -ECANCELED before
 * this returns. Loop thread. */
void poll_fetcher_cancel_all(struct poll_fetcher *f);
/* Cancel everything, clean up curl and close the libuv handles; the memory
 * goes when the last handle closed (run the loop to let that happen). */
void poll_fetcher_close(struct poll_fetcher *f);
void poll_fetch_result_free(struct poll_fetch_result *r);
/* Hand the body over (free() it); the result keeps none. */
char *poll_fetch_result_detach_body(struct poll_fetch_result *r, size_t *ret_len);

/* Percent-encode s for a query string value. malloc'd. */
char *poll_url_escape(const char *s);

#endif
