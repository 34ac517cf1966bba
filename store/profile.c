/* The profile model (see profile.h). Invariants: every stack's location
 * indexes are < nlocs; every sample's stack is < nstacks; frames of a location
 * are contiguous in `frames`; mapping indexes stored in locations are +1. */
#include "store/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct profile *profile_new(enum profile_format fmt)
{
    struct profile *p = hp_xcalloc(1, sizeof(*p));
    hp_arena_init(&p->arena);
    hp_strtab_init(&p->strings, &p->arena);
    hp_map64_init(&p->loc_index);
    p->format = fmt;
    p->period = 1;
    return p;
}

void profile_free(struct profile *p)
{
    if (!p)
        return;
    free(p->samples);
    free(p->thread_samples);
    free(p->threads);
    free(p->stacks);
    free(p->stack_locs);
    free(p->locs);
    free(p->frames);
    free(p->mappings);
    hp_map64_release(&p->loc_index);
    hp_strtab_release(&p->strings);
    hp_arena_release(&p->arena);
    free(p);
}

const char *profile_format_name(enum profile_format fmt)
{
    switch (fmt) {
    case PROFILE_FORMAT_JEMALLOC:
        return "jemalloc";
    case PROFILE_FORMAT_GPERF:
        return "gperftools";
    case PROFILE_FORMAT_PPROF:
        return "pprof";
    case PROFILE_FORMAT_COLLAPSED:
        return "collapsed";
    case PROFILE_FORMAT_UNKNOWN:
        break;
    }
    return "unknown";
}

static const char *value_names[PV_COUNT] = { "inuse_objects", "inuse_space", "alloc_objects",
                                             "alloc_space" };

const char *profile_value_name(enum profile_value v)
{
    return (unsigned)v < PV_COUNT ? value_names[v] : "?";
}

int profile_value_parse(const char *name, enum profile_value *ret)
{
    while (*name == '-')
        name++;
    for (int i = 0; i < PV_COUNT; i++)
        if (strcmp(name, value_names[i]) == 0) {
            *ret = (enum profile_value)i;
            return 0;
        }
    return HP_EPARSE;
}

const char *profile_intern(struct profile *p, const char *s, size_t n)
{
    return hp_strtab_intern(&p->strings, s, n);
}

static uint32_t location_new(struct profile *p, uint64_t address, uint32_t flags)
{
    p->locs = hp_xgrow(p->locs, &p->locs_cap, p->nlocs + 1, sizeof(*p->locs));
    uint32_t idx = (uint32_t)p->nlocs++;
    p->locs[idx] = (struct profile_location){ .address = address, .flags = flags };
    return idx;
}

uint32_t profile_location_for_address(struct profile *p, uint64_t address)
{
    uint32_t idx;
    if (hp_map64_get(&p->loc_index, address, &idx))
        return idx;
    idx = location_new(p, address, 0);
    (void)hp_map64_put(&p->loc_index, address, idx, &idx);
    return idx;
}

uint32_t profile_location_new(struct profile *p, uint64_t address, uint32_t mapping)
{
    uint32_t idx = location_new(p, address, 0);
    p->locs[idx].mapping = mapping;
    return idx;
}

uint32_t profile_location_for_name(struct profile *p, const char *name, size_t n)
{
    const char *s = profile_intern(p, name, n);
    /* Interned pointers are unique per string; tag them so they never collide
     * with a real address (user-space addresses have the top bit clear). */
    uint64_t key = (uint64_t)(uintptr_t)s | (UINT64_C(1) << 63);
    uint32_t idx;
    if (hp_map64_get(&p->loc_index, key, &idx))
        return idx;
    idx = location_new(p, 0, PROFILE_LOC_NAMED | PROFILE_LOC_SYMBOLIZED);
    struct profile_frame f = { .function = s };
    profile_location_set_frames(p, idx, &f, 1);
    (void)hp_map64_put(&p->loc_index, key, idx, &idx);
    return idx;
}

void profile_location_set_frames(struct profile *p, uint32_t loc,
                                 const struct profile_frame *frames, uint32_t n)
{
    struct profile_location *l = &p->locs[loc];
    if (n <= l->nframes) {
        /* Reuse the slot (re-symbolization with fewer or equal frames). */
    } else {
        p->frames = hp_xgrow(p->frames, &p->frames_cap, p->nframes + n, sizeof(*p->frames));
        l->frame_off = (uint32_t)p->nframes;
        p->nframes += n;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct profile_frame *f = &p->frames[l->frame_off + i];
        f->function = frames[i].function
                          ? profile_intern(p, frames[i].function, strlen(frames[i].function))
                          : NULL;
        f->file = frames[i].file ? profile_intern(p, frames[i].file, strlen(frames[i].file))
                                 : NULL;
        f->line = frames[i].line;
    }
    l->nframes = n;
}

void profile_reserve(struct profile *p, size_t stacks, size_t stack_locs, size_t samples)
{
    p->stacks = hp_xgrow(p->stacks, &p->stacks_cap, p->nstacks + stacks + 1, sizeof(*p->stacks));
    p->stack_locs = hp_xgrow(p->stack_locs, &p->stack_locs_cap, p->nstack_locs + stack_locs + 1,
                             sizeof(*p->stack_locs));
    p->samples = hp_xgrow(p->samples, &p->samples_cap, p->nsamples + samples + 1,
                          sizeof(*p->samples));
}

uint32_t profile_stack_add_unset(struct profile *p, uint32_t n)
{
    if (p->nstack_locs + n > p->stack_locs_cap)
        p->stack_locs = hp_xgrow(p->stack_locs, &p->stack_locs_cap, p->nstack_locs + n,
                                 sizeof(*p->stack_locs));
    if (p->nstacks == p->stacks_cap)
        p->stacks = hp_xgrow(p->stacks, &p->stacks_cap, p->nstacks + 1, sizeof(*p->stacks));
    p->stacks[p->nstacks] = (struct profile_stack){ .off = (uint32_t)p->nstack_locs, .n = n };
    p->nstack_locs += n;
    return (uint32_t)p->nstacks++;
}

uint32_t profile_stack_add(struct profile *p, const uint32_t *locs, uint32_t n)
{
    uint32_t st = profile_stack_add_unset(p, n);
    memcpy(p->stack_locs + p->stacks[st].off, locs, n * sizeof(*locs));
    return st;
}

struct profile_sample *profile_sample_add(struct profile *p, uint32_t stack, uint32_t thread,
                                          const int64_t raw[PV_COUNT])
{
    struct profile_sample *s;
    if (thread == 0) {
        if (p->nsamples == p->samples_cap)
            p->samples = hp_xgrow(p->samples, &p->samples_cap, p->nsamples + 1, sizeof(*s));
        s = &p->samples[p->nsamples++];
    } else {
        if (p->nthread_samples == p->thread_samples_cap)
            p->thread_samples = hp_xgrow(p->thread_samples, &p->thread_samples_cap,
                                         p->nthread_samples + 1, sizeof(*s));
        s = &p->thread_samples[p->nthread_samples++];
    }
    s->stack = stack;
    s->thread = thread;
    for (int i = 0; i < PV_COUNT; i++) {
        s->raw[i] = raw[i];
        s->value[i] = (double)raw[i];
    }
    return s;
}

uint32_t profile_thread_add(struct profile *p, uint64_t id, const char *name, size_t name_len,
                            const int64_t raw[PV_COUNT])
{
    p->threads = hp_xgrow(p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads));
    struct profile_thread *t = &p->threads[p->nthreads];
    t->id = id;
    t->name = name && name_len ? profile_intern(p, name, name_len) : NULL;
    for (int i = 0; i < PV_COUNT; i++)
        t->raw[i] = raw ? raw[i] : 0;
    return (uint32_t)++p->nthreads;
}

void profile_mapping_add(struct profile *p, const struct profile_mapping *m)
{
    p->mappings = hp_xgrow(p->mappings, &p->mappings_cap, p->nmappings + 1,
                           sizeof(*p->mappings));
    struct profile_mapping *d = &p->mappings[p->nmappings++];
    *d = *m;
    d->path = m->path ? profile_intern(p, m->path, strlen(m->path)) : "";
    d->build_id = m->build_id ? profile_intern(p, m->build_id, strlen(m->build_id)) : NULL;
}

/* Sort order of mappings: by start, then by original position, so the sort
 * is stable and locations that already name a mapping can be renumbered. */
struct mapping_order {
    uint64_t start;
    uint32_t idx;
};

static int mapping_cmp(const void *a, const void *b)
{
    const struct mapping_order *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort mappings by start and renumber the mapping of every location that
 * already has one (readers such as pprof's know each location's mapping
 * before the profile is finished; two mappings may share a start). */
static void mappings_sort(struct profile *p)
{
    size_t n = p->nmappings;
    struct mapping_order *ord = hp_xmalloc(n * sizeof(*ord));
    for (size_t i = 0; i < n; i++)
        ord[i] = (struct mapping_order){ .start = p->mappings[i].start, .idx = (uint32_t)i };
    hp_qsort(ord, n, sizeof(*ord), mapping_cmp);
    struct profile_mapping *sorted = hp_xmalloc(n * sizeof(*sorted));
    uint32_t *renum = hp_xmalloc(n * sizeof(*renum)); /* old index -> new index + 1 */
    for (size_t i = 0; i < n; i++) {
        sorted[i] = p->mappings[ord[i].idx];
        renum[ord[i].idx] = (uint32_t)i + 1;
    }
    memcpy(p->mappings, sorted, n * sizeof(*sorted));
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (l->mapping && l->mapping <= n)
            l->mapping = renum[l->mapping - 1];
    }
    free(renum);
    free(sorted);
    free(ord);
}

uint32_t profile_mapping_find(const struct profile *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nmappings;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->mappings[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const struct profile_mapping *m = &p->mappings[lo - 1];
    return addr < m->limit ? (uint32_t)lo : 0;
}

double profile_scale_factor(enum profile_scaling s, uint64_t period, int64_t count,
                            int64_t bytes)
{
    if (count == 0 || bytes == 0 || period <= 1)
        return 1.0;
    double ratio = ((double)bytes / (double)count) / (double)period;
    switch (s) {
    case PROFILE_SCALING_V2:
        /* -expm1(-x) == 1 - exp(-x), without cancellation for small x. */
        return 1.0 / -expm1(-ratio);
    case PROFILE_SCALING_V1:
        return ratio < 1.0 ? 1.0 / ratio : 1.0;
    case PROFILE_SCALING_NONE:
        break;
    }
    return 1.0;
}

void profile_sample_unsample(const struct profile *p, struct profile_sample *s)
{
    for (int pair = 0; pair < PV_COUNT; pair += 2) {
        double f = profile_scale_factor(p->scaling, p->period, s->raw[pair], s->raw[pair + 1]);
        s->value[pair] = (double)s->raw[pair] * f;
        s->value[pair + 1] = (double)s->raw[pair + 1] * f;
    }
}

void profile_unsample(struct profile *p)
{
    for (size_t i = 0; i < p->nsamples; i++)
        profile_sample_unsample(p, &p->samples[i]);
    for (size_t i = 0; i < p->nthread_samples; i++)
        profile_sample_unsample(p, &p->thread_samples[i]);
}

void profile_finish(struct profile *p)
{
    if (p->nmappings > 1)
        mappings_sort(p);
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (!(l->flags & PROFILE_LOC_NAMED) && !l->mapping)
            l->mapping = profile_mapping_find(p, l->address);
    }
    profile_unsample(p);
}

void profile_totals(const struct profile *p, double ret[PV_COUNT])
{
    for (int i = 0; i < PV_COUNT; i++)
        ret[i] = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        for (int v = 0; v < PV_COUNT; v++)
            ret[v] += p->samples[i].value[v];
}

const char *profile_address_label(const struct profile *p, uint64_t address, uint32_t mapping,
                                  char *out, size_t outsz, bool with_object)
{
    if (with_object && mapping) {
        const char *path = p->mappings[mapping - 1].path;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (*base) {
            snprintf(out, outsz, "0x%016llx %s", (unsigned long long)address, base);
            return out;
        }
    }
    snprintf(out, outsz, "0x%016llx", (unsigned long long)address);
    return out;
}

const char *profile_frame_label(const struct profile *p, uint32_t loc, uint32_t i, char *out,
                                size_t outsz, bool with_object)
{
    const struct profile_location *l = &p->locs[loc];
    if (i < l->nframes && p->frames[l->frame_off + i].function)
        return p->frames[l->frame_off + i].function;
    return profile_address_label(p, l->address, l->mapping, out, outsz, with_object);
}

void profile_resolved_free(struct profile_resolved *r)
{
    if (!r)
        return;
    free(r->stack_off);
    free(r->locs);
    free(r->loc);
    free(r->names);
    profile_free(r->profile);
    hp_arena_release(&r->arena);
    free(r);
}
