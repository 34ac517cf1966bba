/* Readers for the memory figures nodes publish beside their heap dumps:
 * Prometheus /metrics text, the Doris /mem_tracker HTML table, brpc /vars and
 * the agent's /proc JSON, plus the path inside a Doris /jeheap/dump reply.
 *
 * All input comes from the network, so every reader is bounded: lines are
 * capped, the number of kept figures is capped (POLL_FIGURES_MAX), and
 * nothing is allocated in proportion to input that is thrown away. The
 * readers never stop at the first odd line: a node page with one strange
 * series still yields the rest, and the first problem is described. */
#include "collector/poll/poll.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FIG_MAX_LINE (64u * 1024)
#define FIG_MAX_NAME 512u

void poll_figures_release(struct poll_figures *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].name);
    free(f->v);
    f->v = NULL;
    f->n = f->cap = 0;
}

const char *poll_figure_source_name(enum poll_figure_source s)
{
    switch (s) {
    case POLL_FIG_METRICS:
        return "metrics";
    case POLL_FIG_TRACKER:
        return "tracker";
    case POLL_FIG_VARS:
        return "vars";
    case POLL_FIG_PROC:
        return "proc";
    }
    return "?";
}

int poll_figures_get(const struct poll_figures *f, const char *name, double *ret_value)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].name, name)) {
            *ret_value = f->v[i].value;
            return 1;
        }
    return 0;
}

void poll_memory_pick(const struct poll_figures *f, struct poll_memory *ret)
{
    /* Names in order of preference; see reference/databases-and-formats.md. */
    static const char *const rss[] = {
        "doris_be_memory_allocated_bytes", /* set from VmRSS, despite its name */
        "mem_tracker_current_bytes{type=\"overview\",label=\"process resident memory\"}",
        "databend_process_resident_memory_bytes",
        "process_resident_memory_bytes",
        "proc_rss_bytes",
    };
    static const char *const allocated[] = {
        "doris_be_memory_jemalloc_allocated_bytes",
        "starrocks_be_jemalloc_allocated_bytes",
        "jemalloc_allocated_bytes",
        "proc_jemalloc_allocated",
    };
    static const char *const tracked[] = {
        "memory_all_tracked_sum_bytes",
        "mem_tracker_current_bytes{type=\"overview\",label=\"sum of all trackers\"}",
        "starrocks_be_process_mem_bytes", /* the process tracker's consumption */
    };
    struct {
        const char *const *names;
        size_t n;
        double *out;
    } picks[] = {
        {rss, HP_ARRAY_SIZE(rss), &ret->rss_bytes},
        {allocated, HP_ARRAY_SIZE(allocated), &ret->allocated_bytes},
        {tracked, HP_ARRAY_SIZE(tracked), &ret->tracked_bytes},
    };
    for (size_t p = 0; p < HP_ARRAY_SIZE(picks); p++) {
        *picks[p].out = NAN;
        for (size_t i = 0; i < picks[p].n; i++)
            if (poll_figures_get(f, picks[p].names[i], picks[p].out) == 1)
                break;
    }
}

static int figure_add(struct poll_figures *f, const char *name, size_t name_len, double value,
                      enum poll_figure_source src)
{
    if (f->n >= POLL_FIGURES_MAX)
        return HP_ETOOBIG;
    f->v = hp_xgrow(f->v, &f->cap, f->n + 1, sizeof(*f->v));
    f->v[f->n++] =
        (struct poll_figure){.name = hp_xstrndup(name, name_len), .value = value, .source = src};
    return 0;
}

/* Parse a number token: decimal, exponent, NaN, +Inf/-Inf (Prometheus). */
static int number_parse(const char *s, size_t n, double *ret)
{
    char tmp[64];
    if (n == 0 || n >= sizeof(tmp))
        return HP_EPARSE;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "NaN")) {
        *ret = NAN;
        return 0;
    }
    if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "Inf")) {
        *ret = INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "-Inf")) {
        *ret = -INFINITY;
        return 0;
    }
    /* Integers are parsed exactly: byte counts past 2^53 must not round. */
    int64_t iv;
    if (hp_parse_i64(tmp, n, &iv) == 0) {
        *ret = (double)iv;
        return 0;
    }
    return hp_parse_double(tmp, ret);
}

/* Is this metric one we keep: about memory, or the process start time or
 * uptime?
 * Checked on the bare name, lowercase. */
static bool memory_metric(const char *name, size_t n)
{
    static const char *const words[] = {"mem", "alloc", "resident", "rss", "heap"};
    char low[FIG_MAX_NAME];
    if (n >= sizeof(low))
        return false;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    /* Not memory, but it tells process lifetimes apart: the leak analysis
     * splits a node's history where it changes (a restart). */
    if (strcmp(low, "process_start_time_seconds") == 0 || strstr(low, "uptime"))
        return true;
    for (size_t i = 0; i < HP_ARRAY_SIZE(words); i++)
        if (strstr(low, words[i]))
            return true;
    return false;
}

static bool metric_name_char(char ch, bool first)
{
    return isalpha((unsigned char)ch) || ch == '_' || ch == ':' ||
           (!first && isdigit((unsigned char)ch));
}

/* One exposition line. Returns 1 kept, 0 skipped, HP_EPARSE with *why set. */
static int metrics_line(const char *s, size_t n, struct poll_figures *out, const char **why)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == n || s[i] == '#')
        return 0;
    size_t name_start = i;
    if (!metric_name_char(s[i], true)) {
        *why = "a metric name must start with a letter, '_' or ':'";
        return HP_EPARSE;
    }
    while (i < n && metric_name_char(s[i], false))
        i++;
    size_t name_end = i;
    if (i < n && s[i] == '{') {
        /* Label values are quoted and may hold '}' and escaped quotes. */
        bool quoted = false;
        for (i++; i < n; i++) {
            if (quoted && s[i] == '\\') {
                i++;
                continue;
            }
            if (s[i] == '"')
                quoted = !quoted;
            else if (!quoted && s[i] == '}')
                break;
        }
        if (i >= n) {
            *why = "unterminated label set (expected '}')";
            return HP_EPARSE;
        }
        i++;
    }
    size_t series_end = i;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    size_t vstart = i;
    while (i < n && s[i] != ' ' && s[i] != '\t')
        i++;
    double v;
    if (vstart == i) {
        *why = "missing value after the series name";
        return HP_EPARSE;
    }
    if (number_parse(s + vstart, i - vstart, &v) < 0) {
        *why = "value is not a number";
        return HP_EPARSE;
    }
    if (!memory_metric(s + name_start, name_end - name_start))
        return 0;
    if (series_end - name_start > FIG_MAX_NAME) {
        *why = "series name longer than 512 bytes";
        return HP_EPARSE;
    }
    int r = figure_add(out, s + name_start, series_end - name_start, v, POLL_FIG_METRICS);
    return r < 0 ? r : 1;
}

int poll_metrics_parse(const char *text, size_t len, struct poll_figures *out, struct hp_buf *err)
{
    int r = 0;
    size_t pos = 0, line = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        const char *s = text + pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (n && s[n - 1] == '\r')
            n--;
        if (n > FIG_MAX_LINE) {
            hp_err_printf(err, "metrics line %zu: %zu bytes, over the limit of %u", line, n,
                          FIG_MAX_LINE);
            return HP_ETOOBIG;
        }
        const char *why = NULL;
        int lr = metrics_line(s, n, out, &why);
        if (lr == HP_ETOOBIG) {
            hp_err_printf(err, "metrics line %zu: more than %u memory series", line,
                          POLL_FIGURES_MAX);
            return lr;
        }
        if (lr < 0 && r == 0) {
            hp_err_printf(err, "metrics line %zu: %s", line, why);
            r = lr;
        }
    }
    return r;
}

/* ---- Doris /mem_tracker --------------------------------------------------- */

#define TRACKER_MAX_CELLS 32u
#define TRACKER_MAX_CELL 1024u
#define TRACKER_MAX_PAGE (16u << 20)

struct cell {
    char text[TRACKER_MAX_CELL];
    bool header;
};

/* Case-insensitive search bounded by end. The first byte of the needle is
 * matched exactly ('<' for tags) so memchr does most of the scanning. */
static const char *find_ci(const char *s, const char *end, const char *needle)
{
    size_t nl = strlen(needle);
    const char *p = s;
    while (p + nl <= end) {
        const char *q = memchr(p, needle[0], (size_t)(end - p));
        if (!q || q + nl > end)
            return NULL;
        if (strncasecmp(q, needle, nl) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
}

/* Text of a cell: tags dropped, a few entities decoded, whitespace folded. */
static void cell_text(const char *s, const char *end, char *out, size_t outsz)
{
    size_t o = 0;
    bool in_tag = false, space = false;
    for (const char *p = s; p < end && o + 1 < outsz; p++) {
        char ch = *p;
        if (in_tag) {
            if (ch == '>')
                in_tag = false;
            continue;
        }
        if (ch == '<') {
            in_tag = true;
            continue;
        }
        if (ch == '&') {
            static const struct {
                const char *ent;
                char ch;
            } ents[] = {{"&amp;", '&'},  {"&lt;", '<'},   {"&gt;", '>'},
                        {"&quot;", '"'}, {"&#39;", '\''}, {"&nbsp;", ' '}};
            for (size_t k = 0; k < HP_ARRAY_SIZE(ents); k++) {
                size_t el = strlen(ents[k].ent);
                if ((size_t)(end - p) >= el && !strncmp(p, ents[k].ent, el)) {
                    ch = ents[k].ch;
                    p += el - 1;
                    break;
                }
            }
        }
        if (isspace((unsigned char)ch)) {
            space = o > 0;
            continue;
        }
        if (space && o + 2 < outsz)
            out[o++] = ' ';
        space = false;
        out[o++] = ch;
    }
    out[o] = '\0';
}

/* Cells of the row [s, end). Returns the count (at most max). */
static size_t row_cells(const char *s, const char *end, struct cell *cells, size_t max)
{
    size_t n = 0;
    const char *p = s;
    while (p < end && n < max) {
        const char *td = find_ci(p, end, "<td");
        const char *th = find_ci(p, end, "<th");
        const char *c = td && (!th || td < th) ? td : th;
        if (!c)
            break;
        bool header = c == th;
        const char *gt = memchr(c, '>', (size_t)(end - c));
        if (!gt)
            break;
        const char *close = find_ci(gt + 1, end, header ? "</th" : "</td");
        const char *next_open = NULL;
        {
            const char *a = find_ci(gt + 1, end, "<td"), *b = find_ci(gt + 1, end, "<th");
            next_open = a && (!b || a < b) ? a : b;
        }
        /* Tolerate cells that are never closed: they end at the next cell. */
        const char *cend = close ? close : (next_open ? next_open : end);
        if (next_open && next_open < cend)
            cend = next_open;
        cell_text(gt + 1, cend, cells[n].text, sizeof(cells[n].text));
        cells[n].header = header;
        n++;
        p = cend;
        if (close && close == cend)
            p = cend + 4;
    }
    return n;
}

static bool header_is(const char *text, const char *want)
{
    /* Compare ignoring spaces and case: "Current Consumption (Bytes)". */
    const char *a = text, *b = want;
    while (*a || *b) {
        while (*a == ' ')
            a++;
        while (*b == ' ')
            b++;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
        if (*a)
            a++;
        if (*b)
            b++;
    }
    return true;
}

static void label_escape(struct hp_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            (void)hp_buf_append(b, "\\", 1);
        (void)hp_buf_append(b, s, 1);
    }
}

static int tracker_add(struct poll_figures *out, const char *metric, const char *type,
                       const char *label, int64_t v)
{
    struct hp_buf name = HP_BUF_INIT(0);
    (void)hp_buf_printf(&name, "%s{type=\"", metric);
    label_escape(&name, type);
    (void)hp_buf_puts(&name, "\",label=\"");
    label_escape(&name, label);
    (void)hp_buf_puts(&name, "\"}");
    int r = figure_add(out, name.data, name.len, (double)v, POLL_FIG_TRACKER);
    hp_buf_release(&name);
    return r;
}

int poll_tracker_parse(const char *html, size_t len, struct poll_figures *out, struct hp_buf *err)
{
    if (len > TRACKER_MAX_PAGE) {
        hp_err_printf(err, "mem_tracker page is %zu bytes, over the limit of %u", len,
                      TRACKER_MAX_PAGE);
        return HP_ETOOBIG;
    }
    const char *end = html + len;
    int col_type = -1, col_label = -1, col_cur = -1, col_peak = -1;
    size_t rows = 0, bad_rows = 0;
    struct cell *cells = hp_xcalloc(TRACKER_MAX_CELLS, sizeof(*cells));
    int r = 0;
    const char *p = html;
    while (p < end) {
        const char *tr = find_ci(p, end, "<tr");
        if (!tr)
            break;
        const char *next = find_ci(tr + 3, end, "<tr");
        const char *rend = find_ci(tr + 3, next ? next : end, "</tr");
        if (!rend)
            rend = next ? next : end;
        size_t nc = row_cells(tr, rend, cells, TRACKER_MAX_CELLS);
        p = rend;
        if (col_cur < 0) {
            for (size_t i = 0; i < nc; i++) {
                if (header_is(cells[i].text, "Current Consumption(Bytes)"))
                    col_cur = (int)i;
                else if (header_is(cells[i].text, "Peak Consumption(Bytes)"))
                    col_peak = (int)i;
                else if (header_is(cells[i].text, "Label"))
                    col_label = (int)i;
                else if (header_is(cells[i].text, "Type") || header_is(cells[i].text, "Level"))
                    col_type = (int)i;
            }
            if (col_cur >= 0 && col_label < 0) {
                col_cur = -1; /* a table with bytes but no labels is not the tracker */
                col_peak = -1;
            }
            continue;
        }
        if (nc <= (size_t)col_cur || nc <= (size_t)col_label)
            continue;
        if (cells[col_cur].header)
            continue;
        int64_t cur, peak;
        const char *cs = cells[col_cur].text;
        if (hp_parse_i64(cs, strlen(cs), &cur) < 0) {
            bad_rows++;
            continue;
        }
        const char *type = col_type >= 0 && (size_t)col_type < nc ? cells[col_type].text : "";
        r = tracker_add(out, "mem_tracker_current_bytes", type, cells[col_label].text, cur);
        if (r == 0 && col_peak >= 0 && (size_t)col_peak < nc) {
            const char *ps = cells[col_peak].text;
            if (hp_parse_i64(ps, strlen(ps), &peak) == 0)
                r = tracker_add(out, "mem_tracker_peak_bytes", type, cells[col_label].text, peak);
        }
        if (r < 0) {
            hp_err_printf(err, "mem_tracker: more than %u figures", POLL_FIGURES_MAX);
            goto out;
        }
        rows++;
    }
    if (col_cur < 0) {
        r = HP_ENOTFOUND;
        if (find_ci(html, end, "offline"))
            hp_err_printf(err, "mem_tracker page is offline on this version (see /profile)");
        else
            hp_err_printf(err, "no table with a \"Current Consumption(Bytes)\" column "
                               "(StarRocks pages only show rounded values)");
        goto out;
    }
    if (rows == 0) {
        r = HP_ENOTFOUND;
        hp_err_printf(err, "mem_tracker table has no rows with a byte count%s",
                      bad_rows ? " (values not integers)" : "");
    }
out:
    free(cells);
    return r;
}

/* ---- brpc /vars ------------------------------------------------------------ */

int poll_vars_parse(const char *text, size_t len, struct poll_figures *out, struct hp_buf *err)
{
    size_t pos = 0, line = 0, kept = 0;
    while (pos < len) {
        const char *s = text + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (n > FIG_MAX_LINE)
            continue;
        const char *colon = memchr(s, ':', n);
        if (!colon)
            continue;
        const char *ne = colon;
        while (ne > s && (ne[-1] == ' ' || ne[-1] == '\t'))
            ne--;
        const char *v = colon + 1, *ve = s + n;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\r' || ve[-1] == '\t'))
            ve--;
        double val;
        if (ne == s || (size_t)(ne - s) > FIG_MAX_NAME ||
            number_parse(v, (size_t)(ve - v), &val) < 0)
            continue; /* bvars may be strings or JSON: not figures */
        bool ok = true;
        for (const char *q = s; q < ne; q++)
            if (!metric_name_char(*q, q == s))
                ok = false;
        if (!ok)
            continue;
        if (figure_add(out, s, (size_t)(ne - s), val, POLL_FIG_VARS) < 0) {
            hp_err_printf(err, "vars line %zu: more than %u figures", line, POLL_FIGURES_MAX);
            return HP_ETOOBIG;
        }
        kept++;
    }
    if (kept == 0) {
        hp_err_printf(err, "no \"name : number\" lines in /vars output");
        return HP_ENOTFOUND;
    }
    return 0;
}

/* ---- agent /proc ------------------------------------------------------------ */

static int proc_object(json_t *obj, const char *prefix, int depth, struct poll_figures *out)
{
    const char *key;
    json_t *v;
    json_object_foreach (obj, key, v) {
        struct hp_buf name = HP_BUF_INIT(0);
        (void)hp_buf_printf(&name, "%s_%s", prefix, key);
        int r = 0;
        if (json_is_integer(v))
            r = figure_add(out, name.data, name.len, (double)json_integer_value(v), POLL_FIG_PROC);
        else if (json_is_real(v))
            r = figure_add(out, name.data, name.len, json_real_value(v), POLL_FIG_PROC);
        else if (json_is_object(v) && depth < 2 && name.len < FIG_MAX_NAME)
            r = proc_object(v, name.data, depth + 1, out);
        hp_buf_release(&name);
        if (r < 0)
            return r;
    }
    return 0;
}

int poll_proc_parse(const char *json, size_t len, struct poll_figures *out, struct hp_buf *err)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        hp_err_printf(err, "proc JSON line %d column %d: %s", je.line, je.column, je.text);
        return HP_EPARSE;
    }
    int r = 0;
    if (!json_is_object(root)) {
        hp_err_printf(err, "proc JSON: expected an object at the top");
        r = HP_EPARSE;
    } else if (proc_object(root, "proc", 0, out) < 0) {
        hp_err_printf(err, "proc JSON: more than %u figures", POLL_FIGURES_MAX);
        r = HP_ETOOBIG;
    }
    json_decref(root);
    return r;
}

/* ---- Doris /jeheap/dump ------------------------------------------------------ */

int poll_doris_dump_path(const char *text, size_t len, char **ret_path)
{
    static const char marker[] = "dump file path:";
    const char *end = text + len;
    const char *m = find_ci(text, end, marker);
    if (!m)
        return 0;
    const char *s = m + sizeof(marker) - 1;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    const char *e = s;
    while (e < end && *e != '\n' && *e != '\r' && *e != '\0')
        e++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (e == s || *s != '/' || (size_t)(e - s) > 4096)
        return 0;
    *ret_path = hp_xstrndup(s, (size_t)(e - s));
    return 1;
}
