/* ft-chains: chained function totals (function_totals_rest) for
 * tests/pg/ft-chains.sh, on either engine (--db is a path or a libpq URI).
 *   ft-chains write DB HOURS   HOURS hourly snapshots of one drifting
 *                              200-function profile (node "be-ft"), each
 *                              snapshot's packed totals and raw dump
 *                              chained on the one before; then snapshot
 *                              #HOURS/2 reindexed with the last hour's
 *                              profile
 *   ft-chains retain DB HOURS  thin the first half to one a day (with
 *                              reclaim: the dictionaries swept), drop the
 *                              first 10 hours
 *   ft-chains dump DB HOURS    every stored value: per snapshot, each
 *                              function's totals ("T id function values")
 *                              and its raw dump's size ("R id bytes"; it
 *                              must be its hour's dump, byte for byte),
 *                              and each function's trend over the node
 *                              ("S id function values"), and the same
 *                              trends read in one pass over the snapshots
 *                              for all functions at once ("M id function
 *                              values": store_series_functions; "J" for
 *                              the first five, read by index seeks outside
 *                              the spans, not scans), sorted by
 *                              the caller
 * Exit 0, or 1 with the store's message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tests/store/gen.h"

#define HOUR_MS INT64_C(3600000)
#define T0 INT64_C(1763798400000) /* 2025-11-22T08:00:00Z */

/* Hour h's profile, and its raw dump when ret_raw is given; every 25th
 * stack grows with the hours (leak suspects for ft-chains.sh's comparison
 * of `query leaks` on both engines; the dump has the generator's counts). */
static struct profile *hour_profile(uint32_t h, char **ret_raw, size_t *ret_len)
{
    struct gen_params gp = { .seed = 21, .nstacks = 400, .nfuncs = 200, .symbolize = true,
                             .hour = h };
    struct profile *p = gen_profile(&gp, ret_raw, ret_len);
    for (size_t i = 3; i < p->nsamples; i += 25)
        for (int v = 0; v < 2; v++)
            p->samples[i].raw[v] += p->samples[i].raw[v] * (int64_t)h / 40;
    profile_unsample(p);
    return p;
}

struct names {
    char **v;
    size_t n, cap;
};

struct dump_ctx {
    int64_t id;
    struct names *names;
};

static int total_cb(const struct store_function_total *t, void *ctx)
{
    struct dump_ctx *d = ctx;
    printf("T %lld %s %lld %lld %lld %lld\n", (long long)d->id, t->name,
           (long long)t->flat_space, (long long)t->cum_space, (long long)t->flat_objects,
           (long long)t->cum_objects);
    struct names *nm = d->names;
    for (size_t i = 0; i < nm->n; i++)
        if (strcmp(nm->v[i], t->name) == 0)
            return 0;
    nm->v = hp_xgrow(nm->v, &nm->cap, nm->n + 1, sizeof(*nm->v));
    nm->v[nm->n++] = hp_xstrdup(t->name);
    return 0;
}

/* The functions of names, with their ids (store_functions_list), for
 * store_series_functions, which wants ids ascending. */
struct fn_ids {
    const struct names *names;
    int64_t *id;
    const char **name;
    size_t n;
};

static int fn_id_cb(int64_t id, const char *name, void *ctx)
{
    struct fn_ids *f = ctx;
    for (size_t i = 0; i < f->names->n; i++)
        if (strcmp(f->names->v[i], name) == 0) {
            f->id[f->n] = id; /* listed by id: ascending */
            f->name[f->n++] = f->names->v[i];
            break;
        }
    return 0;
}

static int pass_cb(const struct store_function_point *pts, size_t nf, void *ctx)
{
    const struct fn_ids *f = ctx;
    for (size_t j = 0; j < nf; j++)
        printf("%c %lld %s %lld %lld %lld %lld\n", nf <= 5 ? 'J' : 'M',
               (long long)pts[j].snapshot_id, f->name[j],
               (long long)pts[j].flat_space, (long long)pts[j].cum_space,
               (long long)pts[j].flat_objects, (long long)pts[j].cum_objects);
    return 0;
}

static int dump_one_pass(struct store *s, int64_t node, const struct names *names,
                         struct hp_buf *err)
{
    struct fn_ids f = { names, hp_xcalloc(names->n + 1, sizeof(*f.id)),
                        hp_xcalloc(names->n + 1, sizeof(*f.name)), 0 };
    int r = store_functions_list(s, fn_id_cb, &f, err);
    if (r == 0)
        r = store_series_functions(s, node, 0, INT64_MAX, f.id, f.n, pass_cb, &f, err);
    /* A few functions ("J"): outside the spans each read by an index seek,
     * not a scan a snapshot. */
    if (r == 0 && f.n > 5)
        r = store_series_functions(s, node, 0, INT64_MAX, f.id, 5, pass_cb, &f, err);
    free(f.id);
    free(f.name);
    return r;
}

/* Snapshot `id` (hour id - 1) must read back its hour's raw dump byte for
 * byte (raw dumps are line deltas of the one before, store/ldelta.c);
 * "R id bytes" for the comparisons across engines. */
static int raw_check(struct store *s, int64_t id, struct hp_buf *err)
{
    char *want;
    size_t want_len, len;
    void *got;
    profile_free(hour_profile((uint32_t)(id - 1), &want, &want_len));
    int r = store_snapshot_raw(s, id, &got, &len, err);
    if (r == 0 && (len != want_len || memcmp(got, want, len) != 0)) {
        hp_err_printf(err, "snapshot %lld: its raw dump reads back other bytes (%zu, "
                      "expected %zu)", (long long)id, len, want_len);
        r = -1;
    }
    if (r == 0)
        printf("R %lld %zu\n", (long long)id, len);
    if (r == 0)
        free(got);
    free(want);
    return r;
}

static int run(struct store *s, const char *cmd, uint32_t hours, struct hp_buf *err)
{
    int64_t node;
    int r;
    if (strcmp(cmd, "write") == 0) {
        struct store_node_info ni = { .name = "be-ft", .kind = "doris" };
        if ((r = store_node_upsert(s, &ni, &node, err)) < 0)
            return r;
        for (uint32_t h = 0; h < hours; h++) {
            char *raw;
            size_t len;
            struct profile *p = hour_profile(h, &raw, &len);
            int64_t id;
            r = store_snapshot_insert(s, node, T0 + h * HOUR_MS, p, raw, len, NULL, NULL, 0, &id,
                                      err);
            profile_free(p);
            free(raw);
            if (r < 0)
                return r;
        }
        struct profile *p = hour_profile(hours - 1, NULL, NULL);
        r = store_snapshot_reindex(s, hours / 2, p, err);
        profile_free(p);
        return r;
    }
    if (strcmp(cmd, "retain") == 0) {
        struct store_retain_policy pol = { .retain_s = (hours - 10) * 3600,
                                           .thin_after_s = (hours / 2) * 3600,
                                           .reclaim = true };
        struct store_retain_result res;
        return store_retain(s, &pol, T0 + hours * HOUR_MS, &res, err);
    }
    if ((r = store_node_find(s, "be-ft", &node, err)) < 0)
        return r;
    struct names names = { 0 };
    for (int64_t id = 1; id <= (int64_t)hours; id++) {
        struct store_snapshot_info si;
        if (store_snapshot_info(s, id, &si, NULL) < 0)
            continue;
        struct dump_ctx d = { id, &names };
        if ((r = store_function_totals(s, id, total_cb, &d, err)) < 0 ||
            (r = raw_check(s, id, err)) < 0)
            return r;
    }
    for (size_t i = 0; i < names.n && r >= 0; i++) {
        struct store_function_point *pts;
        size_t n;
        if ((r = store_series_function(s, node, names.v[i], 0, INT64_MAX, &pts, &n, err)) < 0)
            break;
        for (size_t k = 0; k < n; k++)
            printf("S %lld %s %lld %lld %lld %lld\n", (long long)pts[k].snapshot_id,
                   names.v[i], (long long)pts[k].flat_space, (long long)pts[k].cum_space,
                   (long long)pts[k].flat_objects, (long long)pts[k].cum_objects);
        free(pts);
    }
    if (r >= 0)
        r = dump_one_pass(s, node, &names, err);
    for (size_t i = 0; i < names.n; i++)
        free(names.v[i]);
    free(names.v);
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ft-chains write|retain|dump DB HOURS\n");
        return 2;
    }
    uint32_t hours = (uint32_t)strtoul(argv[3], NULL, 10);
    bool dump = strcmp(argv[1], "dump") == 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *s;
    int r = store_open(argv[2], dump ? STORE_OPEN_READ : STORE_OPEN_WRITE, &s, &err);
    if (r == 0) {
        r = run(s, argv[1], hours, &err);
        store_close(s);
    }
    if (r < 0)
        fprintf(stderr, "ft-chains %s: %s\n", argv[1], err.data ? err.data : "failed");
    hp_buf_release(&err);
    return r < 0;
}
