/* Request validation: the route table's path matching, query-string decoding
 * and the strict checks every parameter passes before any work is queued.
 * Anything that does not fit is refused with 400 and a message naming the
 * parameter and what was expected; nothing here allocates more than a few
 * kilobytes, whatever the request holds (h2o caps the request line itself).
 *
 * Thread context: loop thread (web_api_prepare); the helpers are pure. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "web/web-internal.h"

#define WEB_MAX_QUERY 4096
#define WEB_MAX_VALUE 1024

/* ---- times and selectors ---------------------------------------------------- */

/* Times and selectors are parsed by hp_time_parse and hp_selector_parse
 * (store/hp.c), the same code the query CLI runs; only the node-name check
 * (a path segment, so a tighter alphabet) is the web's own. */
int web_time_parse(const char *s, int64_t now_ms, int64_t *ret_ms)
{
    return hp_time_parse(s, now_ms, ret_ms);
}

static bool node_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-' || c == ':';
}

static int node_check(const char *s, size_t n, struct hp_buf *err)
{
    if (n == 0 || n > WEB_MAX_NODE) {
        hp_err_printf(err, "node name must be 1 to %d characters", WEB_MAX_NODE);
        return HP_EPARSE;
    }
    if (s[0] == '.') {
        hp_err_printf(err, "node name must not start with '.'");
        return HP_EPARSE;
    }
    for (size_t i = 0; i < n; i++)
        if (!node_char(s[i])) {
            hp_err_printf(err, "node name has a character outside [A-Za-z0-9._:-] at offset %zu",
                          i);
            return HP_EPARSE;
        }
    return 0;
}

int web_selector_parse(const char *s, int64_t now_ms, struct hp_arena *a,
                       struct web_selector *ret, struct hp_buf *err)
{
    struct web_selector sel = { 0 };
    struct hp_selector hs;
    if (strlen(s) > WEB_MAX_SELECTOR) {
        hp_err_printf(err, "selector must be 1 to %d characters (NODE, NODE@TIME or #ID)",
                      WEB_MAX_SELECTOR);
        return HP_EPARSE;
    }
    if (hp_selector_parse(s, now_ms, &hs, err) < 0)
        return HP_EPARSE;
    if (hs.id) {
        sel.id = hs.id;
        *ret = sel;
        return 0;
    }
    if (node_check(hs.node, hs.node_len, err) < 0)
        return HP_EPARSE;
    sel.node = hp_arena_strndup(a, hs.node, hs.node_len);
    if (hs.has_time)
        sel.at_ms = hs.at_ms;
    *ret = sel;
    return 0;
}

/* ---- query string ------------------------------------------------------------ */

/* Percent-decode [s, s+n) into the arena; '+' is a space in query values
 * (form encoding) but not in path segments. Refuses bad escapes, NUL and
 * control bytes. */
static char *pct_decode(struct hp_arena *a, const char *s, size_t n, bool plus_space)
{
    char *out = hp_arena_alloc(a, n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return NULL;
            int hi = hp_hex_digit(s[i + 1]), lo = hp_hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0)
                return NULL;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        if ((unsigned char)c < 0x20 || c == 0x7f)
            return NULL;
        *o++ = c;
    }
    *o = '\0';
    return out;
}

/* ---- the route table ----------------------------------------------------------- */

enum {
    P_SAMPLE = 1 << 0,
    P_FILTER = 1 << 1,   /* focus, ignore */
    P_TOP = 1 << 2,
    P_FORMAT = 1 << 3,
    P_OPTS = 1 << 4,     /* no_inline, lines, keep_allocator */
    P_SINCE = 1 << 5,
    P_LIMIT = 1 << 6,
    P_SPARK = 1 << 7,
    P_PRUNE = 1 << 8,
    P_AB = 1 << 9,       /* a, b (required) */
    P_NODE = 1 << 10,    /* node (optional) */
    P_NODE_REQ = 1 << 11,
    P_DOWNLOAD = 1 << 12,
    P_FUNCTION = 1 << 13, /* function (regex) */
    P_NORMALIZE = 1 << 14, /* diff: compare shares */
    P_POINTS = 1 << 15,  /* snapshots: downsample to about this many */
};

struct web_route {
    const char *pattern;
    unsigned params;
    void (*fn)(struct web_request *r); /* handlers live in api.c */
    bool post; /* POST only (no body is read); the others are GET only */
};

static void h_index(struct web_request *r);

static const struct web_route routes[] = {
    { "/api/v1", 0, h_index, false },
    { "/api/v1/nodes", P_SPARK, web_h_nodes, false },
    { "/api/v1/nodes/{node}/snapshots", P_SINCE | P_LIMIT | P_POINTS, web_h_snapshots, false },
    /* "Take a snapshot now": the server's poller runs first (server.c),
     * then the handler reads back what it stored. */
    { "/api/v1/nodes/{node}/snapshot", 0, web_h_poll_result, true },
    { "/api/v1/snapshots/{sel}", 0, web_h_snapshot, false },
    { "/api/v1/snapshots/{sel}/top", P_SAMPLE | P_FILTER | P_TOP | P_OPTS, web_h_top, false },
    { "/api/v1/snapshots/{sel}/tree", P_SAMPLE | P_FILTER | P_OPTS | P_PRUNE, web_h_tree, false },
    { "/api/v1/snapshots/{sel}/profile",
      P_FORMAT | P_SAMPLE | P_FILTER | P_TOP | P_OPTS | P_DOWNLOAD, web_h_profile, false },
    { "/api/v1/snapshots/{sel}/raw", P_DOWNLOAD, web_h_raw, false },
    { "/api/v1/diff",
      P_AB | P_SAMPLE | P_FILTER | P_TOP | P_OPTS | P_PRUNE | P_NORMALIZE | P_FORMAT | P_DOWNLOAD,
      web_h_diff, false },
    { "/api/v1/fleet", P_SINCE | P_SAMPLE | P_TOP, web_h_fleet, false },
    { "/api/v1/trend", P_NODE_REQ | P_SINCE | P_LIMIT | P_SAMPLE | P_FUNCTION, web_h_trend, false },
    { "/api/v1/leaks", P_NODE_REQ | P_SINCE | P_TOP | P_LIMIT | P_SAMPLE, web_h_leaks, false },
    { "/api/v1/discrepancy", P_NODE_REQ, web_h_discrepancy, false },
    { "/api/v1/symbolization", 0, web_h_symbolization, false },
};

struct known_param {
    const char *name;
    unsigned group;
};

static const struct known_param known[] = {
    { "sample", P_SAMPLE },     { "focus", P_FILTER },      { "ignore", P_FILTER },
    { "top", P_TOP },           { "format", P_FORMAT },     { "no_inline", P_OPTS },
    { "lines", P_OPTS },        { "keep_allocator", P_OPTS }, { "since", P_SINCE },
    { "limit", P_LIMIT },       { "spark", P_SPARK },       { "prune", P_PRUNE },
    { "a", P_AB },              { "b", P_AB },              { "node", P_NODE | P_NODE_REQ },
    { "download", P_DOWNLOAD }, { "function", P_FUNCTION }, { "normalize", P_NORMALIZE },
    { "points", P_POINTS },
};

void web_request_init(struct web_request *r, const struct web_source_ops *src, void *src_ctx,
                      size_t max_body)
{
    memset(r, 0, sizeof(*r));
    hp_arena_init(&r->arena);
    query_opts_init(&r->p.qo);
    r->src = src;
    r->src_ctx = src_ctx;
    r->max_body = max_body;
    r->content_type = "application/json";
    /* Uncapped while a handler writes (a refused append would leave a hole
     * in the middle of a document); the size is checked once at the end. */
    hp_buf_init(&r->body, 0);
}

void web_request_release(struct web_request *r)
{
    hp_buf_release(&r->body);
    hp_arena_release(&r->arena);
}

void web_api_error(struct web_request *r, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hp_buf_reset(&r->body);
    r->status = status;
    r->content_type = "application/json";
    r->disposition = NULL;
    hp_buf_puts(&r->body, "{\"error\":");
    query_json_str(&r->body, msg);
    hp_buf_printf(&r->body, ",\"status\":%d}\n", status);
}

static int parse_bool(const char *v, bool *ret)
{
    if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
        *ret = true;
    else if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
        *ret = false;
    else
        return HP_EPARSE;
    return 0;
}

static int parse_uint_max(const char *v, uint64_t max, uint64_t *ret)
{
    uint64_t n;
    if (hp_parse_u64(v, strlen(v), &n) < 0 || n > max)
        return HP_EPARSE;
    *ret = n;
    return 0;
}

static int check_regex(struct web_request *r, const char *name, const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > WEB_MAX_REGEX) {
        web_api_error(r, 400, "%s: a regular expression of 1 to %d bytes expected", name,
                      WEB_MAX_REGEX);
        return HP_EPARSE;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e) {
            web_api_error(r, 400, "%s: printable ASCII expected (byte %zu)", name, i);
            return HP_EPARSE;
        }
    /* Only a linear scan here, on the loop: the worker compiles the pattern
     * (a syntax error comes back from it as a 400 too), and the budget keeps
     * that compile small. */
    struct hp_buf err = HP_BUF_INIT(0);
    if (hp_regex_budget_check(v, &err) < 0) {
        web_api_error(r, 400, "%s: %s", name, err.data);
        hp_buf_release(&err);
        return HP_EPARSE;
    }
    return 0;
}

/* Validate one decoded key=value against the route. 0 or an error response. */
static int apply_param(struct web_request *r, unsigned allowed, const char *k, const char *v,
                       int64_t now)
{
    struct web_params *p = &r->p;
    struct hp_buf err = HP_BUF_INIT(0);
    uint64_t n;
    int rc = 0;
    if (strlen(v) > WEB_MAX_VALUE) {
        web_api_error(r, 400, "%s: value longer than %d bytes", k, WEB_MAX_VALUE);
        return HP_EPARSE;
    }
    if (strcmp(k, "sample") == 0) {
        if (profile_value_parse(v, &p->qo.sample) < 0) {
            web_api_error(r, 400, "sample: expected inuse_space, inuse_objects, alloc_space or "
                                  "alloc_objects");
            return HP_EPARSE;
        }
    } else if (strcmp(k, "focus") == 0 || strcmp(k, "ignore") == 0 ||
               strcmp(k, "function") == 0) {
        if (check_regex(r, k, v) < 0)
            return HP_EPARSE;
        if (k[1] == 'u')
            p->function = v;
        else if (k[0] == 'f')
            p->qo.focus = v;
        else
            p->qo.ignore = v;
    } else if (strcmp(k, "top") == 0) {
        if (parse_uint_max(v, 100000, &n) < 0) {
            web_api_error(r, 400, "top: a whole number from 0 (all) to 100000 expected");
            return HP_EPARSE;
        }
        p->qo.top = (size_t)n;
    } else if (strcmp(k, "format") == 0) {
        if (query_format_parse(v, &p->format) < 0 || p->format == QUERY_FORMAT_CSV) {
            web_api_error(r, 400, "format: expected text, collapsed, json, dot, svg or pprof");
            return HP_EPARSE;
        }
        p->has_format = true;
    } else if (strcmp(k, "no_inline") == 0 || strcmp(k, "lines") == 0 ||
               strcmp(k, "keep_allocator") == 0 || strcmp(k, "download") == 0 ||
               strcmp(k, "normalize") == 0) {
        bool b;
        if (parse_bool(v, &b) < 0) {
            web_api_error(r, 400, "%s: expected 0, 1, true or false", k);
            return HP_EPARSE;
        }
        if (strcmp(k, "no_inline") == 0)
            p->qo.no_inline = b;
        else if (k[0] == 'l')
            p->qo.with_lines = b;
        else if (k[0] == 'k')
            p->qo.keep_allocator = b;
        else if (k[0] == 'd')
            p->download = b;
        else
            p->normalize = b;
    } else if (strcmp(k, "since") == 0) {
        int64_t sec;
        if (hp_parse_duration(v, &sec) == 0 && sec >= 0 && sec <= INT64_C(3660) * 86400) {
            p->since_ms = now - sec * 1000;
        } else if (web_time_parse(v, now, &p->since_ms) < 0) {
            web_api_error(r, 400, "since: expected a duration (90m, 7d) or a time "
                                  "(2026-11-22T07:00:00Z, -6h)");
            return HP_EPARSE;
        }
    } else if (strcmp(k, "limit") == 0) {
        if (parse_uint_max(v, 100000, &n) < 0 || n == 0) {
            web_api_error(r, 400, "limit: a whole number from 1 to 100000 expected");
            return HP_EPARSE;
        }
        p->limit = (size_t)n;
    } else if (strcmp(k, "spark") == 0) {
        if (parse_uint_max(v, 200, &n) < 0) {
            web_api_error(r, 400, "spark: a whole number from 0 to 200 expected");
            return HP_EPARSE;
        }
        p->spark = (size_t)n;
    } else if (strcmp(k, "points") == 0) {
        if (parse_uint_max(v, 10000, &n) < 0 || n < 2) {
            web_api_error(r, 400, "points: a whole number from 2 to 10000 expected");
            return HP_EPARSE;
        }
        p->points = (size_t)n;
    } else if (strcmp(k, "prune") == 0) {
        double d;
        if (hp_parse_double(v, &d) < 0 || !(d >= 0 && d <= 0.1)) {
            web_api_error(r, 400, "prune: a share from 0 to 0.1 expected");
            return HP_EPARSE;
        }
        p->prune = d;
    } else if (strcmp(k, "a") == 0 || strcmp(k, "b") == 0) {
        struct web_selector *sel = k[0] == 'a' ? &p->a : &p->b;
        rc = web_selector_parse(v, now, &r->arena, sel, &err);
        if (rc < 0) {
            web_api_error(r, 400, "%s: %s", k, err.data);
            goto out;
        }
        if (k[0] == 'a')
            p->a_text = v;
        else
            p->b_text = v;
    } else if (strcmp(k, "node") == 0) {
        rc = node_check(v, strlen(v), &err);
        if (rc < 0) {
            web_api_error(r, 400, "node: %s", err.data);
            goto out;
        }
        p->node = v;
    }
    (void)allowed;
out:
    hp_buf_release(&err);
    return rc;
}

static int parse_query(struct web_request *r, unsigned allowed, const char *q, size_t qlen,
                       int64_t now)
{
    if (qlen > WEB_MAX_QUERY) {
        web_api_error(r, 400, "query string longer than %d bytes", WEB_MAX_QUERY);
        return HP_EPARSE;
    }
    const char *seen[WEB_MAX_PARAMS];
    size_t nseen = 0;
    const char *end = q ? q + qlen : NULL; /* NULL + 0 is undefined behaviour */
    while (q && q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        if (stop == q) { /* empty piece ("a=1&&b=2") */
            q = stop + 1;
            continue;
        }
        const char *eq = memchr(q, '=', (size_t)(stop - q));
        const char *kend = eq ? eq : stop;
        char *k = pct_decode(&r->arena, q, (size_t)(kend - q), true);
        char *v = eq ? pct_decode(&r->arena, eq + 1, (size_t)(stop - eq - 1), true)
                     : hp_arena_strdup(&r->arena, "1");
        if (!k || !v) {
            web_api_error(r, 400, "query string: bad percent-encoding or a control character");
            return HP_EPARSE;
        }
        size_t ki;
        for (ki = 0; ki < HP_ARRAY_SIZE(known); ki++)
            if (strcmp(known[ki].name, k) == 0)
                break;
        if (ki == HP_ARRAY_SIZE(known) || !(known[ki].group & allowed)) {
            struct hp_buf names = HP_BUF_INIT(0);
            for (size_t i = 0; i < HP_ARRAY_SIZE(known); i++)
                if (known[i].group & allowed)
                    hp_buf_printf(&names, "%s%s", names.len ? ", " : "", known[i].name);
            web_api_error(r, 400, "unknown parameter \"%.64s\" (this endpoint takes: %s)", k,
                          names.len ? names.data : "no parameters");
            hp_buf_release(&names);
            return HP_EPARSE;
        }
        for (size_t i = 0; i < nseen; i++)
            if (strcmp(seen[i], k) == 0) {
                web_api_error(r, 400, "parameter \"%s\" given twice", k);
                return HP_EPARSE;
            }
        if (nseen == WEB_MAX_PARAMS) {
            web_api_error(r, 400, "too many parameters");
            return HP_EPARSE;
        }
        seen[nseen++] = k;
        if (apply_param(r, allowed, k, v, now) < 0)
            return HP_EPARSE;
        q = stop + 1;
    }
    if ((allowed & P_AB) && (!r->p.a_text || !r->p.b_text)) {
        web_api_error(r, 400, "parameters a and b (snapshot selectors) are required");
        return HP_EPARSE;
    }
    if ((allowed & P_NODE_REQ) && !r->p.node) {
        web_api_error(r, 400, "parameter node is required");
        return HP_EPARSE;
    }
    return 0;
}

/* Split the raw path into decoded segments. */
static int split_path(struct web_request *r, const char *path, size_t len, char **seg,
                      size_t *ret_n)
{
    size_t n = 0;
    size_t i = 0;
    if (len == 0 || path[0] != '/' || len > WEB_MAX_PATH)
        return HP_EPARSE;
    while (i < len) {
        i++; /* skip '/' */
        size_t start = i;
        while (i < len && path[i] != '/')
            i++;
        if (i == start && i == len)
            break; /* trailing slash */
        if (n == WEB_MAX_SEGMENTS)
            return HP_EPARSE;
        char *s = pct_decode(&r->arena, path + start, i - start, false);
        if (!s || strcmp(s, "..") == 0 || strcmp(s, ".") == 0 || strchr(s, '/'))
            return HP_EPARSE;
        seg[n++] = s;
    }
    *ret_n = n;
    return 0;
}

int web_api_prepare(struct web_request *r, const char *path, size_t path_len, const char *query,
                    size_t query_len)
{
    char *seg[WEB_MAX_SEGMENTS];
    size_t nseg = 0;
    int64_t now = hp_wall_ms();
    if (split_path(r, path, path_len, seg, &nseg) < 0) {
        web_api_error(r, 400, "malformed path");
        return 0;
    }
    const struct web_route *route = NULL;
    const char *cap_node = NULL, *cap_sel = NULL;
    for (size_t i = 0; i < HP_ARRAY_SIZE(routes) && !route; i++) {
        const char *pat = routes[i].pattern;
        size_t k = 0;
        const char *cn = NULL, *cs = NULL;
        bool ok = true;
        while (*pat && ok) {
            pat++; /* '/' */
            const char *e = strchr(pat, '/');
            size_t plen = e ? (size_t)(e - pat) : strlen(pat);
            if (k >= nseg) {
                ok = false;
                break;
            }
            if (plen == 6 && memcmp(pat, "{node}", 6) == 0)
                cn = seg[k];
            else if (plen == 5 && memcmp(pat, "{sel}", 5) == 0)
                cs = seg[k];
            else if (strlen(seg[k]) != plen || memcmp(seg[k], pat, plen) != 0)
                ok = false;
            k++;
            pat += plen;
        }
        if (ok && k == nseg) {
            route = &routes[i];
            cap_node = cn;
            cap_sel = cs;
        }
    }
    if (!route) {
        web_api_error(r, 404, "no such endpoint (see API.md: /api/v1/nodes, "
                              "/api/v1/snapshots/SEL/top ...)");
        return 0;
    }
    r->route = route;
    if (route->post != r->post) {
        r->allow = route->post ? "POST" : "GET";
        web_api_error(r, 405, route->post ? "%s takes POST (it polls the node now)"
                                          : "%s takes GET only",
                      route->pattern);
        return 0;
    }
    if (parse_query(r, route->params, query, query ? query_len : 0, now) < 0)
        return 0;
    struct hp_buf err = HP_BUF_INIT(0);
    int rc = 1;
    if (cap_node) {
        if (node_check(cap_node, strlen(cap_node), &err) < 0) {
            web_api_error(r, 400, "%s", err.data);
            rc = 0;
            goto out;
        }
        r->p.node = cap_node;
    }
    if (cap_sel) {
        if (web_selector_parse(cap_sel, now, &r->arena, &r->p.sel, &err) < 0) {
            web_api_error(r, 400, "%s", err.data);
            rc = 0;
            goto out;
        }
        r->p.sel_text = cap_sel;
    }
out:
    hp_buf_release(&err);
    return rc;
}

/* GET /api/v1: what this server can answer, so clients (the UI) ask only
 * for what is wired instead of collecting 501s. */
static void h_index(struct web_request *r)
{
    struct hp_buf *b = &r->body;
    hp_buf_reset(b);
    hp_buf_puts(b, "{\"api\":\"heapfleet/v1\",\"endpoints\":[");
    for (size_t i = 0; i < HP_ARRAY_SIZE(routes); i++) {
        bool ok = true;
        const char *note = NULL;
        if (routes[i].fn == web_h_symbolization && !r->src->symbolization) {
            ok = false;
            note = "this data source keeps no symbolization status";
        }
        if (routes[i].fn == web_h_raw && !r->src->raw_dump) {
            ok = false;
            note = "this data source keeps no raw dumps";
        }
        if (routes[i].post && !r->can_poll) {
            ok = false;
            note = "this server polls no nodes (the collector's own web server does)";
        }
        hp_buf_printf(b, "%s{\"path\":", i ? "," : "");
        query_json_str(b, routes[i].pattern);
        hp_buf_printf(b, ",\"method\":\"%s\"", routes[i].post ? "POST" : "GET");
        hp_buf_printf(b, ",\"available\":%s", ok ? "true" : "false");
        if (note) {
            hp_buf_puts(b, ",\"note\":");
            query_json_str(b, note);
        }
        hp_buf_puts(b, "}");
    }
    hp_buf_puts(b, "],\"formats\":{");
    static const enum query_format fmts[] = { QUERY_FORMAT_TEXT, QUERY_FORMAT_COLLAPSED,
                                              QUERY_FORMAT_JSON, QUERY_FORMAT_DOT,
                                              QUERY_FORMAT_SVG,  QUERY_FORMAT_PPROF };
    for (size_t i = 0; i < HP_ARRAY_SIZE(fmts); i++) /* every renderer is built in */
        hp_buf_printf(b, "%s\"%s\":true", i ? "," : "", query_format_name(fmts[i]));
    hp_buf_puts(b, "}}\n");
    r->status = 200;
}

void web_api_run(struct web_request *r)
{
    r->status = 200;
    r->route->fn(r);
    if (r->max_body && r->body.len > r->max_body) {
        /* A raw dump is what it is: say where else to get it. */
        bool raw = r->route->fn == web_h_raw;
        web_api_error(r, 500, "the response (%zu bytes) exceeds the server's cap of %zu bytes; %s",
                      r->body.len, r->max_body,
                      raw ? "query export SEL --raw writes it whole (a folder's file is "
                            "the dump itself)"
                          : "narrow it with focus, top or prune");
    }
}
