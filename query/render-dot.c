/* Graphviz call graph of a folded profile, in the shape `jeprof --dot` and
 * `pprof -dot` draw it: one box per function with its flat and cumulative
 * value and share ("flat (x%) of cum (y%)"), font size growing with flat
 * value, an edge from caller to callee weighted by the value of the stacks
 * that make that call, and a legend box with the title and what was hidden.
 *
 * Pruning, as jeprof users expect:
 *   - nodes whose cumulative value is under nodefraction of the total are
 *     dropped, and of the rest at most `top` (default 80, jeprof's
 *     --nodecount) with the largest cumulative value are kept;
 *   - edges under edgefraction of the total are dropped;
 *   - a call through dropped functions becomes a dotted edge between the
 *     nearest kept caller and callee (pprof's "residual" edge), so the graph
 *     stays connected and every kept node's value is still explained.
 * An edge's weight counts each stack once even when recursion repeats the
 * same call in it, as cumulative values do. */
#include "query/query.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOT_DEFAULT_NODES 80

struct edge {
    uint32_t from, to; /* node ids (1-based) */
    double w;
    bool residual; /* only through dropped nodes */
    uint32_t stamp;
};

static bool is_bytes(enum profile_value v)
{
    return v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE;
}

static const char *fmt_value(enum profile_value v, double x, char *buf, size_t n)
{
    if (x < 0) {
        char tmp[48];
        snprintf(buf, n, "-%s",
                 is_bytes(v) ? hp_fmt_bytes(-x, tmp, sizeof(tmp))
                             : hp_fmt_count(-x, tmp, sizeof(tmp)));
        return buf;
    }
    return is_bytes(v) ? hp_fmt_bytes(x, buf, n) : hp_fmt_count(x, buf, n);
}

/* Append s inside a double-quoted DOT string: quotes and backslashes
 * escaped, control characters blanked, invalid UTF-8 replaced. */
static void dot_str(struct hp_buf *out, struct hp_arena *a, const char *s)
{
    s = query_utf8_clean(a, s);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            hp_buf_printf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            hp_buf_puts(out, " ");
        else
            hp_buf_append(out, p, 1);
    }
}

static int cum_desc(const void *a, const void *b, void *ctx)
{
    const struct query_func *f = ctx;
    const struct query_func *x = &f[*(const uint32_t *)a], *y = &f[*(const uint32_t *)b];
    /* The context carries the sample index in the first flat slot's place:
     * see the caller. */
    (void)f;
    double cx = fabs(x->cum[0]), cy = fabs(y->cum[0]);
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return strcmp(x->name, y->name);
}

int query_render_dot(const struct query_folded *f, const struct query_top *t,
                     const struct query_opts *o, struct hp_buf *out)
{
    enum profile_value v = o->sample;
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    double total = t->total[v];
    double abs_total = fabs(total);
    double node_min = o->nodefraction * abs_total;
    double edge_min = o->edgefraction * abs_total;
    size_t max_nodes = o->top ? o->top : DOT_DEFAULT_NODES;

    /* Rank functions by |cum| of the chosen sample. A copy with the chosen
     * value in slot 0 keeps the comparator simple. */
    struct query_func *rank = hp_xmalloc((t->n + 1) * sizeof(*rank));
    uint32_t *ord = hp_xmalloc((t->n + 1) * sizeof(*ord));
    for (size_t i = 0; i < t->n; i++) {
        rank[i] = t->funcs[i];
        rank[i].cum[0] = t->funcs[i].cum[v];
        ord[i] = (uint32_t)i;
    }
    if (t->n > 1)
        qsort_r(ord, t->n, sizeof(*ord), cum_desc, rank);
    /* node id (1-based) per function name; 0 = dropped. */
    struct hp_map64 node_of;
    hp_map64_init(&node_of);
    uint32_t *node_func = hp_xmalloc((HP_MIN(max_nodes, t->n) + 1) * sizeof(*node_func));
    uint32_t nnodes = 0;
    size_t dropped_small = 0, dropped_count = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct query_func *fn = &t->funcs[ord[i]];
        if (fabs(fn->cum[v]) < node_min || fn->cum[v] == 0) {
            dropped_small++;
            continue;
        }
        if (nnodes >= max_nodes) {
            dropped_count++;
            continue;
        }
        node_func[nnodes++] = ord[i];
        uint32_t dummy;
        (void)hp_map64_put(&node_of, (uint64_t)(uintptr_t)fn->name, nnodes, &dummy);
    }

    /* Edges from every folded stack's sequence of kept nodes. */
    struct hp_map64 edge_of;
    hp_map64_init(&edge_of);
    struct edge *edges = NULL;
    size_t nedges = 0, edges_cap = 0;
    for (size_t ei = 0; ei < f->nentries; ei++) {
        const struct query_fold_entry *e = &f->entries[ei];
        const char *const *names = query_fold_frames(f, e);
        double val = e->value[v];
        uint32_t prev = 0;
        bool skipped = false;
        for (uint32_t k = 0; k < e->n; k++) {
            uint32_t id;
            if (!hp_map64_get(&node_of, (uint64_t)(uintptr_t)names[k], &id)) {
                skipped = prev != 0;
                continue;
            }
            if (prev) {
                uint64_t key = ((uint64_t)prev << 32) | id;
                uint32_t idx;
                if (!hp_map64_get(&edge_of, key, &idx)) {
                    edges = hp_xgrow(edges, &edges_cap, nedges + 1, sizeof(*edges));
                    idx = (uint32_t)nedges++;
                    edges[idx] = (struct edge){ .from = prev, .to = id, .residual = true };
                    (void)hp_map64_put(&edge_of, key, idx, &idx);
                }
                struct edge *ed = &edges[idx];
                if (!skipped)
                    ed->residual = false; /* at least one direct call */
                if (ed->stamp != ei + 1) {
                    ed->stamp = (uint32_t)ei + 1;
                    ed->w += val;
                }
            }
            prev = id;
            skipped = false;
        }
    }

    /* Header and legend. */
    char a[48], b[48], c[48], d[48];
    hp_buf_puts(out, "digraph \"");
    dot_str(out, &tmp, o->title && *o->title ? o->title : "heapfleet");
    hp_buf_printf(out, "; %s\" {\n", fmt_value(v, total, a, sizeof(a)));
    hp_buf_puts(out, "node [style=filled, fillcolor=\"#f8f8f8\", fontname=\"Helvetica\"];\n"
                     "edge [fontname=\"Helvetica\"];\n");
    hp_buf_puts(out, "Legend [fontsize=18, shape=plaintext, label=\"");
    if (o->title && *o->title) {
        dot_str(out, &tmp, o->title);
        hp_buf_puts(out, "\\l");
    }
    hp_buf_printf(out, "Total %s: %s\\l", profile_value_name(v), fmt_value(v, total, a, sizeof(a)));
    if (o->focus && *o->focus) {
        hp_buf_puts(out, "Focusing on: ");
        dot_str(out, &tmp, o->focus);
        hp_buf_puts(out, "\\l");
    }
    if (o->ignore && *o->ignore) {
        hp_buf_puts(out, "Ignoring: ");
        dot_str(out, &tmp, o->ignore);
        hp_buf_puts(out, "\\l");
    }
    hp_buf_printf(out, "Showing %u of %zu functions\\l", nnodes, t->n);
    if (dropped_small)
        hp_buf_printf(out, "Dropped %zu functions with cum < %s (%.2g%%)\\l", dropped_small,
                      fmt_value(v, node_min, b, sizeof(b)), 100.0 * o->nodefraction);
    if (dropped_count)
        hp_buf_printf(out, "Dropped %zu more functions past the first %zu\\l", dropped_count,
                      max_nodes);
    size_t dropped_edges = 0;
    for (size_t i = 0; i < nedges; i++)
        dropped_edges += fabs(edges[i].w) < edge_min || edges[i].w == 0;
    if (dropped_edges)
        hp_buf_printf(out, "Dropped %zu edges under %s (%.2g%%)\\l", dropped_edges,
                      fmt_value(v, edge_min, c, sizeof(c)), 100.0 * o->edgefraction);
    hp_buf_puts(out, "\"];\n");

    /* Nodes. */
    double max_flat = 0;
    for (uint32_t i = 0; i < nnodes; i++)
        max_flat = HP_MAX(max_flat, fabs(t->funcs[node_func[i]].flat[v]));
    for (uint32_t i = 0; i < nnodes; i++) {
        const struct query_func *fn = &t->funcs[node_func[i]];
        double flat = fn->flat[v], cum = fn->cum[v];
        double pf = total ? 100.0 * flat / total : 0, pc = total ? 100.0 * cum / total : 0;
        /* jeprof: 8pt plus up to 42pt by the square root of the flat share. */
        double fs = 8.0 + (max_flat > 0 ? 42.0 * sqrt(fabs(flat) / max_flat) : 0);
        /* Shade by cumulative share: the heavy paths stand out. */
        double k = abs_total > 0 ? HP_MIN(1.0, fabs(cum) / abs_total) : 0;
        int gb = (int)(248.0 - 120.0 * k);
        hp_buf_printf(out, "N%u [label=\"", i + 1);
        dot_str(out, &tmp, fn->name);
        if (flat != 0)
            hp_buf_printf(out, "\\n%s (%.1f%%)\\rof %s (%.1f%%)\\r\"",
                          fmt_value(v, flat, a, sizeof(a)), pf, fmt_value(v, cum, b, sizeof(b)),
                          pc);
        else
            hp_buf_printf(out, "\\n0 (0.0%%)\\rof %s (%.1f%%)\\r\"",
                          fmt_value(v, cum, b, sizeof(b)), pc);
        hp_buf_printf(out, ", shape=box, fontsize=%.1f, fillcolor=\"#f8%02x%02x\", tooltip=\"",
                      fs, gb, gb);
        dot_str(out, &tmp, fn->name);
        hp_buf_printf(out, " (%s flat, %s cum)\"];\n", fmt_value(v, flat, c, sizeof(c)),
                      fmt_value(v, cum, d, sizeof(d)));
    }

    /* Edges, heaviest first so Graphviz ranks the main path first. */
    double max_w = 0;
    for (size_t i = 0; i < nedges; i++)
        max_w = HP_MAX(max_w, fabs(edges[i].w));
    for (size_t i = 0; i < nedges; i++) {
        const struct edge *ed = &edges[i];
        if (fabs(ed->w) < edge_min || ed->w == 0)
            continue;
        double share = max_w > 0 ? fabs(ed->w) / max_w : 0;
        double pen = 1.0 + 5.0 * share;
        int weight = 1 + (int)(100.0 * (abs_total > 0 ? fabs(ed->w) / abs_total : 0));
        hp_buf_printf(out, "N%u -> N%u [label=\" %s\", weight=%d, penwidth=%.2f%s, tooltip=\"",
                      ed->from, ed->to, fmt_value(v, ed->w, a, sizeof(a)), weight, pen,
                      ed->residual ? ", style=dotted" : "");
        dot_str(out, &tmp, t->funcs[node_func[ed->from - 1]].name);
        hp_buf_puts(out, " -> ");
        dot_str(out, &tmp, t->funcs[node_func[ed->to - 1]].name);
        hp_buf_printf(out, "%s (%s)\"];\n", ed->residual ? " (through hidden functions)" : "",
                      fmt_value(v, ed->w, b, sizeof(b)));
    }
    hp_buf_puts(out, "}\n");

    free(edges);
    hp_map64_release(&edge_of);
    hp_map64_release(&node_of);
    free(node_func);
    free(ord);
    free(rank);
    hp_arena_release(&tmp);
    return 0;
}
