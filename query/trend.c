/* trend: a table of series, one row per snapshot (node, time) and one
 * column per quantity: the heap total, every figure the snapshots carry
 * (tracker totals, RSS, jemalloc statistics), and chosen functions'
 * cumulative bytes. Functions are those matching --function, or the five
 * holding the most at the newest snapshot. */
#include "query/analysis-internal.h"

#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TREND_MAX_FIGURES 256

void query_trend_opts_init(struct query_trend_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sample = PV_INUSE_SPACE;
}

struct trend_priv {
    struct hp_arena arena;
    struct qa_stacks stacks;
    struct qa_funcs funcs;
};

struct snap_order {
    const struct query_snapshot *s;
};

static int snap_cmp(const void *a, const void *b)
{
    const struct query_snapshot *x = ((const struct snap_order *)a)->s;
    const struct query_snapshot *y = ((const struct snap_order *)b)->s;
    int c = strcmp(x->node ? x->node : "", y->node ? y->node : "");
    if (c)
        return c;
    return x->time_s < y->time_s ? -1 : x->time_s > y->time_s;
}

struct fsel {
    uint32_t id;
    double key;
    const char *name;
};

/* Largest first; equals by name, so that the choice does not depend on
 * the order stacks were met in (the store's function totals choose the
 * same way: query_stored_trend_functions). */
static int fsel_cmp(const void *a, const void *b)
{
    const struct fsel *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return strcmp(x->name, y->name);
}

int query_trend_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_trend_opts *o, struct query_trend **ret,
                      struct hp_buf *err)
{
    enum profile_value v = o->sample;
    regex_t re;
    bool has_re = false;
    bool given = o->functions_given;
    if (!given && o->function && *o->function) {
        int rc = regcomp(&re, o->function, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &re, msg, sizeof(msg));
            hp_err_printf(err, "--function \"%s\": invalid regular expression: %s", o->function,
                          msg);
            return HP_EUSAGE;
        }
        has_re = true;
    }
    struct query_trend *T = hp_xcalloc(1, sizeof(*T));
    struct trend_priv *pv = hp_xcalloc(1, sizeof(*pv));
    T->priv = pv;
    hp_arena_init(&pv->arena);
    qa_stacks_init(&pv->stacks);
    struct snap_order *ord = hp_xmalloc((n + 1) * sizeof(*ord));
    for (size_t i = 0; i < n; i++)
        ord[i].s = &snaps[i];
    hp_qsort(ord, n, sizeof(*ord), snap_cmp);

    /* Figure columns in first-seen order. */
    const char **figcols = NULL;
    size_t nfig = 0, figcap = 0;
    struct hp_strtab figs;
    hp_strtab_init(&figs, &pv->arena);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ord[i].s->nfigures && nfig < TREND_MAX_FIGURES; k++) {
            const char *nm = ord[i].s->figures[k].name;
            const char *in = hp_strtab_intern(&figs, nm, strlen(nm));
            size_t j;
            for (j = 0; j < nfig; j++)
                if (figcols[j] == in)
                    break;
            if (j == nfig) {
                figcols = hp_xgrow(figcols, &figcap, nfig + 1, sizeof(*figcols));
                figcols[nfig++] = in;
            }
        }

    /* Stacks of every snapshot, then function values per row. */
    struct trip {
        uint32_t id, row;
        double v;
    } *trips = NULL;
    size_t ntrips = 0, cap = 0;
    for (size_t i = 0; i < n && !given; i++) {
        const struct query_folded *f = ord[i].s->folded;
        if (!f)
            continue;
        trips = hp_xgrow(trips, &cap, ntrips + f->nentries, sizeof(*trips));
        for (size_t e = 0; e < f->nentries; e++)
            trips[ntrips++] = (struct trip){ qa_stacks_add_entry(&pv->stacks, f, &f->entries[e]),
                                             (uint32_t)i, f->entries[e].value[v] };
    }
    qa_funcs_build(&pv->funcs, &pv->stacks);
    struct qa_funcs *fn = &pv->funcs;
    /* Choose functions: regex matches (by their largest value), else the
     * top five at each node's newest snapshot. */
    double *key = hp_xcalloc(fn->n + 1, sizeof(*key));
    bool *last = hp_xcalloc(n + 1, sizeof(*last));
    for (size_t i = 0; i < n; i++)
        last[i] = i + 1 == n || strcmp(ord[i].s->node ? ord[i].s->node : "",
                                       ord[i + 1].s->node ? ord[i + 1].s->node : "") != 0;
    double *rowval = hp_xcalloc(fn->n + 1, sizeof(*rowval));
    size_t maxf = o->max_functions ? o->max_functions : has_re ? 50 : 5;
    /* key: regex -> max over rows; top -> sum over newest rows. */
    {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            memset(rowval, 0, fn->n * sizeof(*rowval));
            for (; k < ntrips && trips[k].row == i; k++)
                for (uint32_t j = fn->stack_off[trips[k].id]; j < fn->stack_off[trips[k].id + 1];
                     j++)
                    rowval[fn->ids[j]] += trips[k].v;
            for (size_t f = 0; f < fn->n; f++) {
                if (has_re)
                    key[f] = HP_MAX(key[f], rowval[f]);
                else if (last[i])
                    key[f] += rowval[f];
            }
        }
    }
    struct fsel *sel = hp_xmalloc((fn->n + 1) * sizeof(*sel));
    size_t nsel = 0;
    for (size_t f = 0; f < fn->n; f++) {
        if (has_re && regexec(&re, fn->name[f], 0, NULL, 0) != 0)
            continue;
        sel[nsel++] = (struct fsel){ (uint32_t)f, key[f], fn->name[f] };
    }
    hp_qsort(sel, nsel, sizeof(*sel), fsel_cmp);
    if (nsel > maxf)
        nsel = maxf;
    if (given)
        nsel = o->nfunctions;

    T->nrows = n;
    T->ncols = 1 + nfig + nsel;
    T->cols = hp_arena_alloc(&pv->arena, T->ncols * sizeof(*T->cols));
    T->cols[0] = "heap_total";
    for (size_t j = 0; j < nfig; j++)
        T->cols[1 + j] = figcols[j];
    for (size_t j = 0; j < nsel; j++) {
        const char *nm = given ? o->names[j] : fn->name[sel[j].id];
        size_t len = strlen(nm);
        char *c = hp_arena_alloc(&pv->arena, len + 4);
        memcpy(c, "fn:", 3);
        memcpy(c + 3, nm, len + 1);
        T->cols[1 + nfig + j] = c;
    }
    T->row_node = hp_arena_alloc(&pv->arena, (n + 1) * sizeof(*T->row_node));
    T->row_time = hp_arena_alloc(&pv->arena, (n + 1) * sizeof(*T->row_time));
    T->cells = hp_xmalloc((n * T->ncols + 1) * sizeof(*T->cells));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct query_snapshot *s = ord[i].s;
        double *row = T->cells + i * T->ncols;
        T->row_node[i] = s->node;
        T->row_time[i] = s->time_s;
        row[0] = s->folded ? s->folded->total[v] : s->totals ? s->totals[v] : NAN;
        for (size_t j = 0; j < nfig; j++) {
            double x;
            row[1 + j] = query_figure_find(s->figures, s->nfigures, figcols[j], &x) ? x : NAN;
        }
        if (given) {
            const double *gv = o->values + (size_t)(s - snaps) * nsel;
            for (size_t j = 0; j < nsel; j++)
                row[1 + nfig + j] = gv[j];
            continue;
        }
        memset(rowval, 0, fn->n * sizeof(*rowval));
        for (; k < ntrips && trips[k].row == i; k++)
            for (uint32_t j = fn->stack_off[trips[k].id]; j < fn->stack_off[trips[k].id + 1]; j++)
                rowval[fn->ids[j]] += trips[k].v;
        /* Whole bytes or objects, as the store keeps function totals. */
        for (size_t j = 0; j < nsel; j++)
            row[1 + nfig + j] = s->folded ? round(rowval[sel[j].id]) : NAN;
    }
    free(sel);
    free(rowval);
    free(last);
    free(key);
    free(trips);
    free(figcols);
    hp_strtab_release(&figs);
    free(ord);
    if (has_re)
        regfree(&re);
    *ret = T;
    return 0;
}

void query_trend_free(struct query_trend *t)
{
    if (!t)
        return;
    struct trend_priv *pv = t->priv;
    if (pv) {
        qa_funcs_release(&pv->funcs);
        qa_stacks_release(&pv->stacks);
        hp_arena_release(&pv->arena);
        free(pv);
    }
    free(t->cells);
    free(t);
}

static void iso_time(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "%lld", (long long)t);
}

/* RFC 4180: quote fields holding a comma, quote or newline. */
static void csv_field(struct hp_buf *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        hp_buf_puts(out, s);
        return;
    }
    hp_buf_puts(out, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            hp_buf_puts(out, "\"");
        hp_buf_append(out, p, 1);
    }
    hp_buf_puts(out, "\"");
}

static bool col_is_bytes(const char *c);

static void trend_text_all(const struct query_trend *t, struct hp_buf *out)
{
    char tb[40], vb[40];
    /* Every column: a legend, then an aligned table of short headers. */
    for (size_t j = 0; j < t->ncols; j++)
        hp_buf_printf(out, "  [%zu] %s\n", j + 1, t->cols[j]);
    hp_buf_printf(out, "\n%-20s %-12s", "time", "node");
    for (size_t j = 0; j < t->ncols; j++)
        hp_buf_printf(out, " %11s[%zu]", "", j + 1);
    hp_buf_puts(out, "\n");
    for (size_t i = 0; i < t->nrows; i++) {
        iso_time(t->row_time[i], tb, sizeof(tb));
        hp_buf_printf(out, "%-20s %-12s", tb, t->row_node[i] ? t->row_node[i] : "-");
        for (size_t j = 0; j < t->ncols; j++) {
            double x = t->cells[i * t->ncols + j];
            const char *s = isnan(x)                   ? "-"
                            : col_is_bytes(t->cols[j]) ? hp_fmt_bytes(x, vb, sizeof(vb))
                                                       : hp_fmt_count(x, vb, sizeof(vb));
            hp_buf_printf(out, " %14s", s);
        }
        hp_buf_puts(out, "\n");
    }
}

/* The main series of the default text table, each the first of its names
 * present (the names the kinds really export; see reference notes). */
static const struct {
    const char *label;
    const char *names[6];
} main_series[] = {
    { "heap", { "heap_total" } },
    { "rss",
      { "doris_be_memory_allocated_bytes", "databend_process_resident_memory_bytes",
        "process_resident_memory_bytes", "proc_rss_bytes",
        "mem_tracker_current_bytes{type=\"overview\",label=\"process resident memory\"}" } },
    { "allocated",
      { "doris_be_memory_jemalloc_allocated_bytes", "starrocks_be_jemalloc_allocated_bytes",
        "jemalloc_allocated_bytes", "proc_jemalloc_allocated" } },
    { "tracked",
      { "memory_all_tracked_sum_bytes", "starrocks_be_process_mem_bytes",
        "mem_tracker_current_bytes{type=\"overview\",label=\"sum of all trackers\"}",
        "stream_memory_usage", "databend_query_memory_usage_bytes" } },
};

static bool col_has_value(const struct query_trend *t, size_t j)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (!isnan(t->cells[i * t->ncols + j]))
            return true;
    return false;
}

int query_render_trend_text(const struct query_trend *t, const char *series,
                            struct hp_buf *out, struct hp_buf *err)
{
    if (series && strcmp(series, "all") == 0) {
        trend_text_all(t, out);
        return 0;
    }
    size_t *pick = hp_xcalloc(t->ncols + 1, sizeof(*pick));
    const char **label = hp_xcalloc(t->ncols + 1, sizeof(*label));
    size_t npick = 0;
    if (!series) {
        for (size_t m = 0; m < HP_ARRAY_SIZE(main_series); m++) {
            bool found = false;
            for (size_t k = 0; !found && k < HP_ARRAY_SIZE(main_series[m].names) &&
                               main_series[m].names[k];
                 k++)
                for (size_t j = 0; !found && j < t->ncols; j++)
                    if (strcmp(t->cols[j], main_series[m].names[k]) == 0 && col_has_value(t, j)) {
                        label[npick] = main_series[m].label;
                        pick[npick++] = j;
                        found = true;
                    }
        }
    } else {
        for (const char *p = series; *p;) {
            size_t n = strcspn(p, ",");
            size_t j = t->ncols;
            uint64_t num;
            if (n > 0 && hp_parse_u64(p, n, &num) == 0 && num >= 1 && num <= t->ncols)
                j = (size_t)num - 1;
            for (size_t c = 0; j == t->ncols && c < t->ncols; c++)
                if (strlen(t->cols[c]) == n && memcmp(t->cols[c], p, n) == 0)
                    j = c;
            if (j == t->ncols) {
                hp_err_printf(err, "--series: no series \"%.*s\" (give names or numbers from "
                                   "--series all)",
                              (int)n, p);
                free(pick);
                free(label);
                return HP_EUSAGE;
            }
            label[npick] = NULL;
            pick[npick++] = j;
            p += n;
            if (*p == ',')
                p++;
        }
    }
    int wnode = 4;
    for (size_t i = 0; i < t->nrows; i++) {
        int w = t->row_node[i] ? (int)strlen(t->row_node[i]) : 1;
        wnode = w > wnode ? (w < 24 ? w : 24) : wnode;
    }
    for (size_t k = 0; k < npick; k++)
        if (!label[k])
            hp_buf_printf(out, "  [%zu] %s\n", pick[k] + 1, t->cols[pick[k]]);
    hp_buf_printf(out, "%s%-20s %-*s", npick && !label[0] ? "\n" : "", "time", wnode, "node");
    for (size_t k = 0; k < npick; k++) {
        char h[24];
        if (label[k])
            snprintf(h, sizeof(h), "%s", label[k]);
        else
            snprintf(h, sizeof(h), "[%zu]", pick[k] + 1);
        hp_buf_printf(out, " %11s", h);
    }
    hp_buf_puts(out, "\n");
    char tb[40], vb[40];
    for (size_t i = 0; i < t->nrows; i++) {
        iso_time(t->row_time[i], tb, sizeof(tb));
        hp_buf_printf(out, "%-20s %-*.*s", tb, wnode, wnode, t->row_node[i] ? t->row_node[i] : "-");
        for (size_t k = 0; k < npick; k++) {
            double x = t->cells[i * t->ncols + pick[k]];
            const char *s = isnan(x)                          ? "-"
                            : col_is_bytes(t->cols[pick[k]]) ? hp_fmt_bytes(x, vb, sizeof(vb))
                                                              : hp_fmt_count(x, vb, sizeof(vb));
            hp_buf_printf(out, " %11s", s);
        }
        hp_buf_puts(out, "\n");
    }
    if (t->ncols > npick) {
        /* The rest summarized: how many, and the trackers' newest non-zero
         * values, one a line. */
        size_t ntr = 0;
        size_t last = t->nrows ? t->nrows - 1 : 0;
        hp_buf_printf(out, "\n%zu more series", t->ncols - npick);
        for (size_t j = 0; j < t->ncols && t->nrows; j++) {
            const char *c = t->cols[j];
            double x = t->cells[last * t->ncols + j];
            bool tracker = strstr(c, "trackers_sum_bytes") ||
                           (strncmp(c, "starrocks_be_", 13) == 0 && strstr(c, "_mem_bytes")) ||
                           strcmp(c, "stream_memory_usage") == 0;
            if (!tracker || isnan(x) || x == 0)
                continue;
            if (!ntr++)
                hp_buf_printf(out, "; trackers of %s at %s:",
                              t->row_node[last] ? t->row_node[last] : "the node",
                              (iso_time(t->row_time[last], tb, sizeof(tb)), tb));
            hp_buf_printf(out, "\n  %-60.60s %12s", c, hp_fmt_bytes(x, vb, sizeof(vb)));
        }
        hp_buf_puts(out, "\nEvery series: --series all; some: --series NAME,NAME or numbers "
                         "from that list.\n");
    }
    free(pick);
    free(label);
    return 0;
}

static bool col_is_bytes(const char *c)
{
    return strncmp(c, "fn:", 3) == 0 || strcmp(c, "heap_total") == 0 || strstr(c, "bytes") ||
           strncmp(c, "tracker:", 8) == 0;
}

int query_render_trend(const struct query_trend *t, enum query_format format,
                       struct hp_buf *out, struct hp_buf *err)
{
    char tb[40];
    switch (format) {
    case QUERY_FORMAT_CSV:
        hp_buf_puts(out, "time,time_unix,node");
        for (size_t j = 0; j < t->ncols; j++) {
            hp_buf_puts(out, ",");
            csv_field(out, t->cols[j]);
        }
        hp_buf_puts(out, "\n");
        for (size_t i = 0; i < t->nrows; i++) {
            iso_time(t->row_time[i], tb, sizeof(tb));
            hp_buf_printf(out, "%s,%lld,", tb, (long long)t->row_time[i]);
            csv_field(out, t->row_node[i] ? t->row_node[i] : "");
            for (size_t j = 0; j < t->ncols; j++) {
                double x = t->cells[i * t->ncols + j];
                if (isnan(x))
                    hp_buf_puts(out, ",");
                else
                    hp_buf_printf(out, ",%.0f", x);
            }
            hp_buf_puts(out, "\n");
        }
        return 0;
    case QUERY_FORMAT_JSON: {
        struct hp_arena tmp;
        hp_arena_init(&tmp);
        json_t *root = json_object(), *cols = json_array(), *rows = json_array();
        for (size_t j = 0; j < t->ncols; j++)
            json_array_append_new(cols, json_string(query_utf8_clean(&tmp, t->cols[j])));
        for (size_t i = 0; i < t->nrows; i++) {
            json_t *r = json_object(), *vals = json_array();
            iso_time(t->row_time[i], tb, sizeof(tb));
            json_object_set_new(r, "time", json_string(tb));
            json_object_set_new(r, "time_unix", json_integer(t->row_time[i]));
            json_object_set_new(r, "node", t->row_node[i]
                                               ? json_string(query_utf8_clean(&tmp, t->row_node[i]))
                                               : json_null());
            for (size_t j = 0; j < t->ncols; j++) {
                double x = t->cells[i * t->ncols + j];
                json_array_append_new(vals, isnan(x) ? json_null() : json_real(x));
            }
            json_object_set_new(r, "values", vals);
            json_array_append_new(rows, r);
        }
        json_object_set_new(root, "columns", cols);
        json_object_set_new(root, "rows", rows);
        int r = qa_json_emit(root, out);
        hp_arena_release(&tmp); /* after: names may point into it */
        return r;
    }
    case QUERY_FORMAT_TEXT:
        return query_render_trend_text(t, NULL, out, err);
    default:
        hp_err_printf(err, "--format %s is not available for trend (text, csv, json)",
                      query_format_name(format));
        return HP_EUSAGE;
    }
}
