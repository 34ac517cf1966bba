/* The collector daemon: polls every node of the node list on a schedule and
 * hands each attempt's outcome to a sink.
 *
 * One libuv loop owns the schedule, the curl transfers and the node state;
 * parsing the dump and the figure pages and calling the sink happen on libuv
 * worker threads (uv_queue_work), never on the loop.
 *
 * The sink is the seam between polling and storage: the daemon produces one
 * struct collector_result per node and round (success or failure, always),
 * and the sink keeps it. collector/sink-dir.c writes files; the SQLite store
 * plugs in the same way. */
#ifndef HP_COLLECTOR_DAEMON_H
#define HP_COLLECTOR_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"

struct poll_node;
struct poll_figures;
struct profile;

/* One HTTP request made for a node (every retry is its own attempt). */
struct collector_attempt {
    const char *what; /* "dump", "metrics", "tracker", "vars", "proc", "activate",
                         "dump-path" (Doris /jeheap/dump), "agent-file" */
    const char *url;
    uint32_t attempt; /* 1 for the first try of this step */
    int64_t start_ms; /* wall clock, ms since the epoch */
    uint64_t elapsed_ms;
    long http_code;    /* 0 when no response */
    uint64_t bytes;    /* body bytes received (decoded) */
    int status;        /* 0 or a negative HP_E* / -errno */
    const char *error; /* the failure in words; NULL on success */
};

/* What one poll of one node produced. Everything is borrowed for the
 * duration of collector_sink.record and freed by the daemon afterwards
 * (copy what must live longer). */
struct collector_result {
    const struct poll_node *node; /* kind, name, address, labels */
    uint64_t round;               /* 1 for the first round since start */
    int64_t started_ms;           /* wall clock */
    int64_t finished_ms;
    int status;        /* 0: a dump was fetched (and parsed when a parser is set) */
    const char *error; /* why the poll failed, in words; NULL on success */

    /* The dump, exactly as received (after HTTP content decoding). */
    const void *dump; /* NULL when none was fetched */
    size_t dump_len;
    const char *dump_url; /* where the bytes came from */
    const char *dump_content_type;
    const char *remote_path; /* Doris: where the node wrote the dump; else NULL */
    uint64_t dump_ms;        /* time to fetch the dump */
    /* The same bytes as this node's previous dump (an agent whose process
     * wrote no new dump since): a sink may keep a reference, not a copy. */
    bool dump_unchanged;

    /* The parsed dump (NULL when there is none, no parser is set, or it did
     * not parse; then parse_error says where: "line 12: ..."). Not const: a
     * sink may symbolize it in place before storing; the daemon frees it. */
    struct profile *profile;
    const char *parse_error;

    /* Doris activate=yes: when this daemon switched profiling on (wall ms),
     * 0 if never. Allocations made before that are not in any dump. */
    int64_t activated_ms;
    const char *activation_reply;

    /* Memory figures from /metrics, /mem_tracker, /vars, agent /proc. */
    const struct poll_figures *figures;
    const char *figures_error; /* problems getting figures ("; " joined) or NULL */

    const struct collector_attempt *attempts;
    size_t nattempts;
};

/* The store seam. Embed it in your own struct and recover that with
 * hp_container_of. */
struct collector_sink {
    /* Keep one result. Worker thread; the daemon never runs two record calls
     * at once, so a sink needs no lock of its own. 0, or a negative error with
     * a message in err (logged by the daemon; the poll still counts). */
    int (*record)(struct collector_sink *s, const struct collector_result *r, struct hp_buf *err);
    /* Flush and free. Loop thread, after the last record call. May be NULL. */
    void (*close)(struct collector_sink *s);
    /* Make every recorded result durable and visible (a sink may batch
     * several records into one write). Loop thread when no poll is in
     * flight, or the worker right after recording a poll someone waits for
     * (collector_daemon_poll_now); the daemon holds the sink lock. May be
     * NULL. */
    void (*flush)(struct collector_sink *s);
    /* Collectors sharing a fleet (a PostgreSQL store; NULL otherwise): at
     * each round, which of the n nodes this collector polls (mine[i]), for
     * the round numbered round_key (its start / the interval, the same on
     * every collector). Worker thread; may run while record runs, never
     * twice at once. <0: the round polls nothing (the database is down, and
     * another collector may hold the nodes). The sink keeps the collector's
     * lease alive itself (a thread of its own: a busy worker pool must not
     * make a live collector look dead). */
    int (*claim)(struct collector_sink *s, int64_t round_key, const char *const *names,
                 size_t n, bool *mine, struct hp_buf *err);
    /* How many record calls are settled so far (a count that only grows):
     * the n-th call (from 1) is durable, or was reported lost with its write
     * batch, once this reaches n. The daemon logs a poll as stored only
     * then, so a log line never claims a snapshot that a crash could still
     * take away. Any thread. NULL: every record is durable when it returns. */
    uint64_t (*settled)(struct collector_sink *s);
    /* Was the n-th record call, once settled, lost with its write batch (a
     * commit that failed after the record joined it)? Any thread. NULL:
     * never. */
    bool (*lost)(struct collector_sink *s, uint64_t n);
    /* Does the store take writes again? 0, or <0 with err. Asked before a
     * poll whose snapshot the store lost (its write failed, or its write
     * batch) is polled again in the same round. Worker thread; may run while
     * record runs. NULL: always. */
    int (*ready)(struct collector_sink *s, struct hp_buf *err);
};

/* A dump parser, run on worker threads (ingest_parse fits after a cast-free
 * wrapper). Returns 0 with *ret owned by the caller, or <0 with err saying where. */
struct collector_parse_limits {
    uint64_t max_stacks; /* distinct stacks in one profile */
    uint32_t max_frames; /* frames in one stack */
};
typedef int collector_parse_fn(const void *data, size_t len,
                               const struct collector_parse_limits *lim, struct profile **ret,
                               struct hp_buf *err);

struct uv_loop_s;

/* The running daemon, as a service on its loop sees it. */
struct collector_daemon;

/* How a poll asked for with collector_daemon_poll_now ended. Borrowed for
 * the duration of the callback. */
struct collector_poll_outcome {
    const char *node;
    int status;        /* 0: a dump was fetched and recorded; else HP_E* / -errno */
    const char *error; /* the failure in words; NULL on success */
    int64_t started_ms, finished_ms; /* wall clock; the snapshot's time is started_ms */
    size_t nattempts;  /* HTTP requests made, retries included */
};
typedef void collector_poll_done_cb(void *arg, const struct collector_poll_outcome *o);

/* Poll one node now, outside the schedule ("take a snapshot now"): the same
 * job a round runs (the node's steps, retries and timeouts, a max_inflight
 * slot, the memory budget), recorded in the sink like any poll and flushed
 * before cb runs, so a reader of the store sees the snapshot by then. A
 * node waiting for its start in the current round starts now instead (and
 * still counts for the round); any other poll is off the round's books.
 *
 * Loop thread. Returns 0 when the poll started or waits for a slot; then
 * cb(arg, outcome) runs later on the loop thread, exactly once, also when
 * the daemon stops first (status HP_ERR(ECANCELED)). Otherwise cb is never
 * called and err says why: HP_ENOTFOUND (no such node, with a "did you
 * mean" when a name is close), HP_ERR(EBUSY) (a poll of that node is
 * already running or waiting for a slot; it is not started twice),
 * HP_ERR(ECANCELED) (the daemon is stopping). */
int collector_daemon_poll_now(struct collector_daemon *d, const char *node,
                              collector_poll_done_cb *cb, void *arg, struct hp_buf *err);

/* Something else that lives on the collector's loop (the web API): started
 * once the loop exists, stopped at shutdown after polling ended (every
 * poll_now callback has run by then). stop must uv_close its handles; the
 * daemon then runs the loop until they are gone. Both run on the loop
 * thread; d stays valid until stop returns. */
struct collector_service {
    int (*start)(struct collector_service *s, struct uv_loop_s *loop,
                 struct collector_daemon *d, struct hp_buf *err);
    void (*stop)(struct collector_service *s);
};

struct collector_config {
    const char *nodes_path; /* be.list */
    uint64_t interval_ms;   /* between round starts */
    int64_t spread_ms;      /* <0: default (interval/10, at most 5 min; 0 with once) */
    uint32_t max_inflight;  /* nodes being fetched or processed at once */
    uint32_t retries;       /* extra tries per request after a retryable failure */
    uint64_t retry_base_ms; /* first backoff; doubles per retry, with jitter */
    uint32_t connect_timeout_ms;
    uint32_t timeout_ms; /* whole request */
    uint64_t max_body;   /* bytes per response on the wire */
    uint64_t max_decoded; /* bytes per response after decoding */
    uint32_t max_ratio;   /* decoded/wire past 16 MiB: a decompression bomb */
    uint64_t max_inflight_bytes; /* all response bodies fetched or held at once */
    uint64_t max_stacks;  /* distinct stacks per profile */
    uint32_t max_frames;  /* frames per stack */
    bool once;           /* one round, then exit */
    bool strict;         /* refuse a node list with a bad line */
    bool progress;       /* a progress line on stderr during --once */
    struct collector_service *service; /* optional, e.g. the web API on --listen */
    struct collector_health *health;   /* optional: every result noted before the sink */
};

void collector_config_default(struct collector_config *c);

/* Run the daemon until SIGTERM/SIGINT (or the end of the round with once).
 * Returns the process exit status: 0, 1 when --once saw a failed node, 2 on
 * a startup error (described on stderr). The sink is closed before return.
 * Main thread; installs signal handlers on its own loop. */
int collector_daemon_run(const struct collector_config *cfg, struct collector_sink *sink,
                         collector_parse_fn *parse);

/* A sink writing into a directory: DIR/<node>/<UTC time>.heap per dump and one
 * JSON line per attempt in DIR/snapshots.jsonl (see sink-dir.c). */
int collector_dirsink_new(const char *dir, struct collector_sink **ret,
                          struct hp_buf *err) HP_MUST_CHECK;

/* The collector's own health for GET /metrics (health.c): rounds, polls of
 * each node by outcome, a poll-time histogram. The daemon notes every result
 * it gives its sink (collector_config.health); any thread may read. */
struct collector_health;
struct collector_health *collector_health_new(void);
void collector_health_free(struct collector_health *h);
struct collector_result;
void collector_health_note(struct collector_health *h, const struct collector_result *r);
/* Prometheus text appended to out. */
void collector_health_metrics(struct collector_health *h, struct hp_buf *out);

#endif
