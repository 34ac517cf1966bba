/* The verdict series of GET /metrics: leak suspects, fleet outliers and
 * tracker disagreements as Prometheus gauges, so alerts can be written where
 * people already have them (deploy/heapfleet-alerts.yml, web/API.md).
 *
 * The analyses are the query library's, as the API's /leaks, /fleet and
 * /discrepancy run them: each node's newest WEB_VERDICT_SERIES snapshots for
 * leaks, every node's latest for fleet and discrepancy. That is too much
 * work for every scrape, so the text is cached per round: its key hashes
 * every node's name and latest snapshot id, and a scrape recomputes only
 * when a round stored something new. While one scrape computes, others get
 * the previous text at once rather than waiting.
 *
 * Cardinality is bounded: at most WEB_VERDICT_TOP functions per node per
 * family, categories come from the rules (a handful), and label values are
 * cut at WEB_VERDICT_LABEL bytes.
 *
 * Thread context: worker threads (the /metrics job), several at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "web/web-internal.h"

#define WEB_VERDICT_SERIES 24 /* snapshots per node for the leak fit */
#define WEB_VERDICT_TOP 3     /* functions per node per family */
#define WEB_VERDICT_LABEL 200 /* bytes of a label value */
#define WEB_VERDICT_NODES 2000

struct web_verdicts {
    uv_mutex_t lock;
    bool valid, computing;
    uint64_t key;
    struct hp_buf text;
    double seconds;     /* how long the last computation took */
    int64_t computed_ms; /* when it finished */
};

struct web_verdicts *web_verdicts_new(void)
{
    struct web_verdicts *v = hp_xcalloc(1, sizeof(*v));
    if (uv_mutex_init(&v->lock) != 0)
        abort(); /* only fails without memory */
    hp_buf_init(&v->text, 0);
    return v;
}

void web_verdicts_free(struct web_verdicts *v)
{
    if (!v)
        return;
    uv_mutex_destroy(&v->lock);
    hp_buf_release(&v->text);
    free(v);
}

/* A label value cut at a UTF-8 boundary; escaped by hp_buf_prom_label. */
static void label(struct hp_buf *b, const char *k, const char *s)
{
    char cut[WEB_VERDICT_LABEL + 1];
    size_t n = s ? strlen(s) : 0;
    if (n > WEB_VERDICT_LABEL) {
        n = WEB_VERDICT_LABEL;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(cut, s, n);
    cut[n] = '\0';
    hp_buf_printf(b, "%s=", k);
    hp_buf_prom_label(b, cut);
}

/* One family's lines, gathered per node and printed after its HELP/TYPE. */
struct fam {
    const char *name, *help;
    struct hp_buf lines;
};

static void fam_sample(struct fam *f, const char *node, const char *k2, const char *v2,
                       const char *k3, const char *v3, double value)
{
    hp_buf_printf(&f->lines, "%s{", f->name);
    label(&f->lines, "node", node);
    if (k2) {
        hp_buf_puts(&f->lines, ",");
        label(&f->lines, k2, v2);
    }
    if (k3) {
        hp_buf_puts(&f->lines, ",");
        label(&f->lines, k3, v3);
    }
    hp_buf_printf(&f->lines, "} %.17g\n", value);
}

enum {
    F_SUSPECTS,
    F_SUSPECT_RATE,
    F_GROWTH,
    F_OUTLIER,
    F_OUTLIER_FN,
    F_GAP,
    F_DISAGREE,
    F_INACCURATE,
    F_COUNT
};

static void leaks_of(struct web_request *r, const struct web_node_info *node, struct fam *fams)
{
    struct web_snapshot_info *snaps = NULL;
    size_t n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_loaded L;
    memset(&L, 0, sizeof(L));
    struct query_leaks *l = NULL;
    struct query_leak_opts lo;
    query_leak_opts_init(&lo);
    if (r->src->list_snapshots(r->src_ctx, node->name, 0, WEB_VERDICT_SERIES, &r->arena, &snaps,
                               &n, &err) < 0 ||
        n < 3)
        goto out;
    int rc = web_api_load_series(r, snaps, n, &L, &err);
    /* Too few snapshots with profiles, or one time for all: no verdict,
     * not an error of the scrape. */
    if (rc < 0 || query_leaks_build(L.qs, L.n, &lo, &l, &err) < 0)
        goto out;
    fam_sample(&fams[F_SUSPECTS], node->name, NULL, NULL, NULL, NULL, (double)l->nfuncs);
    fam_sample(&fams[F_GROWTH], node->name, NULL, NULL, NULL, NULL, l->total_rate);
    for (size_t i = 0; i < l->nfuncs && i < WEB_VERDICT_TOP; i++)
        fam_sample(&fams[F_SUSPECT_RATE], node->name, "function", l->funcs[i].name, NULL, NULL,
                   l->funcs[i].rate);
out:
    query_leaks_free(l);
    web_api_loaded_release(&L);
    hp_buf_release(&err);
}

/* Tracker disagreements of one node's latest snapshot. */
static void trackers_of(struct web_request *r, const struct web_node_info *node,
                        const struct query_snapshot *qs, struct fam *fams)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct query_rules *rules = NULL;
    struct query_discrepancy *d = NULL;
    if (web_api_rules(r, node->kind, qs->figures, qs->nfigures, &rules, &err) == 0 &&
        query_discrepancy_build(qs->folded, qs->figures, qs->nfigures, rules, &d, &err) == 0) {
        size_t disagree = 0;
        for (size_t c = 0; c < d->nrows; c++) {
            const struct query_discrepancy_row *row = &d->rows[c];
            if (row->verdict == QUERY_VERDICT_CONSISTENT || row->verdict == QUERY_VERDICT_NO_TRACKER)
                continue;
            disagree++;
            fam_sample(&fams[F_GAP], node->name, "category", row->category, "verdict",
                       query_verdict_name(row->verdict), row->gap);
        }
        fam_sample(&fams[F_DISAGREE], node->name, NULL, NULL, NULL, NULL, (double)disagree);
        fam_sample(&fams[F_INACCURATE], node->name, NULL, NULL, NULL, NULL,
                   d->query_tracker_inaccurate ? 1 : 0);
    }
    query_discrepancy_free(d);
    query_rules_free(rules);
    hp_buf_release(&err);
}

/* Fleet outliers and tracker disagreements over every node's latest
 * snapshot, loaded one at a time (as /api/v1/fleet: holding them all took
 * hundreds of MB over 1,000 nodes). A node whose snapshot does not load has
 * no verdict and is left out of the fleet. */
static void fleet_and_trackers(struct web_request *r, const struct web_node_info *nodes,
                               size_t n, struct fam *fams)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct query_fleet *f = NULL;
    struct query_fleet_opts fo;
    query_fleet_opts_init(&fo);
    fo.top = 0;
    size_t cap = HP_MIN(n, (size_t)WEB_VERDICT_NODES);
    struct query_snapshot *qs = hp_xcalloc(cap + 1, sizeof(*qs));
    const struct web_node_info **of = hp_xcalloc(cap + 1, sizeof(*of));
    struct query_fleet_acc *acc = query_fleet_begin(cap, &fo);
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++) {
        if (!nodes[i].has_latest)
            continue;
        struct query_folded *fold = NULL;
        hp_buf_reset(&err);
        if (web_api_load_one(r, nodes[i].latest.id, &qs[k], &fold, &err) == 0) {
            trackers_of(r, &nodes[i], &qs[k], fams);
            query_fleet_add(acc, k, fold);
            qs[k].folded = NULL;
            of[k++] = &nodes[i];
        }
        query_folded_free(fold);
    }
    hp_buf_reset(&err);
    if (k >= 2 && query_fleet_finish(acc, qs, k, &fo, &f, &err) == 0) {
        for (size_t i = 0; i < f->ntotals; i++)
            fam_sample(&fams[F_OUTLIER], f->totals[i].node, NULL, NULL, NULL, NULL,
                       f->totals[i].value - f->totals[i].median);
        /* Rows come sorted by excess: the first WEB_VERDICT_TOP per node. */
        for (size_t j = 0; j < k; j++) {
            size_t shown = 0;
            for (size_t i = 0; i < f->nfuncs && shown < WEB_VERDICT_TOP; i++)
                if (f->funcs[i].node && strcmp(f->funcs[i].node, of[j]->name) == 0) {
                    fam_sample(&fams[F_OUTLIER_FN], of[j]->name, "function", f->funcs[i].name,
                               NULL, NULL, f->funcs[i].value - f->funcs[i].median);
                    shown++;
                }
        }
    } else if (k < 2) {
        query_fleet_acc_free(acc);
    }
    query_fleet_free(f);
    free(of);
    free(qs);
    hp_buf_release(&err);
}

static void compute(struct web_request *r, const struct web_node_info *nodes, size_t n,
                    struct hp_buf *out)
{
    struct fam fams[F_COUNT] = {
        [F_SUSPECTS] = { "heapfleet_leak_suspects",
                         "Functions whose own allocations grow steadily on the node "
                         "(query leaks)." },
        [F_SUSPECT_RATE] = { "heapfleet_leak_suspect_growth_bytes_per_hour",
                             "Flat growth of the node's top leak suspects (at most 3 per "
                             "node)." },
        [F_GROWTH] = { "heapfleet_leak_heap_growth_bytes_per_hour",
                       "Growth of the node's heap total within process lifetimes." },
        [F_OUTLIER] = { "heapfleet_fleet_outlier_excess_bytes",
                        "How far the node's heap total is above the fleet median, for "
                        "outlier nodes (query fleet)." },
        [F_OUTLIER_FN] = { "heapfleet_fleet_outlier_function_excess_bytes",
                           "Bytes a function holds on the node above the fleet median, "
                           "for outliers (at most 3 per node)." },
        [F_GAP] = { "heapfleet_tracker_gap_bytes",
                    "Heap bytes of a category minus its tracker's figure, where they "
                    "disagree (query discrepancy)." },
        [F_DISAGREE] = { "heapfleet_tracker_disagreements",
                         "Categories whose tracker disagrees with the heap profile." },
        [F_INACCURATE] = { "heapfleet_query_tracker_inaccurate",
                           "1 when the query tracker accounts for less than the stacks with "
                           "query-operator frames hold (the Doris guide's test)." },
    };
    for (int i = 0; i < F_COUNT; i++)
        hp_buf_init(&fams[i].lines, 0);
    for (size_t i = 0; i < n && i < WEB_VERDICT_NODES; i++)
        if (nodes[i].has_latest)
            leaks_of(r, &nodes[i], fams);
    fleet_and_trackers(r, nodes, n, fams);
    for (int i = 0; i < F_COUNT; i++) {
        if (fams[i].lines.len) {
            web_metrics_family(out, fams[i].name, "gauge", fams[i].help);
            hp_buf_append(out, fams[i].lines.data, fams[i].lines.len);
        }
        hp_buf_release(&fams[i].lines);
    }
}

/* The cached text and when and how fast it was made (v locked). */
static void cached_out(const struct web_verdicts *v, struct hp_buf *out)
{
    hp_buf_append(out, v->text.data, v->text.len);
    web_metrics_family(out, "heapfleet_verdicts_computed_timestamp_seconds", "gauge",
                       "When the verdict series above were computed (once per round).");
    hp_buf_printf(out, "heapfleet_verdicts_computed_timestamp_seconds %.3f\n",
                  (double)v->computed_ms / 1000.0);
    web_metrics_family(out, "heapfleet_verdicts_compute_seconds", "gauge",
                       "Time the last computation of the verdict series took.");
    hp_buf_printf(out, "heapfleet_verdicts_compute_seconds %.6f\n", v->seconds);
}

void web_verdicts_metrics(struct web_verdicts *v, struct web_request *r,
                          const struct web_node_info *nodes, size_t n, struct hp_buf *out)
{
    if (!v || !r->src->list_snapshots || !r->src->load_snapshot)
        return;
    uint64_t key = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        key = hp_hash_bytes(nodes[i].name, strlen(nodes[i].name), key);
        key = hp_hash_u64(key ^ (uint64_t)(nodes[i].has_latest ? nodes[i].latest.id : 0));
        key = hp_hash_u64(key ^ (uint64_t)(nodes[i].has_latest ? nodes[i].latest.time_ms : 0));
    }
    uv_mutex_lock(&v->lock);
    bool fresh = v->valid && v->key == key;
    if (fresh || v->computing) {
        /* This round's text, or (while another scrape computes it) the
         * previous round's: a scrape never waits on another. */
        if (v->valid)
            cached_out(v, out);
        uv_mutex_unlock(&v->lock);
        return;
    }
    v->computing = true;
    uv_mutex_unlock(&v->lock);

    uint64_t t0 = hp_now_ns();
    struct hp_buf text = HP_BUF_INIT(0);
    compute(r, nodes, n, &text);
    double secs = (double)(hp_now_ns() - t0) / 1e9;

    uv_mutex_lock(&v->lock);
    hp_buf_release(&v->text);
    v->text = text;
    v->key = key;
    v->valid = true;
    v->computing = false;
    v->seconds = secs;
    v->computed_ms = hp_wall_ms();
    cached_out(v, out);
    uv_mutex_unlock(&v->lock);
}
