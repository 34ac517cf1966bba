/* Folding: from samples over location stacks to merged sequences of frame
 * names, the form every view is drawn from (see query.h).
 *
 * For each all-threads sample, the stack is walked root to leaf; each location
 * contributes its frames outermost first (so an inlined callee follows its
 * caller), or only the outermost frame with no_inline. Locations flagged as
 * the allocator's own are dropped from the leaf end only: a malloc frame in the
 * middle of a stack (an allocator calling back into user code) is kept, as
 * jeprof's RemoveUninterestingFrames keeps it. */
#include "query/query.h"

#include <math.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void query_opts_init(struct query_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sample = PV_INUSE_SPACE;
    o->nodefraction = 0.005;
    o->edgefraction = 0.001;
}

static const char *format_names[] = { "text", "collapsed", "json", "dot", "svg", "pprof", "csv" };

int query_format_parse(const char *s, enum query_format *ret)
{
    for (size_t i = 0; i < HP_ARRAY_SIZE(format_names); i++)
        if (strcmp(s, format_names[i]) == 0) {
            *ret = (enum query_format)i;
            return 0;
        }
    return HP_EPARSE;
}

const char *query_format_name(enum query_format f)
{
    return (size_t)f < HP_ARRAY_SIZE(format_names) ? format_names[f] : "?";
}

const char *query_utf8_clean(struct hp_arena *arena, const char *s)
{
    return hp_utf8_clean(arena, s);
}

struct fold_ctx {
    const struct profile *p;
    const struct query_opts *o;
    struct query_folded *f;
    regex_t focus, ignore;
    bool has_focus, has_ignore;
    const char **seq; /* scratch: one stack's names, root first */
    size_t seq_cap;
    /* Cache: location -> first name index in `locnames` (+1), so each
     * location's names are formatted and interned once. */
    uint32_t *loc_first;
    uint32_t *loc_count;
    const char **locnames;
    size_t nlocnames, locnames_cap;
    uint8_t *loc_match; /* 0 unknown, 1 no, 2 focus match, 4 ignore match */
    char *label; /* scratch: "function file:line" */
    size_t label_cap;
    /* A profile's function names are interned in it: by its number
     * (profile_string_id), the same name in f->strings, so that a name the
     * stacks share is hashed once, not once a location (locations are many
     * more than functions; interning them was a fifth of folding a stored
     * node's stacks for leaks). */
    const char **by_sid;
};

/* query_fold_map_resolved's names (not numbered): pointer -> the same
 * name in f->strings, direct-mapped. */
struct name_slot {
    const char *from, *to;
};

#define NAME_CACHE 4096

/* Names of one location, outermost first: formatted and interned the
 * first time (location_names_make), then read from the cache. */
static void location_names_make(struct fold_ctx *c, uint32_t loc);

static inline void location_names(struct fold_ctx *c, uint32_t loc, const char ***ret,
                                  uint32_t *ret_n)
{
    if (!c->loc_first[loc])
        location_names_make(c, loc);
    *ret = c->locnames + c->loc_first[loc] - 1;
    *ret_n = c->loc_count[loc];
}

static void location_names_make(struct fold_ctx *c, uint32_t loc)
{
    const struct profile *p = c->p;
    const struct profile_location *l = &p->locs[loc];
    uint32_t n = l->nframes ? l->nframes : 1;
    if (c->o->no_inline)
        n = 1;
    c->locnames = hp_xgrow(c->locnames, &c->locnames_cap, c->nlocnames + n,
                           sizeof(*c->locnames));
    c->loc_first[loc] = (uint32_t)c->nlocnames + 1;
    c->loc_count[loc] = n;
    for (uint32_t k = 0; k < n; k++) {
        /* Frames are stored innermost first; emit outermost first. */
        uint32_t fi = l->nframes ? l->nframes - 1 - k : 0;
        char buf[512];
        const char *name = profile_frame_label(p, loc, fi, buf, sizeof(buf), true);
        if (c->o->with_lines && fi < l->nframes && p->frames[l->frame_off + fi].file) {
            /* "%s %s:%u" by hand: printf's cost per frame showed in
             * perf of a warm `query top --lines` (numfmt.c). */
            const struct profile_frame *fr = &p->frames[l->frame_off + fi];
            size_t nn = strlen(name), nf = strlen(fr->file);
            char num[12], *d = num + sizeof(num);
            uint32_t v = fr->line;
            do {
                *--d = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            size_t nd = (size_t)(num + sizeof(num) - d), len = nn + 1 + nf + 1 + nd;
            c->label = hp_xgrow(c->label, &c->label_cap, len + 1, 1);
            memcpy(c->label, name, nn);
            c->label[nn] = ' ';
            memcpy(c->label + nn + 1, fr->file, nf);
            c->label[nn + 1 + nf] = ':';
            memcpy(c->label + nn + 2 + nf, d, nd);
            name = hp_strtab_intern(&c->f->strings, c->label, len);
        } else if (name != buf) { /* the profile's own string */
            uint32_t sid = profile_string_id(p, name);
            if (!c->by_sid[sid])
                c->by_sid[sid] = hp_strtab_intern(&c->f->strings, name, strlen(name));
            name = c->by_sid[sid];
        } else {
            name = hp_strtab_intern(&c->f->strings, name, strlen(name));
        }
        c->locnames[c->nlocnames++] = name;
    }
}

/* A new, empty folded profile (query_folded_free). */
static struct query_folded *folded_new(void)
{
    static _Atomic uint64_t serials;
    struct query_folded *f = hp_xcalloc(1, sizeof(*f));
    hp_arena_init(&f->arena);
    hp_strtab_init(&f->strings, &f->arena);
    hp_map64_init(&f->index);
    f->serial = atomic_fetch_add(&serials, 1) + 1;
    return f;
}

/* Names are interned, so pointers identify them: a sequence's hash is
 * hp_hash_bytes of its pointers, taken a pointer at a time as the
 * sequence is gathered (SEQ_SEED, hp_hash_word). */
#define SEQ_SEED UINT64_C(0x9e3779b97f4a7c15)

static struct query_fold_entry *entry_for(struct query_folded *f, const char *const *seq,
                                          size_t n, uint64_t h)
{
    /* Probe: key h, h+1, ... until the entry's sequence matches or the key is
     * free. Sequences with equal hashes are rare; this keeps hp_map64 simple. */
    for (uint64_t k = h;; k++) {
        uint32_t idx;
        if (!hp_map64_get(&f->index, k, &idx)) {
            f->names = hp_xgrow(f->names, &f->names_cap, f->nnames + n, sizeof(*f->names));
            memcpy(f->names + f->nnames, seq, n * sizeof(*seq));
            f->entries = hp_xgrow(f->entries, &f->entries_cap, f->nentries + 1,
                                  sizeof(*f->entries));
            struct query_fold_entry *e = &f->entries[f->nentries];
            memset(e, 0, sizeof(*e));
            e->off = (uint32_t)f->nnames;
            e->n = (uint32_t)n;
            f->nnames += n;
            (void)hp_map64_put(&f->index, k, (uint32_t)f->nentries, &idx);
            f->nentries++;
            return e;
        }
        struct query_fold_entry *e = &f->entries[idx];
        if (e->n == n && memcmp(f->names + e->off, seq, n * sizeof(*seq)) == 0)
            return e;
    }
}

static bool names_match(regex_t *re, const char *const *names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (regexec(re, names[i], 0, NULL, 0) == 0)
            return true;
    return false;
}

static int compile(regex_t *re, const char *pat, const char *what, struct hp_buf *err)
{
    if (strlen(pat) > 4096) {
        hp_err_printf(err, "--%s: pattern longer than 4096 bytes", what);
        return HP_EUSAGE;
    }
    struct hp_buf why = HP_BUF_INIT(0);
    if (hp_regex_budget_check(pat, &why) < 0) {
        hp_err_printf(err, "--%s: %s", what, why.data);
        hp_buf_release(&why);
        return HP_EUSAGE;
    }
    int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[256];
        regerror(rc, re, msg, sizeof(msg));
        hp_err_printf(err, "--%s \"%s\": invalid regular expression: %s", what, pat, msg);
        return HP_EUSAGE;
    }
    return 0;
}

static int fold(const struct profile *p, const struct query_opts *o, struct query_folded **ret,
                int32_t *entry_of, struct hp_buf *err)
{
    struct fold_ctx c = { .p = p, .o = o };
    int r = 0;
    if (o->focus && *o->focus) {
        if ((r = compile(&c.focus, o->focus, "focus", err)) < 0)
            return r;
        c.has_focus = true;
    }
    if (o->ignore && *o->ignore) {
        if ((r = compile(&c.ignore, o->ignore, "ignore", err)) < 0) {
            if (c.has_focus)
                regfree(&c.focus);
            return r;
        }
        c.has_ignore = true;
    }
    struct query_folded *f = folded_new();
    hp_map64_reserve(&f->index, p->nsamples); /* an entry a sample, at most */
    f->entries = hp_xgrow(f->entries, &f->entries_cap, p->nsamples + 1, sizeof(*f->entries));
    /* Room for the names of every entry, estimated from the stacks' depths
     * and the frames a location has on average: grown by copies, the
     * array was a third of folding a stored node's stacks for leaks. */
    size_t depth = 0;
    for (size_t si = 0; si < p->nsamples; si++)
        depth += p->stacks[p->samples[si].stack].n;
    size_t per_loc = o->no_inline || !p->nlocs ? 1 : (p->nframes + p->nlocs - 1) / p->nlocs;
    f->names = hp_xgrow(f->names, &f->names_cap, depth * HP_MAX(per_loc, 1) + 1,
                        sizeof(*f->names));
    f->source = p;
    f->scaling = p->scaling;
    f->period = p->period;
    c.f = f;
    c.loc_first = hp_xcalloc(p->nlocs + 1, sizeof(*c.loc_first));
    c.loc_count = hp_xcalloc(p->nlocs + 1, sizeof(*c.loc_count));
    c.loc_match = hp_xcalloc(p->nlocs + 1, 1);
    c.by_sid = hp_xcalloc(p->strings.len + 1, sizeof(*c.by_sid));
    const bool filters = c.has_focus || c.has_ignore;

    for (size_t si = 0; si < p->nsamples; si++) {
        const struct profile_sample *s = &p->samples[si];
        const struct profile_stack *st = &p->stacks[s->stack];
        const uint32_t *locs = profile_stack_locs(p, s->stack);
        /* Trim allocator frames from the leaf end. */
        uint32_t first = 0;
        if (!o->keep_allocator)
            while (first < st->n && (p->locs[locs[first]].flags & PROFILE_LOC_ALLOCATOR))
                first++;
        if (first == st->n)
            first = st->n ? st->n - 1 : 0; /* all allocator: keep the outermost */
        size_t n = 0;
        uint64_t h = hp_hash_begin(SEQ_SEED);
        bool focus_hit = !c.has_focus, ignore_hit = false;
        for (uint32_t k = st->n; k-- > first;) {
            uint32_t loc = locs[k];
            const char **names;
            uint32_t nn;
            location_names(&c, loc, &names, &nn);
            if (filters) {
                if (!c.loc_match[loc]) {
                    c.loc_match[loc] = 1;
                    if (c.has_focus && names_match(&c.focus, names, nn))
                        c.loc_match[loc] |= 2;
                    if (c.has_ignore && names_match(&c.ignore, names, nn))
                        c.loc_match[loc] |= 4;
                }
                focus_hit |= (c.loc_match[loc] & 2) != 0;
                ignore_hit |= (c.loc_match[loc] & 4) != 0;
            }
            if (n + nn > c.seq_cap)
                c.seq = hp_xgrow(c.seq, &c.seq_cap, n + nn, sizeof(*c.seq));
            for (uint32_t j = 0; j < nn; j++) { /* one or two, mostly: no memcpy call */
                c.seq[n++] = names[j];
                h = hp_hash_word(h, (uint64_t)(uintptr_t)names[j]);
            }
        }
        if (!focus_hit || ignore_hit || n == 0) {
            if (entry_of)
                entry_of[si] = -1;
            continue;
        }
        struct query_fold_entry *e = entry_for(f, c.seq, n, hp_hash_end(h));
        if (entry_of)
            entry_of[si] = (int32_t)(e - f->entries);
        double var[PV_COUNT];
        query_sample_variance(p, s, var);
        for (int v = 0; v < PV_COUNT; v++) {
            e->value[v] += s->value[v];
            e->var[v] += var[v];
            f->total[v] += s->value[v];
        }
        e->count++;
    }
    free(c.seq);
    free(c.loc_first);
    free(c.loc_count);
    free(c.locnames);
    free(c.loc_match);
    free(c.label);
    free(c.by_sid);
    if (c.has_focus)
        regfree(&c.focus);
    if (c.has_ignore)
        regfree(&c.ignore);
    *ret = f;
    return 0;
}

int query_fold(const struct profile *p, const struct query_opts *o, struct query_folded **ret,
               struct hp_buf *err)
{
    return fold(p, o, ret, NULL, err);
}

int query_fold_map(const struct profile *p, const struct query_opts *o,
                   struct query_folded **ret, int32_t **ret_entry_of, struct hp_buf *err)
{
    int32_t *entry_of = hp_xmalloc((p->nsamples + 1) * sizeof(*entry_of));
    int r = fold(p, o, ret, entry_of, err);
    if (r < 0) {
        free(entry_of);
        return r;
    }
    *ret_entry_of = entry_of;
    return 0;
}

bool query_fold_resolved_ok(const struct query_opts *o)
{
    return !(o->focus && *o->focus) && !(o->ignore && *o->ignore) && !o->no_inline &&
           !o->with_lines;
}

uint32_t query_resolved_first_kept(const struct profile_resolved *r, size_t i,
                                   bool keep_allocator)
{
    const uint32_t *locs = r->locs + r->stack_off[i];
    uint32_t nl = r->stack_off[i + 1] - r->stack_off[i], first = 0;
    if (!keep_allocator)
        while (first < nl && (r->loc[locs[first]].flags & PROFILE_LOC_ALLOCATOR))
            first++;
    return first == nl ? (nl ? nl - 1 : 0) : first;
}

/* A stack of stored zero values folded into the entry of names seq[0..n)
 * (h: their hash so far, hp_hash_word per name): the entry's number. */
static int32_t entry_add(struct query_folded *f, const char *const *seq, size_t n, uint64_t h,
                         const double zvar[PV_COUNT])
{
    struct query_fold_entry *e = entry_for(f, seq, n, hp_hash_end(h));
    for (int v = 0; v < PV_COUNT; v++)
        e->var[v] += zvar[v];
    e->count++;
    return (int32_t)(e - f->entries);
}

int query_fold_map_resolved(const struct profile_resolved *r, const struct query_opts *o,
                            struct query_folded **ret, int32_t **ret_entry_of,
                            struct hp_buf *err)
{
    if (!query_fold_resolved_ok(o)) {
        hp_err_printf(err, "folding resolved stacks: only by function");
        return HP_EUSAGE;
    }
    struct query_folded *f = folded_new();
    hp_map64_reserve(&f->index, r->nstacks);
    f->entries = hp_xgrow(f->entries, &f->entries_cap, r->nstacks + 1, sizeof(*f->entries));
    f->names = hp_xgrow(f->names, &f->names_cap, r->stack_off[r->nstacks] * 2 + 1,
                        sizeof(*f->names));
    f->scaling = r->scaling;
    f->period = r->period;
    int32_t *entry_of = hp_xmalloc((r->nstacks + 1) * sizeof(*entry_of));
    /* Each location's names interned once (fold's location_names). */
    uint32_t *loc_first = hp_xcalloc(r->nlocs + 1, sizeof(*loc_first));
    const char **locnames = NULL, **seq = NULL;
    size_t nlocnames = 0, locnames_cap = 0, seq_cap = 0;
    struct name_slot *cache = hp_xcalloc(NAME_CACHE, sizeof(*cache));
    /* Every sample is zero here, as in store_stacks_load's profile: its
     * variance is what query_fold adds for one. */
    struct profile zp = { .scaling = r->scaling, .period = r->period };
    struct profile_sample zs = { 0 };
    double zvar[PV_COUNT];
    query_sample_variance(&zp, &zs, zvar);
    for (size_t i = 0; i < r->nstacks; i++) {
        const uint32_t *locs = r->locs + r->stack_off[i];
        uint32_t nl = r->stack_off[i + 1] - r->stack_off[i];
        uint32_t first = query_resolved_first_kept(r, i, o->keep_allocator);
        size_t n = 0;
        uint64_t h = hp_hash_begin(SEQ_SEED);
        for (uint32_t k = nl; k-- > first;) {
            uint32_t loc = locs[k];
            const struct profile_rloc *l = &r->loc[loc];
            if (!loc_first[loc]) {
                locnames = hp_xgrow(locnames, &locnames_cap, nlocnames + l->nnames + 1,
                                    sizeof(*locnames));
                loc_first[loc] = (uint32_t)nlocnames + 1;
                for (uint32_t j = 0; j < l->nnames; j++) {
                    const struct profile_rname *nm = &r->names[l->name_off + j];
                    struct name_slot *ns = &cache[((uintptr_t)nm->s >> 3) % NAME_CACHE];
                    if (ns->from != nm->s) {
                        ns->from = nm->s;
                        ns->to = hp_strtab_intern(&f->strings, nm->s, nm->len);
                    }
                    locnames[nlocnames++] = ns->to;
                }
            }
            const char **names = locnames + loc_first[loc] - 1;
            if (n + l->nnames > seq_cap)
                seq = hp_xgrow(seq, &seq_cap, n + l->nnames, sizeof(*seq));
            for (uint32_t j = 0; j < l->nnames; j++) {
                seq[n++] = names[j];
                h = hp_hash_word(h, (uint64_t)(uintptr_t)names[j]);
            }
        }
        entry_of[i] = n ? entry_add(f, seq, n, h, zvar) : -1;
    }
    free(loc_first);
    free(locnames);
    free(seq);
    free(cache);
    *ret = f;
    *ret_entry_of = entry_of;
    return 0;
}

int query_fold_map_ids(const struct hp_strtab *names, const uint32_t *const *seq,
                       const uint32_t *len, size_t n, enum profile_scaling scaling,
                       uint64_t period, struct query_folded **ret, int32_t **ret_entry_of)
{
    struct query_folded *f = folded_new();
    hp_map64_reserve(&f->index, n);
    f->entries = hp_xgrow(f->entries, &f->entries_cap, n + 1, sizeof(*f->entries));
    f->scaling = scaling;
    f->period = period;
    int32_t *entry_of = hp_xmalloc((n + 1) * sizeof(*entry_of));
    /* Per name of `names`: the same name in f->strings, interned the first
     * time a stack lists it, as query_fold_map_resolved interns them. */
    const char **to = hp_xcalloc(names->len + 1, sizeof(*to));
    const char **sq = NULL;
    size_t sq_cap = 0;
    struct profile zp = { .scaling = scaling, .period = period };
    struct profile_sample zs = { 0 };
    double zvar[PV_COUNT];
    query_sample_variance(&zp, &zs, zvar);
    for (size_t i = 0; i < n; i++) {
        if (!len[i]) {
            entry_of[i] = -1;
            continue;
        }
        sq = hp_xgrow(sq, &sq_cap, len[i], sizeof(*sq));
        uint64_t h = hp_hash_begin(SEQ_SEED);
        for (uint32_t k = 0; k < len[i]; k++) {
            uint32_t id = seq[i][k];
            if (!to[id]) {
                const char *s = names->by_id[id];
                to[id] = hp_strtab_intern(&f->strings, s, strlen(s));
            }
            sq[k] = to[id];
            h = hp_hash_word(h, (uint64_t)(uintptr_t)to[id]);
        }
        entry_of[i] = entry_add(f, sq, len[i], h, zvar);
    }
    free(to);
    free(sq);
    *ret = f;
    *ret_entry_of = entry_of;
    return 0;
}

void query_folded_free(struct query_folded *f)
{
    if (!f)
        return;
    free(f->names);
    free(f->entries);
    hp_map64_release(&f->index);
    hp_strtab_release(&f->strings);
    hp_arena_release(&f->arena);
    free(f);
}

/* ---- top ---- */

static int func_cmp(const void *a, const void *b, void *ctx)
{
    const struct query_func *x = a, *y = b;
    int v = *(const int *)ctx;
    if (x->flat[v] != y->flat[v])
        return x->flat[v] < y->flat[v] ? 1 : -1;
    if (x->cum[v] != y->cum[v])
        return x->cum[v] < y->cum[v] ? 1 : -1;
    return strcmp(x->name, y->name);
}

int query_top_build(const struct query_folded *f, enum profile_value sort_by,
                    struct query_top **ret)
{
    struct query_top *t = hp_xcalloc(1, sizeof(*t));
    /* Per name of f (its strings' numbers, hp_strtab_id): the function's
     * place in t->funcs + 1, and the last entry that added to its cum
     * (recursion counts once per stack). Arrays, not a map: every frame
     * of every entry looks its function up. */
    size_t nstr = f->strings.len;
    uint32_t *place = hp_xcalloc(nstr + 1, sizeof(*place));
    uint32_t *stamp = hp_xcalloc(nstr + 1, sizeof(*stamp));
    t->funcs = hp_xcalloc(nstr + 1, sizeof(*t->funcs));
    for (size_t ei = 0; ei < f->nentries; ei++) {
        const struct query_fold_entry *e = &f->entries[ei];
        const char *const *names = query_fold_frames(f, e);
        for (uint32_t k = 0; k < e->n; k++) {
            uint32_t id = hp_strtab_id(&f->strings, names[k]);
            if (!place[id]) {
                t->funcs[t->n].name = names[k];
                place[id] = (uint32_t)++t->n;
            }
            struct query_func *fn = &t->funcs[place[id] - 1];
            if (stamp[id] != ei + 1) {
                stamp[id] = (uint32_t)ei + 1;
                for (int v = 0; v < PV_COUNT; v++)
                    fn->cum[v] += e->value[v];
            }
            if (k == e->n - 1)
                for (int v = 0; v < PV_COUNT; v++)
                    fn->flat[v] += e->value[v];
        }
    }
    free(stamp);
    free(place);
    memcpy(t->total, f->total, sizeof(t->total));
    t->sample = sort_by;
    int v = (int)sort_by;
    if (t->n > 1)
        qsort_r(t->funcs, t->n, sizeof(*t->funcs), func_cmp, &v);
    *ret = t;
    return 0;
}

void query_top_free(struct query_top *t)
{
    if (!t)
        return;
    free(t->funcs);
    free(t);
}

const struct query_func *query_top_find(const struct query_top *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->funcs[i].name, name) == 0)
            return &t->funcs[i];
    return NULL;
}

/* ---- rounding ---- */

struct remainder {
    double frac;
    size_t idx;
};

static int remainder_cmp(const void *a, const void *b)
{
    const struct remainder *x = a, *y = b;
    if (x->frac != y->frac)
        return x->frac < y->frac ? 1 : -1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void query_round_preserving_sum(const double *vals, size_t n, int64_t *ret)
{
    double sum = 0, floors = 0;
    struct remainder *rem = hp_xmalloc((n ? n : 1) * sizeof(*rem));
    for (size_t i = 0; i < n; i++) {
        double fl = floor(vals[i]);
        ret[i] = hp_double_to_i64(fl);
        rem[i] = (struct remainder){ .frac = vals[i] - fl, .idx = i };
        floors += fl;
        sum += vals[i];
    }
    /* Truncate toward zero as jeprof's "%d" prints its Total. Sums beyond
     * 2^53 are not exact in a double anyway; then no adjustment is made. */
    double extra = trunc(sum) - floors;
    if (extra >= 1 && extra <= (double)n && fabs(sum) < 9007199254740992.0) {
        hp_qsort(rem, n, sizeof(*rem), remainder_cmp);
        for (size_t k = 0; k < (size_t)extra; k++)
            ret[rem[k].idx]++;
    }
    free(rem);
}
