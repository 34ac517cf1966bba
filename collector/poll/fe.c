/* FE discovery: what a Doris or StarRocks frontend says its backends are,
 * and the nodes the collector polls for them.
 *
 * GET /api/show_proc?path=/backends (and /compute_nodes on StarRocks) answers
 * the SHOW PROC table in one of two shapes, with or without Doris's
 * {"msg":..,"code":0,"data":...} envelope:
 *   - an array of objects keyed by the column names (StarRocks, current
 *     Doris): BackendId (ComputeNodeId for CNs), IP or Host, HttpPort, Alive,
 *     SystemDecommissioned, ClusterDecommissioned (older StarRocks/Doris);
 *   - an array of arrays in the SHOW BACKENDS column order (older Doris).
 *     Those orders differ by version; the columns are found by shape:
 *     Alive is the first of positions 8, 9, 10 that holds "true"/"false"
 *     (8: StarRocks and Doris 1.2, Host at 1 and HttpPort at 4; 9: Doris 2+
 *     with ArrowFlightSqlPort, same Host and HttpPort; 10: Doris 1.1 and
 *     older with a Cluster column, IP at 2 and HttpPort at 6), and the
 *     decommission flags follow it.
 * Values may be strings ("true", "8040") or JSON numbers and booleans.
 *
 * Names come from the backend id, not the address, so a backend keeps its
 * history when its IP changes. Any thread. */
#include "collector/poll/poll.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FE_MAX_BACKENDS 100000u

void poll_backends_free(struct poll_backend *b, size_t n)
{
    if (!b)
        return;
    for (size_t i = 0; i < n; i++) {
        free(b[i].id);
        free(b[i].host);
    }
    free(b);
}

/* A cell as text: strings as they are, numbers and booleans printed. */
static const char *cell_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_true(v))
        return "true";
    if (json_is_false(v))
        return "false";
    return NULL;
}

static int cell_bool(const json_t *v, bool *ret)
{
    char buf[32];
    const char *t = cell_text(v, buf, sizeof(buf));
    if (!t)
        return -1;
    if (!strcasecmp(t, "true")) {
        *ret = true;
        return 0;
    }
    if (!strcasecmp(t, "false")) {
        *ret = false;
        return 0;
    }
    return -1;
}

static bool id_ok(const char *s)
{
    if (!*s || strlen(s) > 20)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

static bool host_ok(const char *s)
{
    if (!*s || strlen(s) > 253)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_' || *p == ':'))
            return false;
    return true;
}

/* Fill one backend from id/host/port/alive/decommission cells; a message in
 * err and -1 when a cell is missing or not what it should be. */
static int backend_fill(struct poll_backend *b, const json_t *id, const json_t *host,
                        const json_t *port, const json_t *alive, const json_t *decom1,
                        const json_t *decom2, size_t row, struct hp_buf *err)
{
    char ibuf[32], pbuf[32];
    const char *ids = id ? cell_text(id, ibuf, sizeof(ibuf)) : NULL;
    const char *hs = host ? cell_text(host, pbuf, sizeof(pbuf)) : NULL;
    if (!ids || !id_ok(ids)) {
        hp_err_printf(err, "row %zu: BackendId is missing or not a number", row);
        return -1;
    }
    if (!hs || !host_ok(hs)) {
        hp_err_printf(err, "row %zu (backend %s): IP/Host is missing or not a host name", row, ids);
        return -1;
    }
    b->id = hp_xstrdup(ids);
    b->host = hp_xstrdup(hs);
    char buf[32];
    const char *ps = port ? cell_text(port, buf, sizeof(buf)) : NULL;
    uint64_t p;
    if (!ps || hp_parse_u64(ps, strlen(ps), &p) < 0 || p == 0 || p > 65535) {
        hp_err_printf(err, "row %zu (backend %s): HttpPort is missing or not a port", row, ids);
        return -1;
    }
    b->http_port = (uint16_t)p;
    if (!alive || cell_bool(alive, &b->alive) < 0) {
        hp_err_printf(err, "row %zu (backend %s): Alive is missing or not true/false", row, ids);
        return -1;
    }
    bool d1 = false, d2 = false;
    if (decom1)
        (void)cell_bool(decom1, &d1);
    if (decom2)
        (void)cell_bool(decom2, &d2);
    b->decommissioned = d1 || d2;
    return 0;
}

static const json_t *obj_get(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return v || !b ? v : json_object_get(o, b);
}

/* Positional rows: find Alive by shape (see the top of the file). */
static int row_fill(struct poll_backend *b, const json_t *row, size_t i, struct hp_buf *err)
{
    size_t n = json_array_size(row);
    static const struct {
        size_t alive, host, port;
    } layouts[] = { { 8, 1, 4 }, { 9, 1, 4 }, { 10, 2, 6 } };
    for (size_t k = 0; k < HP_ARRAY_SIZE(layouts); k++) {
        size_t a = layouts[k].alive;
        bool v;
        if (a >= n || cell_bool(json_array_get(row, a), &v) < 0)
            continue;
        /* LastHeartbeat (a time, never a boolean) comes right before Alive. */
        if (cell_bool(json_array_get(row, a - 1), &v) == 0)
            continue;
        return backend_fill(b, json_array_get(row, 0), json_array_get(row, layouts[k].host),
                            json_array_get(row, layouts[k].port), json_array_get(row, a),
                            a + 1 < n ? json_array_get(row, a + 1) : NULL,
                            a + 2 < n && k != 1 ? json_array_get(row, a + 2) : NULL, i, err);
    }
    hp_err_printf(err, "row %zu: no Alive column (true/false) where SHOW BACKENDS puts it "
                       "(columns 9-11); not a backends table?",
                  i);
    return -1;
}

int poll_fe_backends_parse(const char *json, size_t len, bool compute_nodes,
                           struct poll_backend **ret, size_t *ret_n, struct hp_buf *err)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    struct poll_backend *v = NULL;
    size_t n = 0;
    int r = HP_EPARSE;
    if (!root) {
        hp_err_printf(err, "not JSON (line %d, column %d: %s)", je.line, je.column, je.text);
        return HP_EPARSE;
    }
    const json_t *rows = root;
    if (json_is_object(root)) {
        const json_t *code = json_object_get(root, "code");
        if (code && json_is_integer(code) && json_integer_value(code) != 0) {
            const json_t *msg = json_object_get(root, "msg");
            hp_err_printf(err, "the FE answered code %lld: %s", (long long)json_integer_value(code),
                          json_is_string(msg) ? json_string_value(msg) : "(no message)");
            goto out;
        }
        rows = json_object_get(root, "data");
    }
    if (!json_is_array(rows)) {
        hp_err_printf(err, "expected an array of backends (or {\"data\": [...]}), got %s",
                      json_is_object(root) ? "an object without a \"data\" array" : "something else");
        goto out;
    }
    size_t total = json_array_size(rows);
    if (total > FE_MAX_BACKENDS) {
        hp_err_printf(err, "%zu backends (at most %u)", total, FE_MAX_BACKENDS);
        r = HP_ETOOBIG;
        goto out;
    }
    v = hp_xcalloc(total ? total : 1, sizeof(*v));
    for (size_t i = 0; i < total; i++) {
        const json_t *row = json_array_get(rows, i);
        struct poll_backend *b = &v[n];
        b->compute_node = compute_nodes;
        int fr;
        if (json_is_object(row)) {
            const json_t *id = compute_nodes ? obj_get(row, "ComputeNodeId", "BackendId")
                                             : obj_get(row, "BackendId", NULL);
            fr = backend_fill(b, id, obj_get(row, "IP", "Host"), obj_get(row, "HttpPort", NULL),
                              obj_get(row, "Alive", NULL),
                              obj_get(row, "SystemDecommissioned", NULL),
                              obj_get(row, "ClusterDecommissioned", NULL), i + 1, err);
        } else if (json_is_array(row)) {
            fr = row_fill(b, row, i + 1, err);
        } else {
            hp_err_printf(err, "row %zu is neither an object nor an array", i + 1);
            fr = -1;
        }
        if (fr < 0) {
            free(b->id);
            free(b->host);
            memset(b, 0, sizeof(*b));
            goto out;
        }
        n++;
    }
    *ret = v;
    *ret_n = n;
    v = NULL;
    r = 0;
out:
    poll_backends_free(v, n);
    json_decref(root);
    return r;
}

struct poll_node *poll_fe_backend_node(const struct poll_node *fe, const struct poll_backend *b)
{
    struct poll_node *n = poll_node_dup(fe);
    n->kind = fe->kind == POLL_KIND_DORIS_FE ? POLL_KIND_DORIS : POLL_KIND_STARROCKS;
    free(n->name);
    n->name = hp_xasprintf("%s-%s%s", fe->name, b->compute_node ? "cn" : "be", b->id);
    free(n->addr);
    bool v6 = strchr(b->host, ':') != NULL;
    n->addr = hp_xasprintf(v6 ? "[%s]:%u" : "%s:%u", b->host, (unsigned)b->http_port);
    if (fe->agent_port) {
        free(n->agent);
        n->agent = hp_xasprintf(v6 ? "[%s]:%u" : "%s:%u", b->host, (unsigned)fe->agent_port);
    }
    n->agent_port = 0;
    n->fe_state = !b->alive ? POLL_FE_DEAD
                  : b->decommissioned ? POLL_FE_DECOMMISSIONED
                                      : POLL_FE_ALIVE;
    free(n->fe_line);
    n->fe_line = hp_xstrdup(fe->name);
    /* Kept with every snapshot: which FE named it, and a decommission. */
    n->labels = hp_xrealloc(n->labels, (n->nlabels + 2) * sizeof(*n->labels));
    n->labels[n->nlabels].key = hp_xstrdup("fe");
    n->labels[n->nlabels].value = hp_xstrdup(fe->name);
    n->nlabels++;
    if (b->decommissioned) {
        n->labels[n->nlabels].key = hp_xstrdup("fe_status");
        n->labels[n->nlabels].value = hp_xstrdup("decommissioned");
        n->nlabels++;
    }
    return n;
}

/* ---- asking the FE: one address after another, backends then CNs ---- */

struct fe_query {
    struct poll_fetcher *f;
    struct poll_node *fe; /* copy */
    uint32_t timeout_ms;
    poll_fe_done_cb *cb;
    void *arg;
    char **addrs;
    size_t naddrs, cur;
    bool cn_phase;
    struct poll_fe_result res;
    struct hp_buf failures; /* "addr: why; ..." */
};

static void fe_query_free(struct fe_query *q)
{
    for (size_t i = 0; i < q->naddrs; i++)
        free(q->addrs[i]);
    free(q->addrs);
    poll_node_free(q->fe);
    hp_buf_release(&q->failures);
    free(q);
}

void poll_fe_result_release(struct poll_fe_result *r)
{
    poll_backends_free(r->backends, r->n);
    free(r->answered_by);
    memset(r, 0, sizeof(*r));
}

static void fe_step(struct fe_query *q);

static void fe_finish(struct fe_query *q, int status)
{
    q->res.status = status;
    if (status < 0)
        snprintf(q->res.error, sizeof(q->res.error), "%s",
                 q->failures.data ? q->failures.data : "no FE answered");
    poll_fe_done_cb *cb = q->cb;
    void *arg = q->arg;
    struct poll_fe_result res = q->res;
    memset(&q->res, 0, sizeof(q->res));
    fe_query_free(q);
    cb(&res, arg);
}

/* This address failed: note why and try the next one from scratch. */
static void fe_next_address(struct fe_query *q, const char *why)
{
    (void)hp_buf_printf(&q->failures, "%s%s: %s", q->failures.len ? "; " : "", q->addrs[q->cur],
                        why);
    poll_backends_free(q->res.backends, q->res.n);
    q->res.backends = NULL;
    q->res.n = 0;
    q->cn_phase = false;
    if (++q->cur >= q->naddrs) {
        fe_finish(q, HP_EHTTP);
        return;
    }
    fe_step(q);
}

static void fe_done_cb(struct poll_fetch_result *res, void *arg)
{
    struct fe_query *q = arg;
    if (res->status == -ECANCELED) {
        poll_fetch_result_free(res);
        fe_finish(q, -ECANCELED);
        return;
    }
    char why[600];
    if (res->status < 0) {
        if (q->cn_phase) {
            /* StarRocks before compute nodes: no such proc node. Backends
             * are known; CNs are just absent. */
            poll_fetch_result_free(res);
            fe_finish(q, 0);
            return;
        }
        snprintf(why, sizeof(why), "%s", res->error[0] ? res->error : hp_strerror(res->status));
        poll_fetch_result_free(res);
        fe_next_address(q, why);
        return;
    }
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_backend *b = NULL;
    size_t n = 0;
    int r = poll_fe_backends_parse(res->body ? res->body : "", res->body_len, q->cn_phase, &b, &n,
                                   &err);
    poll_fetch_result_free(res);
    if (r < 0) {
        if (q->cn_phase) {
            hp_buf_release(&err);
            fe_finish(q, 0);
            return;
        }
        snprintf(why, sizeof(why), "/backends: %s", err.data ? err.data : hp_strerror(r));
        hp_buf_release(&err);
        fe_next_address(q, why);
        return;
    }
    hp_buf_release(&err);
    q->res.backends = hp_xrealloc(q->res.backends, (q->res.n + n + 1) * sizeof(*b));
    memcpy(q->res.backends + q->res.n, b, n * sizeof(*b));
    q->res.n += n;
    free(b);
    if (!q->cn_phase) {
        free(q->res.answered_by);
        q->res.answered_by = hp_xstrdup(q->addrs[q->cur]);
    }
    if (!q->cn_phase && q->fe->kind == POLL_KIND_STARROCKS_FE) {
        q->cn_phase = true;
        fe_step(q);
        return;
    }
    fe_finish(q, 0);
}

static void fe_step(struct fe_query *q)
{
    const struct poll_node *fe = q->fe;
    char *url = hp_xasprintf("%s://%s/api/show_proc?path=/%s", fe->tls == POLL_TLS_NO ? "http" : "https",
                             q->addrs[q->cur], q->cn_phase ? "compute_nodes" : "backends");
    struct poll_fetch_opts o = {
        .url = url,
        .user = fe->user,
        .password = fe->password,
        .tls_insecure = fe->tls == POLL_TLS_INSECURE,
        .ca_file = fe->ca_file,
        .cert_file = fe->cert_file,
        .key_file = fe->key_file,
        .connect_timeout_ms = HP_MIN(q->timeout_ms, 5000u),
        .total_timeout_ms = q->timeout_ms,
        .max_bytes = (uint64_t)64 << 20,
    };
    int r = poll_fetch_start(q->f, &o, fe_done_cb, q);
    free(url);
    if (r < 0)
        fe_next_address(q, hp_strerror(r));
}

int poll_fe_discover(struct poll_fetcher *f, const struct poll_node *fe, uint32_t timeout_ms,
                     poll_fe_done_cb *cb, void *arg)
{
    if (!poll_kind_is_fe(fe->kind))
        return HP_EUSAGE;
    struct fe_query *q = hp_xcalloc(1, sizeof(*q));
    q->f = f;
    q->fe = poll_node_dup(fe);
    q->timeout_ms = timeout_ms ? timeout_ms : 10000;
    q->cb = cb;
    q->arg = arg;
    hp_buf_init(&q->failures, 4096);
    for (const char *s = fe->addr;;) {
        size_t len = strcspn(s, ",");
        q->addrs = hp_xrealloc(q->addrs, (q->naddrs + 1) * sizeof(*q->addrs));
        q->addrs[q->naddrs++] = hp_xstrndup(s, len);
        if (!s[len])
            break;
        s += len + 1;
    }
    fe_step(q);
    return 0;
}
