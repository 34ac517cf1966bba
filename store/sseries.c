/* Stack series: a node's samples as runs (store.h, "stack series").
 *
 * `query leaks` over the store wants, per stack, its values over hundreds of
 * snapshots. Read as sample sets that is every sample of every snapshot
 * decoded (72 M for 100 nodes x 720 h x 1,000 stacks, most of the command's
 * time), though a steady node changes a few percent of its counts an hour.
 * Here a run of snapshots becomes, per stack, the runs of snapshots over
 * which its raw values hold still: a reader's work follows the changes.
 *
 * Runs alone would lose one thing the folded profiles keep: the order in
 * which a snapshot lists its samples, which is the order query_fold adds the
 * values of stacks that fold together (floating point addition is not
 * associative). So the builder keeps the slots (a stack, or its second
 * listing in one snapshot) in one order that every snapshot of a chunk
 * lists its samples in; a snapshot that contradicts it (a stack listed
 * before one it followed) starts a new chunk. Successive dumps of one
 * process list their stacks in a stable order, so a chunk is normally a
 * whole span (series.c) or stretch.
 *
 * Engine-free: the writer builds and packs a closed span's series
 * (series.c), the leaks reader builds one from sample sets for snapshots no
 * closed span covers (query/stored.c), and the fuzz target unpacks. */
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

#define SSERIES_VERSION 1
#define NONE UINT32_MAX
/* Slots 0 and 1 of a chunk: the ends of its order. */
enum { HEAD = 0, TAIL = 1 };

struct ssb_slot {
    int64_t stack;
    uint64_t label;     /* ascending along the order */
    uint32_t prev, next;
    uint32_t dup;       /* the same stack's next slot, NONE */
    uint32_t open;      /* its newest run, NONE */
    uint32_t stamp;     /* 1 + the member that last used it */
    bool only;          /* the stack's one slot (no second listing yet) */
};

struct ssb_run {
    uint32_t slot, first, n;
    int64_t raw[PV_COUNT];
};

struct store_ssb {
    struct store_sseries *out;
    struct hp_map64 first_slot; /* stack -> its first slot */
    struct ssb_slot *slots;
    size_t nslots, slots_cap;
    struct ssb_run *runs;
    size_t nruns, runs_cap;
    struct store_ss_member *members;
    size_t nmembers, members_cap;
    size_t chunks_cap;
    uint32_t stamp;
    /* The previous member's slots by sample position: successive dumps
     * list mostly the same stacks at the same places, so most samples
     * find their slot there instead of in the map. */
    uint32_t *pos_slot;
    size_t npos, pos_cap;
    uint64_t relabels; /* store_ssb_relabels */
};

static void chunk_reset(struct store_ssb *b)
{
    b->npos = 0;
    hp_map64_release(&b->first_slot);
    hp_map64_init(&b->first_slot);
    b->nslots = 2;
    b->slots[HEAD] = (struct ssb_slot){ .label = 0, .prev = NONE, .next = TAIL, .dup = NONE };
    b->slots[TAIL] = (struct ssb_slot){ .label = UINT64_MAX, .prev = HEAD, .next = NONE,
                                        .dup = NONE };
    b->nruns = 0;
    b->nmembers = 0;
}

struct store_ssb *store_ssb_new(struct store_sseries *out)
{
    struct store_ssb *b = hp_xcalloc(1, sizeof(*b));
    memset(out, 0, sizeof(*out));
    hp_arena_init(&out->arena);
    b->out = out;
    b->slots = hp_xgrow(NULL, &b->slots_cap, 2, sizeof(*b->slots));
    hp_map64_init(&b->first_slot);
    chunk_reset(b);
    return b;
}

/* Labels spread evenly again, when an insertion found no room. */
static void relabel(struct store_ssb *b)
{
    uint64_t step = UINT64_MAX / (b->nslots + 1), l = 0;
    for (uint32_t s = b->slots[HEAD].next; s != TAIL; s = b->slots[s].next)
        b->slots[s].label = (l += step);
    b->relabels++;
}

/* A new slot's label: SSB_LABEL_STEP past its predecessor's, or halfway to
 * its successor's when that is nearer. Halving alone ran out of room after
 * 64 slots in a row at one place, and a chunk's first member inserts all
 * its slots in a row at the end: a 20k-stack member relabelled the whole
 * list hundreds of times (over half of building a group's series). */
#define SSB_LABEL_STEP (UINT64_C(1) << 32)

static uint32_t slot_insert_after(struct store_ssb *b, uint32_t p, int64_t stack)
{
    if (b->slots[b->slots[p].next].label - b->slots[p].label < 2)
        relabel(b);
    uint32_t n = b->slots[p].next;
    b->slots = hp_xgrow(b->slots, &b->slots_cap, b->nslots + 1, sizeof(*b->slots));
    uint32_t s = (uint32_t)b->nslots++;
    uint64_t lo = b->slots[p].label, half = (b->slots[n].label - lo) / 2;
    b->slots[s] = (struct ssb_slot){ .stack = stack,
                                     .label = lo + (half < SSB_LABEL_STEP ? half : SSB_LABEL_STEP),
                                     .prev = p, .next = n, .dup = NONE, .open = NONE };
    b->slots[p].next = s;
    b->slots[n].prev = s;
    return s;
}

/* The slot of stack's next listing in the member being read (stamp), or
 * NONE when it has none yet; *ret_last: the last slot of the stack. */
static uint32_t slot_find(struct store_ssb *b, size_t pos, int64_t stack, uint32_t stamp,
                          uint32_t *ret_last)
{
    uint32_t s;
    *ret_last = NONE;
    if (pos < b->npos) {
        const struct ssb_slot *h = &b->slots[b->pos_slot[pos]];
        if (h->stack == stack && h->only && h->stamp != stamp)
            return b->pos_slot[pos]; /* the map would find the same one */
    }
    if (!hp_map64_get(&b->first_slot, (uint64_t)stack, &s))
        return NONE;
    for (; s != NONE; s = b->slots[s].dup) {
        *ret_last = s;
        if (b->slots[s].stamp != stamp)
            return s;
    }
    return NONE;
}

/* Whether ss lists its samples in the chunk's order. Marks the slots it
 * finds with stamp. */
static bool order_holds(struct store_ssb *b, const struct store_samples *ss, uint32_t stamp)
{
    uint64_t last = 0;
    for (size_t i = 0; i < ss->n; i++) {
        uint32_t tail, s = slot_find(b, i, ss->samples[i].stack, stamp, &tail);
        if (s == NONE)
            continue; /* new: it goes right after the one before */
        if (b->slots[s].label <= last)
            return false;
        last = b->slots[s].label;
        b->slots[s].stamp = stamp;
    }
    return true;
}

static void chunk_close(struct store_ssb *b)
{
    if (!b->nmembers)
        return;
    struct store_sseries *o = b->out;
    struct hp_arena *a = &o->arena;
    o->chunks = hp_xgrow(o->chunks, &b->chunks_cap, o->nchunks + 1, sizeof(*o->chunks));
    struct store_ss_chunk *c = &o->chunks[o->nchunks++];
    size_t ns = b->nslots - 2;
    c->nmembers = b->nmembers;
    c->members = hp_arena_alloc(a, (b->nmembers + 1) * sizeof(*c->members));
    memcpy(c->members, b->members, b->nmembers * sizeof(*c->members));
    c->nslots = ns;
    c->slots = hp_arena_alloc(a, (ns + 1) * sizeof(*c->slots));
    c->nruns = b->nruns;
    c->runs = hp_arena_alloc(a, (b->nruns + 1) * sizeof(*c->runs));
    /* Slots in order; each one's runs after the previous one's. */
    uint32_t *pos = hp_xmalloc((b->nslots + 1) * sizeof(*pos));
    size_t k = 0;
    for (uint32_t s = b->slots[HEAD].next; s != TAIL; s = b->slots[s].next) {
        pos[s] = (uint32_t)k;
        c->slots[k++] = (struct store_ss_slot){ .stack = b->slots[s].stack };
    }
    for (size_t i = 0; i < b->nruns; i++)
        c->slots[pos[b->runs[i].slot]].nruns++;
    uint32_t off = 0;
    for (size_t j = 0; j < ns; j++) {
        c->slots[j].run = off;
        off += c->slots[j].nruns;
        c->slots[j].nruns = 0;
    }
    for (size_t i = 0; i < b->nruns; i++) {
        const struct ssb_run *r = &b->runs[i];
        struct store_ss_slot *sl = &c->slots[pos[r->slot]];
        struct store_ss_run *x = &c->runs[sl->run + sl->nruns++];
        x->first = r->first;
        x->n = r->n;
        memcpy(x->raw, r->raw, sizeof(x->raw));
    }
    free(pos);
    chunk_reset(b);
}

void store_ssb_add(struct store_ssb *b, const struct store_samples *ss)
{
    /* A new chunk is empty: nothing in it to contradict. */
    if (!order_holds(b, ss, ++b->stamp))
        chunk_close(b);
    uint32_t use = ++b->stamp, m = (uint32_t)b->nmembers;
    const struct profile *p = ss->profile;
    b->members = hp_xgrow(b->members, &b->members_cap, b->nmembers + 1, sizeof(*b->members));
    b->members[b->nmembers++] = (struct store_ss_member){
        ss->snapshot_id, ss->layout, p ? p->period : 0, p ? (uint32_t)p->scaling : 0
    };
    uint32_t prev = HEAD;
    for (size_t i = 0; i < ss->n; i++) {
        const struct store_sample *sm = &ss->samples[i];
        uint32_t last, s = slot_find(b, i, sm->stack, use, &last);
        if (s == NONE) {
            s = slot_insert_after(b, prev, sm->stack);
            uint32_t old;
            b->slots[s].only = last == NONE;
            if (last == NONE) {
                (void)hp_map64_put(&b->first_slot, (uint64_t)sm->stack, s, &old);
            } else {
                b->slots[last].dup = s;
                /* the stack's slots are no longer its only one */
                (void)hp_map64_get(&b->first_slot, (uint64_t)sm->stack, &old);
                b->slots[old].only = false;
            }
        }
        b->pos_slot = hp_xgrow(b->pos_slot, &b->pos_cap, i + 1, sizeof(*b->pos_slot));
        b->pos_slot[i] = s;
        b->slots[s].stamp = use;
        prev = s;
        uint32_t o = b->slots[s].open;
        if (o != NONE && b->runs[o].first + b->runs[o].n == m &&
            memcmp(b->runs[o].raw, sm->raw, sizeof(sm->raw)) == 0) {
            b->runs[o].n++;
            continue;
        }
        b->runs = hp_xgrow(b->runs, &b->runs_cap, b->nruns + 1, sizeof(*b->runs));
        struct ssb_run *r = &b->runs[b->nruns];
        r->slot = s;
        r->first = m;
        r->n = 1;
        memcpy(r->raw, sm->raw, sizeof(r->raw));
        b->slots[s].open = (uint32_t)b->nruns++;
    }
    b->npos = ss->n;
}

/* Chunk c taken whole into b, which holds nothing: what adding its
 * members one by one makes of a chunk the builder built (a chunk starts
 * empty, and its members' adds insert its slots in its order and extend its
 * runs), without rebuilding each member's samples and finding their slots
 * (a span's first group: a third of replaying its groups at span close).
 * Any chunk that decodes keeps every member's samples and their order. */
static void ssb_adopt(struct store_ssb *b, const struct store_ss_chunk *c)
{
    size_t ns = c->nslots;
    uint64_t step = UINT64_MAX / (ns + 1);
    b->slots = hp_xgrow(b->slots, &b->slots_cap, ns + 2, sizeof(*b->slots));
    b->runs = hp_xgrow(b->runs, &b->runs_cap, c->nruns + 1, sizeof(*b->runs));
    b->pos_slot = hp_xgrow(b->pos_slot, &b->pos_cap, ns + 1, sizeof(*b->pos_slot));
    hp_map64_reserve(&b->first_slot, ns);
    uint32_t prev = HEAD, last_member = (uint32_t)c->nmembers - 1;
    b->npos = 0;
    for (size_t k = 0; k < ns; k++) {
        const struct store_ss_slot *cs = &c->slots[k];
        uint32_t s = (uint32_t)(k + 2), first;
        b->slots[s] = (struct ssb_slot){ .stack = cs->stack, .label = step * (k + 1),
                                         .prev = prev, .next = TAIL, .dup = NONE,
                                         .open = NONE, .only = true };
        b->slots[prev].next = s;
        prev = s;
        if (hp_map64_put(&b->first_slot, (uint64_t)cs->stack, s, &first)) {
            /* listed twice: its slots chain in their order */
            uint32_t t = first;
            while (b->slots[t].dup != NONE)
                t = b->slots[t].dup;
            b->slots[t].dup = s;
            b->slots[first].only = b->slots[s].only = false;
        }
        for (uint32_t j = 0; j < cs->nruns; j++) {
            const struct store_ss_run *r = &c->runs[cs->run + j];
            struct ssb_run *x = &b->runs[b->nruns];
            x->slot = s;
            x->first = r->first;
            x->n = r->n;
            memcpy(x->raw, r->raw, sizeof(x->raw));
            b->slots[s].open = (uint32_t)b->nruns++;
        }
        if (cs->nruns && b->runs[b->slots[s].open].first + b->runs[b->slots[s].open].n ==
                             last_member + 1)
            b->pos_slot[b->npos++] = s;
    }
    b->slots[TAIL].prev = prev;
    b->nslots = ns + 2;
    b->members = hp_xgrow(b->members, &b->members_cap, c->nmembers, sizeof(*b->members));
    memcpy(b->members, c->members, c->nmembers * sizeof(*b->members));
    b->nmembers = c->nmembers;
}

void store_ssb_add_chunk(struct store_ssb *b, const struct store_ss_chunk *c)
{
    if (b->nmembers == 0 && c->nmembers) {
        ssb_adopt(b, c);
        return;
    }
    /* Per slot, the first of its runs that may still cover a member: runs
     * ascend, so each slot's cursor only moves on. */
    uint32_t *cur = hp_xcalloc(c->nslots + 1, sizeof(*cur));
    struct store_sample *sm = hp_xcalloc(c->nslots + 1, sizeof(*sm));
    /* What store_ssb_add reads of a profile: its period and scaling. */
    struct profile pp;
    memset(&pp, 0, sizeof(pp));
    for (uint32_t m = 0; m < c->nmembers; m++) {
        size_t n = 0;
        for (size_t s = 0; s < c->nslots; s++) {
            const struct store_ss_slot *sl = &c->slots[s];
            while (cur[s] < sl->nruns &&
                   c->runs[sl->run + cur[s]].first + c->runs[sl->run + cur[s]].n <= m)
                cur[s]++;
            if (cur[s] == sl->nruns || c->runs[sl->run + cur[s]].first > m)
                continue;
            sm[n].stack = sl->stack;
            memcpy(sm[n].raw, c->runs[sl->run + cur[s]].raw, sizeof(sm[n].raw));
            n++;
        }
        const struct store_ss_member *x = &c->members[m];
        pp.period = x->period;
        pp.scaling = (enum profile_scaling)x->scaling;
        struct store_samples ss = { .snapshot_id = x->snapshot_id, .profile = &pp,
                                    .samples = sm, .n = n, .layout = x->layout };
        store_ssb_add(b, &ss);
    }
    free(sm);
    free(cur);
}

uint64_t store_ssb_relabels(const struct store_ssb *b)
{
    return b->relabels;
}

void store_ssb_finish(struct store_ssb *b)
{
    if (!b)
        return;
    chunk_close(b);
    store_ssb_free(b);
}

void store_ssb_free(struct store_ssb *b)
{
    if (!b)
        return;
    hp_map64_release(&b->first_slot);
    free(b->slots);
    free(b->runs);
    free(b->members);
    free(b->pos_slot);
    free(b);
}

void store_sseries_release(struct store_sseries *ss)
{
    if (!ss)
        return;
    free(ss->chunks);
    hp_arena_release(&ss->arena);
    memset(ss, 0, sizeof(*ss));
}

/* ---- packed form (stack_series.data, before compression) ---- */

void store_sseries_pack(const struct store_sseries *ss, struct store_pack *b)
{
    store_pack_u64(b, SSERIES_VERSION);
    store_pack_u64(b, ss->nchunks);
    int64_t prev_id = 0;
    for (size_t c = 0; c < ss->nchunks; c++) {
        const struct store_ss_chunk *k = &ss->chunks[c];
        store_pack_u64(b, k->nmembers);
        for (size_t m = 0; m < k->nmembers; m++) {
            const struct store_ss_member *x = &k->members[m];
            store_pack_i64(b, (int64_t)((uint64_t)x->snapshot_id - (uint64_t)prev_id));
            prev_id = x->snapshot_id;
            store_pack_u64(b, x->layout);
            store_pack_u64(b, x->period);
            store_pack_u64(b, x->scaling);
        }
        store_pack_u64(b, k->nslots);
        int64_t prev_stack = 0;
        for (size_t s = 0; s < k->nslots; s++) {
            const struct store_ss_slot *sl = &k->slots[s];
            store_pack_i64(b, (int64_t)((uint64_t)sl->stack - (uint64_t)prev_stack));
            prev_stack = sl->stack;
            store_pack_u64(b, sl->nruns);
            uint32_t end = 0;
            int64_t raw[PV_COUNT] = { 0 };
            for (uint32_t j = 0; j < sl->nruns; j++) {
                const struct store_ss_run *r = &k->runs[sl->run + j];
                store_pack_u64(b, r->first - end);
                store_pack_u64(b, r->n - 1);
                end = r->first + r->n;
                for (int v = 0; v < PV_COUNT; v++) {
                    store_pack_i64(b, (int64_t)((uint64_t)r->raw[v] - (uint64_t)raw[v]));
                    raw[v] = r->raw[v];
                }
            }
        }
    }
}

int store_sseries_unpack(const void *data, size_t len, struct store_sseries *out,
                         struct hp_buf *err)
{
    struct store_unpack u = { data, (const unsigned char *)data + len, false };
    memset(out, 0, sizeof(*out));
    hp_arena_init(&out->arena);
    const char *what = "unknown version";
    size_t cap = 0;
    if (store_unpack_u64(&u) != SSERIES_VERSION)
        goto bad;
    /* Room for every run the bytes can hold (six bytes at least each), so
     * that the runs are decoded in place, chunk after chunk, never grown
     * nor copied (copying them was 2% of leaks over a store; pages of it
     * never written are never touched). */
    size_t room = (size_t)(u.end - u.p) / 6 + 1, used = 0;
    struct store_ss_run *all = hp_arena_alloc(&out->arena, room * sizeof(*all));
    what = "counts past its end";
    uint64_t nc = store_unpack_u64(&u);
    if (u.bad || nc > (uint64_t)(u.end - u.p))
        goto bad;
    int64_t prev_id = 0;
    for (uint64_t c = 0; c < nc; c++) {
        /* Every count is bounded by the bytes left: each item takes one. */
        what = "counts past its end";
        uint64_t nm = store_unpack_u64(&u);
        if (u.bad || nm == 0 || nm > (uint64_t)(u.end - u.p) || nm >= NONE)
            goto bad;
        out->chunks = hp_xgrow(out->chunks, &cap, out->nchunks + 1, sizeof(*out->chunks));
        struct store_ss_chunk *k = &out->chunks[out->nchunks++];
        memset(k, 0, sizeof(*k));
        k->runs = all + used;
        k->members = hp_arena_alloc(&out->arena, (size_t)nm * sizeof(*k->members));
        k->nmembers = (size_t)nm;
        for (uint64_t m = 0; m < nm; m++) {
            struct store_ss_member *x = &k->members[m];
            int64_t step = store_unpack_i64(&u);
            x->snapshot_id = (int64_t)((uint64_t)prev_id + (uint64_t)step);
            what = "snapshot ids not ascending";
            if (step <= 0 || x->snapshot_id <= prev_id)
                goto bad;
            prev_id = x->snapshot_id;
            x->layout = store_unpack_u64(&u);
            x->period = store_unpack_u64(&u);
            uint64_t scaling = store_unpack_u64(&u);
            what = "an unknown scaling";
            if (scaling > PROFILE_SCALING_V2)
                goto bad;
            x->scaling = (uint32_t)scaling;
        }
        what = "counts past its end";
        uint64_t ns = store_unpack_u64(&u);
        if (u.bad || ns > (uint64_t)(u.end - u.p) / 2)
            goto bad;
        k->slots = hp_arena_alloc(&out->arena, ((size_t)ns + 1) * sizeof(*k->slots));
        k->nslots = (size_t)ns;
        int64_t prev_stack = 0;
        for (uint64_t s = 0; s < ns; s++) {
            struct store_ss_slot *sl = &k->slots[s];
            sl->stack = (int64_t)((uint64_t)prev_stack + (uint64_t)store_unpack_i64(&u));
            prev_stack = sl->stack;
            uint64_t nr = store_unpack_u64(&u);
            /* A run takes six bytes at least; a slot has one at least. */
            what = "a run count past its end";
            if (u.bad || nr == 0 || nr > (uint64_t)(u.end - u.p) / 6)
                goto bad;
            sl->run = (uint32_t)k->nruns;
            sl->nruns = (uint32_t)nr;
            if ((size_t)nr > room - used - k->nruns)
                goto bad; /* cannot happen: each run takes six bytes */
            uint64_t end = 0;
            int64_t raw[PV_COUNT] = { 0 };
            what = "a run outside its snapshots";
            for (uint64_t j = 0; j < nr; j++) {
                struct store_ss_run *r = &k->runs[k->nruns++];
                uint64_t gap = store_unpack_u64(&u), n = store_unpack_u64(&u) + 1;
                if (u.bad || gap > nm || n > nm || end + gap + n > nm)
                    goto bad;
                r->first = (uint32_t)(end + gap);
                r->n = (uint32_t)n;
                end += gap + n;
                for (int v = 0; v < PV_COUNT; v++) {
                    raw[v] = (int64_t)((uint64_t)raw[v] + (uint64_t)store_unpack_i64(&u));
                    r->raw[v] = raw[v];
                }
            }
        }
        used += k->nruns;
    }
    what = "bytes after its end";
    if (u.bad || u.p != u.end)
        goto bad;
    return 0;
bad:
    hp_err_printf(err, "a stack series does not decode (%s, at byte %zu of %zu)", what,
                  (size_t)(u.p - (const unsigned char *)data), len);
    store_sseries_release(out);
    return HP_ECORRUPT;
}
