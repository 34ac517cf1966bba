/* A node's stored snapshots for leaks as runs of values (stored.h).
 *
 * No profile is loaded. A node's snapshots come as stack series (store.h):
 * per stored stack, the runs of snapshots over which its raw values hold
 * still; closed groups from their stack_series rows, the other snapshots
 * from their sample sets through the same builder. Per stretch of
 * snapshots sharing a layout (a process's lifetime, usually) the distinct
 * stacks are resolved once, in the order the snapshots first list them,
 * and folded into a dictionary (store_stacks_load, query_fold_map). Each
 * run is un-sampled once; stacks folded into one entry are summed place by
 * place in sample order, as query_fold sums them. The answer is the folded
 * path's, bit for bit (tests/query/test-stored.c compares them).
 *
 * Over a fleet, a worker's stack cache (stored.h) keeps each stack's names
 * by function from one node to the next: nodes on one build share their
 * stored stacks, so a stack is resolved once a build and each node reads
 * its node's view (and resolves) only for the stacks it has not seen. */
#include "query/stored.h"
#include "query/query.h"
#include "store/store.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* What one node's snapshots are read into; released in one call. */
struct query_stored {
    struct hp_arena arena;
    /* leaks: the node's series and what it points into */
    struct query_leak_series series;
    struct query_folded **dicts;
    size_t ndicts, dicts_cap;
    struct query_leak_run *runs;
    size_t nruns, runs_cap;
    struct store_sseries *parts; /* spans' series, and stretches built here */
    size_t nparts, parts_cap;
    size_t from_series, from_samples; /* snapshots read each way */
    /* trend (query_stored_trend_functions): the chosen functions' names
     * and values, nfunctions per snapshot. */
    const char **trend_names;
    double *trend_values;
};

static void stored_release(struct query_stored *nd)
{
    for (size_t i = 0; i < nd->ndicts; i++)
        query_folded_free(nd->dicts[i]);
    free(nd->dicts);
    free(nd->runs);
    for (size_t i = 0; i < nd->nparts; i++)
        store_sseries_release(&nd->parts[i]);
    free(nd->parts);
    free(nd->trend_names);
    free(nd->trend_values);
    hp_arena_release(&nd->arena);
}

/* Snapshots t0 .. t0 + (m1 - m0) - 1 of leaks' order, read from members
 * m0 .. m1 - 1 of one chunk. */
struct piece {
    const struct store_ss_chunk *c;
    uint32_t m0, m1, t0;
};

/* The reader's state for one node. */
struct rd {
    struct store *st;
    const struct query_opts *o;
    struct query_stored *nd;
    struct query_snapshot *group;
    size_t g;
    size_t *ord;          /* t -> group index */
    struct hp_map64 t_of; /* snapshot id -> t */
    struct piece *pieces; /* ascending t0, covering every t once */
    size_t npieces, pieces_cap;
    const struct store_ss_member **mem; /* per t: its member; NULL: not read yet */
    bool no_series; /* every snapshot from its sample set */
    /* Per layout stretch: its stacks (stored id -> local index, in order
     * of first use), the entry each went to. */
    struct hp_map64 local;
    struct lstack {
        int64_t stack;
        uint32_t t, slot; /* first use: place, then slot in that chunk */
    } *ls;
    size_t nls, ls_cap;
    /* ls is in the order stacks were met; perm: its place -> the stack's
     * local index (order of first use). */
    uint32_t *perm;
    size_t perm_cap;
    /* Per piece of the stretch (from its first piece on), per slot of its
     * chunk: the stack's place in ls, NONE_LS where the slot has no run in
     * the piece; slot_at[p - p0] is where piece p's begin. */
    uint32_t *slot_ls;
    size_t slot_ls_cap;
    size_t *slot_at;
    size_t slot_at_cap;
};

#define NONE_LS UINT32_MAX

static struct store_sseries *part_new(struct query_stored *nd)
{
    nd->parts = hp_xgrow(nd->parts, &nd->parts_cap, nd->nparts + 1, sizeof(*nd->parts));
    struct store_sseries *p = &nd->parts[nd->nparts++];
    memset(p, 0, sizeof(*p));
    return p;
}

static void piece_add(struct rd *r, const struct store_ss_chunk *c, uint32_t m0, uint32_t m1,
                      uint32_t t0)
{
    r->pieces = hp_xgrow(r->pieces, &r->pieces_cap, r->npieces + 1, sizeof(*r->pieces));
    r->pieces[r->npieces++] = (struct piece){ c, m0, m1, t0 };
    for (uint32_t m = m0; m < m1; m++)
        r->mem[t0 + m - m0] = &c->members[m];
}

/* The span's series serves the snapshots read here when its members there
 * are exactly the snapshots read with ids in the span, and they are one
 * stretch of members at consecutive places of leaks' order (a snapshot
 * imported late, out of time order, breaks that: the span is then read
 * from its sample sets, as is a series that does not decode). */
static int span_use(struct rd *r, int64_t node_id, const struct store_span *sp,
                    const int64_t *ids, struct hp_buf *err)
{
    /* Snapshot ids are positive: compared as unsigned. */
    if (sp->first_id <= 0 || sp->last_id < sp->first_id)
        return 0;
    size_t inside = hp_search_le_u64(ids, r->g, sizeof(*ids), 0, (uint64_t)sp->last_id) -
                    hp_search_le_u64(ids, r->g, sizeof(*ids), 0, (uint64_t)sp->first_id - 1);
    if (!inside)
        return 0;
    struct store_sseries ss;
    struct hp_buf e = HP_BUF_INIT(0);
    int rc = store_sseries_get(r->st, node_id, sp->first_id, &ss, &e);
    if (rc == HP_ENOTFOUND || rc == HP_ECORRUPT) {
        hp_buf_release(&e);
        return 0;
    }
    if (rc < 0) {
        hp_err_printf(err, "%.*s", (int)e.len, e.data ? e.data : "");
        hp_buf_release(&e);
        return rc;
    }
    hp_buf_release(&e);
    /* Members read here: one stretch, consecutive in t, all of `inside`. */
    size_t found = 0;
    bool ok = true, started = false, ended = false;
    uint32_t tnext = 0;
    for (size_t c = 0; c < ss.nchunks && ok; c++)
        for (size_t m = 0; m < ss.chunks[c].nmembers && ok; m++) {
            uint32_t t;
            bool in = hp_map64_get(&r->t_of, (uint64_t)ss.chunks[c].members[m].snapshot_id, &t);
            if (!in) {
                ended = started;
                continue;
            }
            ok = !ended && (!started || t == tnext) && !r->mem[t];
            started = true;
            tnext = t + 1;
            found++;
        }
    if (!ok || found != inside || r->no_series) {
        store_sseries_release(&ss);
        return 0;
    }
    r->nd->from_series += found;
    struct store_sseries *keep = part_new(r->nd);
    *keep = ss;
    for (size_t c = 0; c < keep->nchunks; c++) {
        const struct store_ss_chunk *k = &keep->chunks[c];
        uint32_t m0 = 0, t0 = 0;
        bool open = false;
        for (uint32_t m = 0; m <= k->nmembers; m++) {
            uint32_t t;
            bool in = m < k->nmembers &&
                      hp_map64_get(&r->t_of, (uint64_t)k->members[m].snapshot_id, &t);
            if (in && !open) {
                open = true;
                m0 = m;
                t0 = t;
            } else if (!in && open) {
                piece_add(r, k, m0, m, t0);
                open = false;
            }
        }
    }
    return 0;
}

static int ssb_cb(const struct store_samples *ss, void *ctx)
{
    store_ssb_add(ctx, ss);
    return 0;
}

/* Snapshots no span serves, read from their sample sets into series of
 * their own: one per stretch of consecutive places. */
static int stretches_read(struct rd *r, struct hp_buf *err)
{
    int64_t *ids = hp_xmalloc((r->g + 1) * sizeof(*ids));
    int rc = 0;
    for (size_t a = 0, b; rc == 0 && a < r->g; a = b) {
        if (r->mem[a]) {
            b = a + 1;
            continue;
        }
        for (b = a; b < r->g && !r->mem[b]; b++)
            ids[b - a] = r->group[r->ord[b]].id;
        struct store_sseries *ss = part_new(r->nd);
        struct store_ssb *sb = store_ssb_new(ss);
        rc = store_snapshots_samples(r->st, ids, b - a, ssb_cb, sb, err);
        store_ssb_finish(sb);
        r->nd->from_samples += b - a;
        uint32_t t = (uint32_t)a;
        for (size_t c = 0; rc == 0 && c < ss->nchunks; c++) {
            piece_add(r, &ss->chunks[c], 0, (uint32_t)ss->chunks[c].nmembers, t);
            t += (uint32_t)ss->chunks[c].nmembers;
        }
    }
    free(ids);
    return rc;
}

static int piece_cmp(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* The distinct stacks of pieces p0 .. p1 - 1 (one layout) in order of
 * first use: place, then sample order there (a stack's first slot with a
 * run there). Each slot's stack is looked up once, here: piece_runs reads
 * the answer from slot_ls. */
static void layout_stacks(struct rd *r, size_t p0, size_t p1)
{
    hp_map64_release(&r->local);
    hp_map64_init(&r->local);
    r->nls = 0;
    size_t nslots = 0;
    r->slot_at = hp_xgrow(r->slot_at, &r->slot_at_cap, p1 - p0 + 1, sizeof(*r->slot_at));
    for (size_t p = p0; p < p1; p++) {
        r->slot_at[p - p0] = nslots;
        nslots += r->pieces[p].c->nslots;
    }
    /* At most every slot's a stack of its own: sized once (grown from the
     * first piece's slots, its rehashes were a fiftieth of leaks). */
    hp_map64_reserve(&r->local, nslots);
    r->slot_ls = hp_xgrow(r->slot_ls, &r->slot_ls_cap, nslots + 1, sizeof(*r->slot_ls));
    for (size_t p = p0; p < p1; p++) {
        const struct piece *pc = &r->pieces[p];
        const struct store_ss_chunk *c = pc->c;
        uint32_t *at = r->slot_ls + r->slot_at[p - p0];
        for (uint32_t s = 0; s < c->nslots; s++) {
            const struct store_ss_slot *sl = &c->slots[s];
            uint32_t first = UINT32_MAX;
            for (uint32_t j = 0; j < sl->nruns && first == UINT32_MAX; j++) {
                const struct store_ss_run *x = &c->runs[sl->run + j];
                uint32_t lo = HP_MAX(x->first, pc->m0), hi = HP_MIN(x->first + x->n, pc->m1);
                if (lo < hi)
                    first = pc->t0 + (lo - pc->m0);
            }
            at[s] = NONE_LS;
            if (first == UINT32_MAX)
                continue;
            uint32_t k;
            if (hp_map64_put(&r->local, (uint64_t)sl->stack, (uint32_t)r->nls, &k) == 0) {
                r->ls = hp_xgrow(r->ls, &r->ls_cap, r->nls + 1, sizeof(*r->ls));
                r->ls[r->nls++] = (struct lstack){ sl->stack, first, s };
            } else if (first < r->ls[k].t || (first == r->ls[k].t && s < r->ls[k].slot)) {
                r->ls[k].t = first;
                r->ls[k].slot = s;
            }
            at[s] = k;
        }
    }
    /* Numbered by (place, slot): radix sorted, the two halves of one key. */
    struct hp_sort_item *v = hp_xmalloc((r->nls + 1) * sizeof(*v));
    for (size_t i = 0; i < r->nls; i++)
        v[i] = (struct hp_sort_item){ (uint64_t)r->ls[i].t << 32 | r->ls[i].slot, i };
    hp_radix_sort(v, r->nls);
    r->perm = hp_xgrow(r->perm, &r->perm_cap, r->nls + 1, sizeof(*r->perm));
    for (size_t i = 0; i < r->nls; i++)
        r->perm[v[i].i] = (uint32_t)i;
    free(v);
}

/* A run of entry `entry` of the current dictionary; last: per entry, its
 * newest run (UINT32_MAX: none), which a run that goes on from it with the
 * same value and variance extends (a stack's run cut where a group of the
 * stack series ends). */
static inline void run_emit(struct query_stored *nd, uint32_t *last, uint32_t dict,
                            uint32_t entry, uint32_t t, uint32_t n, double value, double var)
{
    if (!n || value == 0)
        return; /* absent */
    uint32_t k = last[entry];
    if (k != UINT32_MAX) {
        struct query_leak_run *x = &nd->runs[k];
        if (x->t + x->n == t && x->value == value && x->var == var) {
            x->n += n;
            return;
        }
    }
    nd->runs = hp_xgrow(nd->runs, &nd->runs_cap, nd->nruns + 1, sizeof(*nd->runs));
    last[entry] = (uint32_t)nd->nruns;
    nd->runs[nd->nruns++] = (struct query_leak_run){ dict, entry, t, n, value, var };
}

/* One slot's run, clipped to places [lo, hi), as values. */
struct vrun {
    uint32_t t0, t1;
    double value, var;
};

/* Scratch of piece_runs, kept across calls. */
struct pr_scratch {
    uint32_t *e_of, *count, *off, *order;
    size_t e_cap, n_cap, o_cap, ord_cap;
    struct vrun *v;
    size_t v_cap;
    uint32_t *vstart, *cur, *bounds;
    size_t vs_cap, cur_cap, b_cap;
    uint32_t *same_to; /* per member of the piece: where its period and scaling end */
    size_t st_cap;
    uint32_t *last; /* per entry of the dictionary: its newest run (run_emit) */
    size_t last_cap;
    /* What query_sample_one reads of a profile (scaling, period): set per
     * member; a struct profile zeroed per slot was a sixth of slot_values. */
    struct profile pp;
    /* Values of raw pairs un-sampled lately (a stack's run goes on in the
     * next group of the stack series with the same raw values). */
    struct memo {
        int64_t c, b;
        uint64_t period;
        uint32_t scaling;
        bool used;
        double value, var;
    } memo[1024];
};

/* Where slot_values puts its runs: an entry's own (the slot is the only
 * one folded into it), or ps->v for summing with others. */
struct emit_to {
    struct query_stored *nd;
    uint32_t dict, entry;
};

/* Slot x's runs within members [mlo, mhi) as values: cut where the
 * members' period or scaling changes; emitted as the entry's runs with
 * `to`, else into ps->v from *n on. */
static void slot_values(const struct piece *pc, const struct store_ss_slot *sl, uint32_t mlo,
                        uint32_t mhi, enum profile_value v, struct pr_scratch *ps,
                        const struct emit_to *to, size_t *n)
{
    const struct store_ss_chunk *c = pc->c;
    struct profile *pp = &ps->pp;
    for (uint32_t j = 0; j < sl->nruns; j++) {
        const struct store_ss_run *x = &c->runs[sl->run + j];
        uint32_t lo = HP_MAX(x->first, mlo), hi = HP_MIN(x->first + x->n, mhi);
        for (uint32_t m = lo, z; m < hi; m = z) {
            const struct store_ss_member *a = &c->members[m];
            z = HP_MIN(ps->same_to[m - pc->m0], hi);
            int pair = (int)v & ~1;
            int64_t rc = x->raw[pair], rb = x->raw[pair + 1];
            struct memo *mo = &ps->memo[hp_hash_u64((uint64_t)rc * 0x9e3779b97f4a7c15u ^
                                                    (uint64_t)rb ^ a->period) %
                                        HP_ARRAY_SIZE(ps->memo)];
            if (!mo->used || mo->c != rc || mo->b != rb || mo->period != a->period ||
                mo->scaling != a->scaling) {
                pp->scaling = (enum profile_scaling)a->scaling;
                pp->period = a->period;
                *mo = (struct memo){ rc, rb, a->period, a->scaling, true, 0, 0 };
                query_sample_one(pp, x->raw, v, &mo->value, &mo->var);
            }
            double val = mo->value, var = mo->var;
            if (to) {
                run_emit(to->nd, ps->last, to->dict, to->entry, pc->t0 + (m - pc->m0), z - m,
                         val, var);
                continue;
            }
            ps->v = hp_xgrow(ps->v, &ps->v_cap, *n + 1, sizeof(*ps->v));
            ps->v[(*n)++] = (struct vrun){ pc->t0 + (m - pc->m0), pc->t0 + (z - pc->m0), val,
                                           var };
        }
    }
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Piece pc's runs into dictionary `dict` (nentries entries; entry_of: per
 * local stack its entry, or -1 where the options drop it): per entry, the
 * values of the slots folded into it, summed place by place in slot order,
 * which is each member's sample order (query_fold's order). */
static void piece_runs(struct rd *r, const struct piece *pc, const uint32_t *slot_ls,
                       uint32_t dict, size_t nentries, const int32_t *entry_of,
                       enum profile_value v, struct pr_scratch *ps)
{
    const struct store_ss_chunk *c = pc->c;
    struct query_stored *nd = r->nd;
    size_t nm = pc->m1 - pc->m0;
    ps->same_to = hp_xgrow(ps->same_to, &ps->st_cap, nm + 1, sizeof(*ps->same_to));
    for (size_t k = nm; k-- > 0;) {
        const struct store_ss_member *a = &c->members[pc->m0 + k], *b = a + 1;
        ps->same_to[k] = k + 1 < nm && a->period == b->period && a->scaling == b->scaling
                             ? ps->same_to[k + 1]
                             : pc->m0 + (uint32_t)k + 1;
    }
    ps->e_of = hp_xgrow(ps->e_of, &ps->e_cap, c->nslots + 1, sizeof(*ps->e_of));
    ps->count = hp_xgrow(ps->count, &ps->n_cap, nentries + 1, sizeof(*ps->count));
    ps->off = hp_xrealloc(ps->off, (ps->n_cap + 1) * sizeof(*ps->off));
    memset(ps->count, 0, (nentries + 1) * sizeof(*ps->count));
    size_t nkept = 0;
    for (uint32_t s = 0; s < c->nslots; s++) {
        /* A slot with no run in the piece: its stack's, if the stretch has
         * it (it adds nothing, as in the folded profiles). */
        uint32_t k = slot_ls[s];
        ps->e_of[s] = UINT32_MAX;
        if (k == NONE_LS && !hp_map64_get(&r->local, (uint64_t)c->slots[s].stack, &k))
            continue;
        k = r->perm[k];
        if (entry_of[k] < 0)
            continue;
        ps->e_of[s] = (uint32_t)entry_of[k];
        ps->count[ps->e_of[s]]++;
        nkept++;
    }
    /* Slots by entry, each entry's in slot order. */
    uint32_t off = 0;
    for (size_t e = 0; e < nentries; e++) {
        ps->off[e] = off;
        off += ps->count[e];
    }
    ps->order = hp_xgrow(ps->order, &ps->ord_cap, nkept + 1, sizeof(*ps->order));
    for (uint32_t s = 0; s < c->nslots; s++)
        if (ps->e_of[s] != UINT32_MAX)
            ps->order[ps->off[ps->e_of[s]]++] = s;
    for (size_t e = 0, i = 0; e < nentries; e++) {
        size_t k0 = i, k1 = i + ps->count[e];
        i = k1;
        if (k0 == k1)
            continue;
        size_t n = 0;
        if (k1 - k0 == 1) {
            const struct emit_to to = { nd, dict, (uint32_t)e };
            slot_values(pc, &c->slots[ps->order[k0]], pc->m0, pc->m1, v, ps, &to, &n);
            continue;
        }
        /* Several slots: over each stretch between two run edges, the
         * slots present there summed in slot order. */
        size_t ns = k1 - k0, nb = 0;
        ps->vstart = hp_xgrow(ps->vstart, &ps->vs_cap, ns + 1, sizeof(*ps->vstart));
        ps->cur = hp_xgrow(ps->cur, &ps->cur_cap, ns + 1, sizeof(*ps->cur));
        for (size_t k = 0; k < ns; k++) {
            ps->vstart[k] = (uint32_t)n;
            slot_values(pc, &c->slots[ps->order[k0 + k]], pc->m0, pc->m1, v, ps, NULL, &n);
        }
        ps->vstart[ns] = (uint32_t)n;
        ps->bounds = hp_xgrow(ps->bounds, &ps->b_cap, 2 * n + 1, sizeof(*ps->bounds));
        for (size_t j = 0; j < n; j++) {
            ps->bounds[nb++] = ps->v[j].t0;
            ps->bounds[nb++] = ps->v[j].t1;
        }
        hp_qsort(ps->bounds, nb, sizeof(*ps->bounds), u32_cmp);
        for (size_t k = 0; k < ns; k++)
            ps->cur[k] = ps->vstart[k];
        for (size_t b = 0; b + 1 < nb; b++) {
            uint32_t t0 = ps->bounds[b], t1 = ps->bounds[b + 1];
            if (t0 == t1)
                continue;
            double sv = 0, svar = 0;
            bool any = false;
            for (size_t k = 0; k < ns; k++) {
                while (ps->cur[k] < ps->vstart[k + 1] && ps->v[ps->cur[k]].t1 <= t0)
                    ps->cur[k]++;
                if (ps->cur[k] < ps->vstart[k + 1] && ps->v[ps->cur[k]].t0 <= t0) {
                    /* what 0 += v, then += each, gives, as query_fold adds */
                    sv = any ? sv + ps->v[ps->cur[k]].value : 0.0 + ps->v[ps->cur[k]].value;
                    svar = any ? svar + ps->v[ps->cur[k]].var : 0.0 + ps->v[ps->cur[k]].var;
                    any = true;
                }
            }
            if (any)
                run_emit(nd, ps->last, dict, (uint32_t)e, t0, t1 - t0, sv, svar);
        }
    }
}

static void pr_scratch_release(struct pr_scratch *ps)
{
    free(ps->e_of);
    free(ps->count);
    free(ps->off);
    free(ps->order);
    free(ps->v);
    free(ps->vstart);
    free(ps->cur);
    free(ps->bounds);
    free(ps->same_to);
    free(ps->last);
}

/* ---- the stack cache (stored.h) ---- */

struct query_stack_cache {
    struct hp_arena arena;
    struct hp_strtab names;
    struct hp_map64 at; /* stored stack id -> its number here */
    /* Stack k's names by function (numbers in `names`), outermost first,
     * allocator frames trimmed as keep_allocator says: ids[off[k] ..
     * off[k + 1]). */
    uint32_t *off, *ids;
    size_t n, off_cap, nids, ids_cap;
    int keep_allocator; /* -1 until the first node */
    size_t lookups, hits, nodes;
    bool gave_up;
};

/* When to give up (stored.h): after this many nodes, if fewer than one
 * stack in ten was found; and never more names than this (64 MiB). */
#define SCACHE_TRY_NODES 4
#define SCACHE_MAX_IDS (UINT32_C(16) << 20)

struct query_stack_cache *query_stack_cache_new(void)
{
    struct query_stack_cache *c = hp_xcalloc(1, sizeof(*c));
    hp_arena_init(&c->arena);
    hp_strtab_init(&c->names, &c->arena);
    hp_map64_init(&c->at);
    c->keep_allocator = -1;
    c->off = hp_xgrow(c->off, &c->off_cap, 1, sizeof(*c->off));
    c->off[0] = 0;
    return c;
}

static void scache_drop(struct query_stack_cache *c)
{
    hp_map64_release(&c->at);
    hp_strtab_release(&c->names);
    hp_arena_release(&c->arena);
    free(c->off);
    free(c->ids);
    c->off = c->ids = NULL;
}

void query_stack_cache_free(struct query_stack_cache *c)
{
    if (!c)
        return;
    if (!c->gave_up)
        scache_drop(c);
    free(c);
}

void query_stack_cache_counts(const struct query_stack_cache *c, size_t *ret_lookups,
                              size_t *ret_hits, bool *ret_gave_up)
{
    *ret_lookups = c->lookups;
    *ret_hits = c->hits;
    *ret_gave_up = c->gave_up;
}

/* A node read: give up if the fleet shares no stacks (stored.h). */
static void scache_node_done(struct query_stack_cache *c)
{
    if (c->gave_up || ++c->nodes < SCACHE_TRY_NODES || c->hits * 10 >= c->lookups)
        return;
    scache_drop(c);
    c->gave_up = true;
}

/* Node node_id's stack view, read the first time it is wanted (never
 * with no_series: every snapshot from its sample set). */
struct lazy_view {
    int64_t node_id;
    bool no_series;
    struct store_stack_view v;
    bool tried, have;
};

static int view_want(struct store *st, struct lazy_view *lv, struct hp_buf *err)
{
    if (lv->tried || lv->node_id <= 0 || lv->no_series)
        return 0;
    lv->tried = true;
    int v = store_stack_view_get(st, lv->node_id, &lv->v, err);
    if (v < 0 && v != HP_ENOTFOUND)
        return v;
    lv->have = v == 0;
    return 0;
}

/* Stacks sids[0..n) of snapshot `at` folded by function (as
 * query_fold_map_resolved folds them) through cache c: those it holds are
 * not resolved again; the others are resolved (the view read then), kept
 * where they can be, and folded with the rest. */
static int fold_via_cache(struct store *st, int64_t at, const int64_t *sids, size_t n,
                          const struct query_opts *o,
                          enum profile_scaling scaling, uint64_t period, struct lazy_view *lv,
                          struct query_stack_cache *c, struct query_folded **ret_dict,
                          int32_t **ret_entry_of, struct hp_buf *err)
{
    uint32_t *k_of = hp_xmalloc((n + 1) * sizeof(*k_of));
    int64_t *miss = hp_xmalloc((n + 1) * sizeof(*miss));
    uint32_t *miss_at = hp_xmalloc((n + 1) * sizeof(*miss_at));
    size_t nmiss = 0;
    for (size_t i = 0; i < n; i++)
        if (!hp_map64_get(&c->at, (uint64_t)sids[i], &k_of[i])) {
            k_of[i] = UINT32_MAX;
            miss_at[nmiss] = (uint32_t)i;
            miss[nmiss++] = sids[i];
        }
    c->lookups += n;
    c->hits += n - nmiss;
    /* The rest resolved; each one's names (per location, numbered once)
     * kept in c, or in own[] when a frame is labelled by its address. */
    struct profile_resolved *res = NULL;
    uint32_t *own = NULL, *own_off = NULL, *own_len = NULL, *loc_first = NULL, *loc_ids = NULL;
    size_t nown = 0, own_cap = 0, nloc_ids = 0, loc_ids_cap = 0;
    int rc = 0;
    if (nmiss && (rc = view_want(st, lv, err)) == 0)
        rc = store_stacks_resolve(st, at, miss, nmiss, 0, lv->have ? &lv->v : NULL, &res, err);
    if (rc == 0 && nmiss) {
        own_off = hp_xmalloc((nmiss + 1) * sizeof(*own_off));
        own_len = hp_xmalloc((nmiss + 1) * sizeof(*own_len));
        loc_first = hp_xcalloc(res->nlocs + 1, sizeof(*loc_first));
        for (size_t j = 0; j < nmiss; j++) {
            const uint32_t *locs = res->locs + res->stack_off[j];
            uint32_t nl = res->stack_off[j + 1] - res->stack_off[j];
            uint32_t first = query_resolved_first_kept(res, j, o->keep_allocator);
            bool keep = c->nids < SCACHE_MAX_IDS;
            size_t at0 = nown;
            for (uint32_t k = nl; k-- > first;) {
                const struct profile_rloc *l = &res->loc[locs[k]];
                if (!loc_first[locs[k]]) {
                    loc_ids = hp_xgrow(loc_ids, &loc_ids_cap, nloc_ids + l->nnames + 1,
                                       sizeof(*loc_ids));
                    loc_first[locs[k]] = (uint32_t)nloc_ids + 1;
                    for (uint32_t q = 0; q < l->nnames; q++) {
                        const struct profile_rname *nm = &res->names[l->name_off + q];
                        loc_ids[nloc_ids++] = hp_strtab_id(
                            &c->names, hp_strtab_intern(&c->names, nm->s, nm->len));
                    }
                }
                keep = keep && !l->by_address;
                own = hp_xgrow(own, &own_cap, nown + l->nnames + 1, sizeof(*own));
                memcpy(own + nown, loc_ids + loc_first[locs[k]] - 1, l->nnames * sizeof(*own));
                nown += l->nnames;
            }
            own_off[j] = (uint32_t)at0;
            own_len[j] = (uint32_t)(nown - at0);
            if (!keep)
                continue;
            /* Kept: its names move to c (own[] keeps the ones that stay). */
            size_t len = nown - at0;
            c->ids = hp_xgrow(c->ids, &c->ids_cap, c->nids + len + 1, sizeof(*c->ids));
            memcpy(c->ids + c->nids, own + at0, len * sizeof(*own));
            c->nids += len;
            c->off = hp_xgrow(c->off, &c->off_cap, c->n + 2, sizeof(*c->off));
            c->off[++c->n] = (uint32_t)c->nids;
            uint32_t old;
            (void)hp_map64_put(&c->at, (uint64_t)miss[j], (uint32_t)(c->n - 1), &old);
            k_of[miss_at[j]] = (uint32_t)(c->n - 1);
            nown = at0;
        }
    }
    if (rc == 0) {
        const uint32_t **seq = hp_xmalloc((n + 1) * sizeof(*seq));
        uint32_t *len = hp_xmalloc((n + 1) * sizeof(*len));
        for (size_t i = 0, j = 0; i < n; i++) {
            bool missed = j < nmiss && miss_at[j] == i;
            if (k_of[i] != UINT32_MAX) {
                seq[i] = c->ids + c->off[k_of[i]];
                len[i] = c->off[k_of[i] + 1] - c->off[k_of[i]];
            } else { /* not kept */
                seq[i] = own + own_off[j];
                len[i] = own_len[j];
            }
            j += missed;
        }
        rc = query_fold_map_ids(&c->names, seq, len, n, scaling, period, ret_dict,
                                ret_entry_of);
        free(seq);
        free(len);
    }
    profile_resolved_free(res);
    free(k_of);
    free(miss);
    free(miss_at);
    free(own);
    free(own_off);
    free(own_len);
    free(loc_first);
    free(loc_ids);
    return rc;
}

static int time_cmp(const void *a, const void *b, void *ctx)
{
    const struct query_snapshot *g = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (g[x].time_s != g[y].time_s)
        return g[x].time_s < g[y].time_s ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Read one node's stored snapshots (group) for leaks as a series: closed
 * spans from their stack series, the rest from their sample sets; per
 * stretch of one layout (a process's lifetime, usually: a restart maps the
 * binaries elsewhere) the distinct stacks resolved and folded once into a
 * dictionary, in the order the folded profiles would show them. */
int query_stored_fill(struct store *st, const struct query_opts *o,
                      struct query_snapshot *group, size_t g, unsigned flags,
                      struct query_stack_cache *cache, struct query_stored **ret,
                      struct hp_buf *err)
{
    struct query_stored *nd = hp_xcalloc(1, sizeof(*nd));
    hp_arena_init(&nd->arena);
    struct rd r = { .st = st, .o = o, .nd = nd, .group = group, .g = g,
                    .no_series = flags & QUERY_STORED_SAMPLE_SETS };
    hp_map64_init(&r.t_of);
    hp_map64_init(&r.local);
    r.ord = hp_xmalloc((g + 1) * sizeof(*r.ord));
    r.mem = hp_xcalloc(g + 1, sizeof(*r.mem));
    int64_t *ids = hp_xmalloc((g + 1) * sizeof(*ids));
    struct store_span *spans = NULL;
    size_t nspans = 0;
    int rc = 0;
    for (size_t t = 0; t < g; t++)
        r.ord[t] = t;
    if (g > 1)
        qsort_r(r.ord, g, sizeof(*r.ord), time_cmp, group);
    for (size_t t = 0; t < g; t++) {
        uint32_t old;
        ids[t] = group[r.ord[t]].id;
        (void)hp_map64_put(&r.t_of, (uint64_t)ids[t], (uint32_t)t, &old);
    }
    hp_qsort(ids, g, sizeof(*ids), hp_cmp_i64);
    int64_t node_id = 0;
    if (g && (rc = store_node_find(st, group[0].node, &node_id, err)) == 0)
        rc = store_sseries_spans(st, node_id, &spans, &nspans, err);
    if (rc == HP_ENOTFOUND)
        rc = 0; /* files, or no such node: every snapshot from its sample set */
    for (size_t i = 0; rc == 0 && i < nspans; i++)
        rc = span_use(&r, node_id, &spans[i], ids, err);
    if (rc == 0)
        rc = stretches_read(&r, err);
    /* The node's stack view: the rows that resolve the stacks of its newest
     * closed spans, in one read (store_stacks_load takes what it holds),
     * when a stack is to be resolved. */
    struct lazy_view lv = { .node_id = node_id, .no_series = r.no_series };
    if (cache && !cache->gave_up && cache->keep_allocator < 0)
        cache->keep_allocator = o->keep_allocator;
    bool cached = cache && !cache->gave_up && cache->keep_allocator == o->keep_allocator &&
                  query_fold_resolved_ok(o);
    if (rc == 0)
        hp_qsort(r.pieces, r.npieces, sizeof(*r.pieces), piece_cmp);
    /* Pieces cut where the layout changes, then per stretch of one layout
     * a dictionary and the runs into it. */
    size_t np0 = r.npieces;
    for (size_t i = 0; rc == 0 && i < r.npieces; i++) {
        struct piece pc = r.pieces[i];
        for (uint32_t m = pc.m0 + 1; m < pc.m1; m++)
            if (pc.c->members[m].layout != pc.c->members[m - 1].layout) {
                r.pieces[i].m1 = m; /* this one ends here; the rest is a new piece */
                piece_add(&r, pc.c, m, pc.m1, pc.t0 + (m - pc.m0));
                break;
            }
    }
    if (rc == 0 && r.npieces > np0)
        hp_qsort(r.pieces, r.npieces, sizeof(*r.pieces), piece_cmp);
    /* Room for as many runs as the pieces store: folded stacks and runs
     * that go on across groups make fewer, so the array rarely grows
     * (growing it by copies was a twentieth of leaks over a store). */
    size_t stored_runs = 0;
    for (size_t i = 0; rc == 0 && i < r.npieces; i++)
        stored_runs += r.pieces[i].c->nruns;
    nd->runs = hp_xgrow(nd->runs, &nd->runs_cap, stored_runs + 1, sizeof(*nd->runs));
    struct pr_scratch ps = { 0 };
    for (size_t pa = 0, pb; rc == 0 && pa < r.npieces; pa = pb) {
        const struct piece *first = &r.pieces[pa];
        uint64_t layout = first->c->members[first->m0].layout;
        for (pb = pa + 1; pb < r.npieces &&
                          r.pieces[pb].c->members[r.pieces[pb].m0].layout == layout;
             pb++)
            ;
        layout_stacks(&r, pa, pb);
        int64_t *sids = hp_xmalloc((r.nls + 1) * sizeof(*sids));
        for (size_t i = 0; i < r.nls; i++)
            sids[r.perm[i]] = r.ls[i].stack;
        struct query_folded *dict = NULL;
        int32_t *entry_of = NULL;
        int64_t at = group[r.ord[first->t0]].id;
        if (cached) {
            const struct store_ss_member *m0 = &first->c->members[first->m0];
            rc = fold_via_cache(st, at, sids, r.nls, o, (enum profile_scaling)m0->scaling,
                                m0->period, &lv, cache, &dict, &entry_of, err);
        } else if (query_fold_resolved_ok(o)) {
            /* By function: what folding reads of the stacks, straight from
             * the view where it holds them (building a profile of them all
             * and folding it was a third of leaks over a store). */
            struct profile_resolved *res = NULL;
            if ((rc = view_want(st, &lv, err)) == 0)
                rc = store_stacks_resolve(st, at, sids, r.nls, 0, lv.have ? &lv.v : NULL, &res,
                                          err);
            if (rc == 0)
                rc = query_fold_map_resolved(res, o, &dict, &entry_of, err);
            profile_resolved_free(res);
        } else {
            /* By function and line (file names only then), or filtered. */
            struct profile *p = NULL;
            if ((rc = view_want(st, &lv, err)) == 0)
                rc = store_stacks_load(st, at, sids, r.nls,
                                       o->with_lines ? 0 : STORE_STACKS_NO_FILES,
                                       lv.have ? &lv.v : NULL, &p, err);
            if (rc == 0)
                rc = query_fold_map(p, o, &dict, &entry_of, err);
            profile_free(p);
        }
        free(sids);
        if (rc == 0) {
            nd->dicts = hp_xgrow(nd->dicts, &nd->dicts_cap, nd->ndicts + 1, sizeof(*nd->dicts));
            nd->dicts[nd->ndicts++] = dict;
            ps.last = hp_xgrow(ps.last, &ps.last_cap, dict->nentries + 1, sizeof(*ps.last));
            memset(ps.last, 0xff, (dict->nentries + 1) * sizeof(*ps.last));
            for (size_t i = pa; i < pb; i++)
                piece_runs(&r, &r.pieces[i], r.slot_ls + r.slot_at[i - pa],
                           (uint32_t)(nd->ndicts - 1), dict->nentries, entry_of, o->sample,
                           &ps);
        }
        free(entry_of);
    }
    pr_scratch_release(&ps);
    store_stack_view_release(&lv.v);
    if (cached && rc == 0)
        scache_node_done(cache);
    if (rc == 0) {
        nd->series = (struct query_leak_series){ (const struct query_folded *const *)nd->dicts,
                                                 nd->ndicts, nd->runs, nd->nruns, g };
        for (size_t t = 0; t < g; t++) {
            struct query_snapshot *q = &group[r.ord[t]];
            q->series = &nd->series;
            q->series_t = (uint32_t)t;
            q->id_period = r.mem[t] ? r.mem[t]->period : 0;
        }
    }
    free(spans);
    free(ids);
    free(r.ord);
    free(r.mem);
    free(r.pieces);
    free(r.ls);
    free(r.perm);
    free(r.slot_ls);
    free(r.slot_at);
    hp_map64_release(&r.t_of);
    hp_map64_release(&r.local);
    if (rc < 0) {
        query_stored_free(nd);
        return rc;
    }
    *ret = nd;
    return 0;
}

void query_stored_counts(const struct query_stored *qs, size_t *ret_series,
                         size_t *ret_samples)
{
    *ret_series = qs ? qs->from_series : 0;
    *ret_samples = qs ? qs->from_samples : 0;
}

void query_stored_free(struct query_stored *nd)
{
    if (!nd)
        return;
    stored_release(nd);
    free(nd);
}

/* ---- trend's function columns from the store's function totals ---- */

bool query_stored_trend_ok(const struct query_opts *o)
{
    return (o->sample == PV_INUSE_SPACE || o->sample == PV_INUSE_OBJECTS) && !o->no_inline &&
           !o->keep_allocator && !o->with_lines && !(o->focus && *o->focus) &&
           !(o->ignore && *o->ignore);
}

/* A candidate function and what ranks it. */
struct tcand {
    int64_t id;
    const char *name; /* in the arena */
    double key;
};

struct tpick {
    struct hp_arena *arena;
    regex_t *re;
    enum profile_value v;
    struct hp_map64 of; /* function id -> index in c */
    struct tcand *c;
    size_t n, cap;
};

static struct tcand *tcand_get(struct tpick *tp, int64_t id, const char *name)
{
    uint32_t k;
    if (hp_map64_put(&tp->of, (uint64_t)id, (uint32_t)tp->n, &k) == 0) {
        tp->c = hp_xgrow(tp->c, &tp->cap, tp->n + 1, sizeof(*tp->c));
        tp->c[tp->n++] = (struct tcand){ id, hp_arena_strdup(tp->arena, name), 0 };
    }
    return &tp->c[k];
}

static int match_cb(int64_t id, const char *name, void *ctx)
{
    struct tpick *tp = ctx;
    if (regexec(tp->re, name, 0, NULL, 0) == 0)
        (void)tcand_get(tp, id, name);
    return 0;
}

static double point_value(const struct store_function_point *pt, enum profile_value v)
{
    return (double)(v == PV_INUSE_OBJECTS ? pt->cum_objects : pt->cum_space);
}

static int newest_cb(const struct store_function_total *row, void *ctx)
{
    struct tpick *tp = ctx;
    int64_t x = tp->v == PV_INUSE_OBJECTS ? row->cum_objects : row->cum_space;
    tcand_get(tp, row->function_id, row->name)->key += (double)x;
    return 0;
}

static int tcand_cmp(const void *a, const void *b)
{
    const struct tcand *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* One node of the snapshots: its id and time window. */
struct tnode {
    const char *name;
    int64_t id, since_ms, until_ms, newest_snap, newest_s;
};

/* The functions' series come from one pass over a node's snapshots
 * (store_series_functions): a function without a row in a snapshot is
 * looked up in its packed rest, and a pass decompresses that once per
 * snapshot for all the functions, where a series each did it once per
 * function (trend --fleet over 100 nodes x 720 snapshots: 17 s, most of
 * it decompressing the same blobs five times). */
struct pass_ctx {
    const struct hp_map64 *row_of;
    enum profile_value v;
    struct tcand *c;     /* the functions, ascending ids */
    size_t n;
    double *values;      /* NULL: maxima only, into c[].key */
    size_t stride;
    const uint32_t *col; /* per function: its column in values */
};

static int pass_cb(const struct store_function_point *pts, size_t nf, void *ctx)
{
    struct pass_ctx *pc = ctx;
    uint32_t row;
    if (!nf || !hp_map64_get(pc->row_of, (uint64_t)pts[0].snapshot_id, &row))
        return 0;
    for (size_t j = 0; j < nf; j++) {
        double x = point_value(&pts[j], pc->v);
        if (pc->values)
            pc->values[(size_t)row * pc->stride + pc->col[j]] = x;
        else
            pc->c[j].key = HP_MAX(pc->c[j].key, x);
    }
    return 0;
}

static int tcand_id_cmp(const void *a, const void *b)
{
    const struct tcand *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The series of functions c[0..n) on every node: their largest values
 * into c[].key when values is NULL, else function j's into column j. */
static int fill_columns(struct store *st, const struct tnode *nodes, size_t nn,
                        const struct hp_map64 *row_of, struct tcand *c, size_t n,
                        enum profile_value v, double *values, struct hp_buf *err)
{
    if (!n)
        return 0;
    /* By ascending id, as the pass wants them; columns stay in c's order. */
    struct tcand *byid = hp_xmalloc(n * sizeof(*byid));
    uint32_t *col = hp_xmalloc(n * sizeof(*col));
    int64_t *fids = hp_xmalloc(n * sizeof(*fids));
    memcpy(byid, c, n * sizeof(*byid));
    for (size_t j = 0; j < n; j++)
        byid[j].key = (double)j; /* its column, carried through the sort */
    hp_qsort(byid, n, sizeof(*byid), tcand_id_cmp);
    for (size_t j = 0; j < n; j++) {
        col[j] = (uint32_t)byid[j].key;
        byid[j].key = 0;
        fids[j] = byid[j].id;
    }
    struct pass_ctx pc = { row_of, v, byid, n, values, n, col };
    int r = 0;
    for (size_t k = 0; k < nn && r >= 0; k++)
        r = store_series_functions(st, nodes[k].id, nodes[k].since_ms, nodes[k].until_ms, fids,
                                   n, pass_cb, &pc, err);
    if (!values)
        for (size_t j = 0; j < n; j++)
            c[col[j]].key = byid[j].key;
    free(fids);
    free(col);
    free(byid);
    return r < 0 ? r : 0;
}

int query_stored_trend_functions(struct store *st, const struct query_opts *o,
                                 const struct query_snapshot *snaps, size_t n,
                                 struct query_trend_opts *t, struct query_stored **ret,
                                 struct hp_buf *err)
{
    struct query_stored *nd = hp_xcalloc(1, sizeof(*nd));
    hp_arena_init(&nd->arena);
    struct tpick tp = { .arena = &nd->arena, .v = o->sample };
    hp_map64_init(&tp.of);
    struct hp_map64 row_of;
    hp_map64_init(&row_of);
    struct tnode *nodes = hp_xcalloc(n + 1, sizeof(*nodes));
    size_t nn = 0;
    regex_t re;
    bool has_re = t->function && *t->function;
    int r = 0;
    if (has_re) {
        int rc = regcomp(&re, t->function, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &re, msg, sizeof(msg));
            hp_err_printf(err, "--function \"%s\": invalid regular expression: %s",
                          t->function, msg);
            has_re = false;
            r = HP_EUSAGE;
            goto out;
        }
        tp.re = &re;
    }
    /* The nodes, each with the window of its snapshots and its newest. */
    for (size_t i = 0; i < n; i++) {
        uint32_t old;
        (void)hp_map64_put(&row_of, (uint64_t)snaps[i].id, (uint32_t)i, &old);
        /* A node's snapshots mostly come together: its own first. */
        size_t k = nn && strcmp(nodes[nn - 1].name, snaps[i].node) == 0 ? nn - 1 : 0;
        for (; k < nn; k++)
            if (strcmp(nodes[k].name, snaps[i].node) == 0)
                break;
        int64_t ms = snaps[i].time_s * 1000;
        if (k == nn) {
            nodes[nn++] = (struct tnode){ snaps[i].node, 0, ms, ms + 999, snaps[i].id,
                                          snaps[i].time_s };
            if ((r = store_node_find(st, snaps[i].node, &nodes[k].id, err)) < 0)
                goto out;
            continue;
        }
        nodes[k].since_ms = HP_MIN(nodes[k].since_ms, ms);
        nodes[k].until_ms = HP_MAX(nodes[k].until_ms, ms + 999);
        if (snaps[i].time_s >= nodes[k].newest_s) {
            nodes[k].newest_s = snaps[i].time_s;
            nodes[k].newest_snap = snaps[i].id;
        }
    }
    size_t maxf = t->max_functions ? t->max_functions : has_re ? 50 : 5;
    if (has_re) {
        /* Every function the expression matches, ranked by its largest
         * value in the window; those that never hold anything there are
         * not in these profiles. */
        if ((r = store_functions_list(st, match_cb, &tp, err)) < 0 ||
            (r = fill_columns(st, nodes, nn, &row_of, tp.c, tp.n, o->sample, NULL, err)) < 0)
            goto out;
        size_t keep = 0;
        for (size_t c = 0; c < tp.n; c++)
            if (tp.c[c].key > 0)
                tp.c[keep++] = tp.c[c];
        tp.n = keep;
    } else {
        for (size_t k = 0; k < nn; k++)
            if ((r = store_function_totals(st, nodes[k].newest_snap, newest_cb, &tp, err)) < 0)
                goto out;
    }
    hp_qsort(tp.c, tp.n, sizeof(*tp.c), tcand_cmp);
    size_t nf = HP_MIN(tp.n, maxf);
    nd->trend_names = hp_xcalloc(nf + 1, sizeof(*nd->trend_names));
    nd->trend_values = hp_xmalloc((n * nf + 1) * sizeof(*nd->trend_values));
    for (size_t i = 0; i < n * nf; i++)
        nd->trend_values[i] = NAN; /* a snapshot no series gave */
    for (size_t j = 0; j < nf; j++)
        nd->trend_names[j] = tp.c[j].name;
    if ((r = fill_columns(st, nodes, nn, &row_of, tp.c, nf, o->sample, nd->trend_values, err)) <
        0)
        goto out;
    t->functions_given = true;
    t->names = nd->trend_names;
    t->values = nd->trend_values;
    t->nfunctions = nf;
out:
    if (has_re)
        regfree(&re);
    free(nodes);
    free(tp.c);
    hp_map64_release(&tp.of);
    hp_map64_release(&row_of);
    if (r < 0) {
        query_stored_free(nd);
        return r;
    }
    *ret = nd;
    return 0;
}
