/* Generator of realistic profiles for store tests and benchmarks (gen.h).
 *
 * A node's code is a call tree: functions 0..nfuncs-1 spread over a main
 * binary and two libraries, each call site a distinct return address. Stacks
 * are random root-to-leaf walks (depth 8..32), so callers are shared the way
 * real server stacks share their dispatch loops. Values follow jemalloc's
 * sampling (period 512 KiB, Poisson un-sampling). Hour h changes ~3% of the
 * counts and swaps ~0.5% of the stacks, like a steady node. */
#include "tests/store/gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rnd(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

#define MAIN_START UINT64_C(0x400000)
#define LIB1_START UINT64_C(0x7f1000000000)
#define LIB2_START UINT64_C(0x7f2000000000)

static const char *mod_name[3] = { "/opt/doris/be/lib/doris_be", "/usr/lib/libstdc++.so.6",
                                   "/usr/lib/libjemalloc.so.2" };
static const char *ns_name[] = { "doris::vectorized", "doris::io", "doris::pipeline",
                                 "doris::segment_v2", "std", "doris::MemTracker" };
static const char *verbs[] = { "Aggregate", "Read", "Build", "Merge", "Flush", "Alloc",
                               "Insert", "Serialize", "Hash", "Compact" };
static const char *nouns[] = { "Block", "Column", "Page", "Segment", "Tablet", "Chunk",
                               "Buffer", "Index", "Rowset", "Fragment" };

static int cmp_fa(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct profile *gen_profile(const struct gen_params *gp, char **ret_raw, size_t *ret_raw_len)
{
    uint64_t b = gp->build ? gp->build : gp->seed;
    uint64_t code = b * 7919 + 1;
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    p->scaling = PROFILE_SCALING_V2;
    p->period = 524288;
    p->time_ns = (int64_t)(1763798400 + gp->hour * 3600) * 1000000000;
    p->hint = profile_intern(p, "jemalloc heap_v2", 16);
    uint64_t bias = gp->load_bias;
    /* Each seed is its own build of the binaries, unless a build is given.
     * The second library has no build id (an object known by its path on
     * its host only), except in a given build: a fleet's libraries carry
     * theirs (Debian's do). */
    char bid0[48], bid1[48], bid2[48];
    snprintf(bid1, sizeof(bid1), "77e1c0de5eed000011112222%016llx", (unsigned long long)b);
    snprintf(bid0, sizeof(bid0), "4f1c2a9e8d7b6a5f4e3d2c1b0a998877%08llx",
             (unsigned long long)(b & 0xffffffff));
    snprintf(bid2, sizeof(bid2), "a1b2c3d4e5f60718293a4b5c6d7e8f90%08llx",
             (unsigned long long)(b & 0xffffffff));
    struct profile_mapping maps[3] = {
        { MAIN_START + bias, MAIN_START + bias + 0x4000000, 0, 1001, mod_name[0],
          bid0, "r-xp", PROFILE_MAP_EXEC },
        { LIB1_START + bias, LIB1_START + bias + 0x200000, 0x1000, 1002 + b * 10, mod_name[1], gp->build ? bid1 : NULL,
          "r-xp", PROFILE_MAP_EXEC },
        { LIB2_START + bias, LIB2_START + bias + 0x100000, 0x2000, 1003, mod_name[2],
          bid2, "r-xp", PROFILE_MAP_EXEC },
    };
    for (int i = 0; i < 3; i++)
        profile_mapping_add(p, &maps[i]);

    uint32_t nf = gp->nfuncs ? gp->nfuncs : 4000;
    /* Per function: module, base address, a name, a file. */
    uint64_t *fbase = hp_xcalloc(nf, sizeof(*fbase));
    int *fmod = hp_xcalloc(nf, sizeof(*fmod));
    char **fname = hp_xcalloc(nf, sizeof(*fname));
    char **ffile = hp_xcalloc(nf, sizeof(*ffile));
    for (uint32_t f = 0; f < nf; f++) {
        uint64_t r = rnd(&code);
        fmod[f] = f < 8 ? 2 : (r % 20 == 0 ? 1 : 0);
        const struct profile_mapping *m = &maps[fmod[f]];
        fbase[f] = m->start + 0x1000 + (uint64_t)f * 0x400 % (m->limit - m->start - 0x2000);
        if (fmod[f] == 2)
            fname[f] = hp_xasprintf("je_%s_%u", f < 4 ? "prof_backtrace" : "malloc_default", f);
        else
            fname[f] = hp_xasprintf("%s::%s%s::%s%u(%s const&)", ns_name[r % 6],
                                    nouns[(r >> 8) % 10], verbs[(r >> 16) % 10],
                                    verbs[(r >> 24) % 10], f, nouns[(r >> 32) % 10]);
        ffile[f] = hp_xasprintf("be/src/%s/%s_%u.cpp", nouns[(r >> 40) % 10],
                                verbs[(r >> 48) % 10], f % 97);
    }

    uint64_t rs = b * 104729 + 7;
    uint32_t nthreads = gp->nthreads;
    for (uint32_t t = 0; t < nthreads; t++) {
        int64_t zero[PV_COUNT] = { 0 };
        char name[32];
        int n = snprintf(name, sizeof(name), "pipe_%u", t);
        (void)profile_thread_add(p, 100 + t, name, (size_t)n, zero);
    }
    uint64_t hs = gp->seed * 31 + gp->hour * 1000003 + 5;
    struct hp_buf raw = HP_BUF_INIT(0);
    (void)hp_buf_printf(&raw, "heap_v2/%llu\n", (unsigned long long)p->period);
    int64_t tot[PV_COUNT] = { 0 };
    struct hp_buf body = HP_BUF_INIT(0);
    uint32_t locs[40];
    for (uint32_t i = 0; i < gp->nstacks; i++) {
        /* Stack identity: mostly stable; ~0.5% replaced per hour, by a
         * path of its own (each seed its own build), or in a given build by
         * the build's other path to the same place (one per stack, listed
         * where the stack is), as a fleet's nodes on one version take the
         * same other paths through the same code. */
        uint64_t ss = rs + i * 0x9e37;
        uint64_t hr = rnd(&hs);
        if (hr % 200 == 0 && gp->build)
            ss = rs + (gp->nstacks + i) * 0x9e37;
        else if (hr % 200 == 0)
            ss += (uint64_t)gp->hour << 32;
        uint32_t depth = 8 + (uint32_t)(rnd(&ss) % 25);
        uint32_t n = 0;
        /* Leaf: allocator frames, then a walk from the leaf function to
         * callers chosen deterministically (a tree: callers depend on the
         * callee, so prefixes are shared). */
        locs[n++] = profile_location_for_address(p, fbase[rnd(&ss) % 4] + 0x10);
        locs[n++] = profile_location_for_address(p, fbase[4 + rnd(&ss) % 4] + 0x20);
        uint32_t f = 8 + (uint32_t)(rnd(&ss) % (nf - 8));
        for (uint32_t d = 2; d < depth && n < 40; d++) {
            uint64_t site = fbase[f] + 0x30 + (rnd(&ss) % 4) * 8;
            locs[n++] = profile_location_for_address(p, site - 1);
            uint64_t c = f * UINT64_C(2654435761) + d;
            f = 8 + (uint32_t)(rnd(&c) % (d < 6 || nf < 72 ? nf - 8 : 64));
        }
        uint32_t st = profile_stack_add(p, locs, n);
        int64_t v[PV_COUNT];
        uint64_t vs = ss ^ 0x55 ^ (gp->build ? gp->seed * 0x2545f4914f6cdd1dULL : 0);
        int64_t size = 16 << (rnd(&vs) % 12);
        int64_t cnt = 1 + (int64_t)(rnd(&vs) % 40);
        if (hr % 33 == 1)
            cnt += (int64_t)(gp->hour % 7); /* drift */
        v[PV_INUSE_OBJECTS] = cnt;
        v[PV_INUSE_SPACE] = cnt * size;
        v[PV_ALLOC_OBJECTS] = 0;
        v[PV_ALLOC_SPACE] = 0;
        (void)profile_sample_add(p, st, 0, v);
        for (int k = 0; k < PV_COUNT; k++)
            tot[k] += v[k];
        (void)hp_buf_puts(&body, "@");
        for (uint32_t k = 0; k < n; k++)
            (void)hp_buf_printf(&body, " 0x%llx",
                                (unsigned long long)(p->locs[locs[k]].address + (k ? 1 : 0)));
        (void)hp_buf_printf(&body, "\n  t*: %lld: %lld [0: 0]\n", (long long)v[0],
                            (long long)v[1]);
        if (nthreads) {
            uint32_t t = (uint32_t)(vs % nthreads) + 1;
            (void)profile_sample_add(p, st, t, v);
            (void)hp_buf_printf(&body, "  t%u: %lld: %lld [0: 0]\n", t - 1, (long long)v[0],
                                (long long)v[1]);
            for (int k = 0; k < PV_COUNT; k++)
                p->threads[t - 1].raw[k] += v[k];
        }
    }
    (void)hp_buf_printf(&raw, "  t*: %lld: %lld [0: 0]\n", (long long)tot[0], (long long)tot[1]);
    for (uint32_t t = 0; t < nthreads; t++)
        (void)hp_buf_printf(&raw, "  t%u: %lld: %lld [0: 0]\n", t,
                            (long long)p->threads[t].raw[0], (long long)p->threads[t].raw[1]);
    (void)hp_buf_append(&raw, body.data, body.len);
    (void)hp_buf_puts(&raw, "\nMAPPED_LIBRARIES:\n");
    for (int i = 0; i < 3; i++)
        (void)hp_buf_printf(&raw, "%llx-%llx %s %08llx 08:01 %llu %s\n",
                            (unsigned long long)maps[i].start, (unsigned long long)maps[i].limit,
                            maps[i].perms, (unsigned long long)maps[i].offset,
                            (unsigned long long)maps[i].inode, maps[i].path);
    hp_buf_release(&body);
    p->has_header_totals = true;
    for (int k = 0; k < PV_COUNT; k++)
        p->header_raw[k] = tot[k];

    profile_finish(p);
    if (gp->symbolize) {
        /* Functions by address, to find the one each site lies in. */
        struct fa {
            uint64_t a;
            uint32_t f;
        } *fa = hp_xcalloc(nf, sizeof(*fa));
        for (uint32_t f = 0; f < nf; f++)
            fa[f] = (struct fa){ fbase[f], f };
        hp_qsort(fa, nf, sizeof(*fa), cmp_fa);
        for (size_t i = 0; i < p->nlocs; i++) {
            struct profile_location *l = &p->locs[i];
            size_t lo = 0, hi = nf;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (fa[mid].a <= l->address)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            uint32_t best = lo ? fa[lo - 1].f : 0;
            uint64_t bd = l->address - fbase[best];
            struct profile_frame fr[2] = {
                { fname[best], ffile[best], 100 + (uint32_t)(bd & 0xff) },
                { fname[(best * 7 + 3) % nf], ffile[(best * 7 + 3) % nf], 42 },
            };
            /* Every 5th site has an inlined callee. */
            profile_location_set_frames(p, (uint32_t)i, fr, best % 5 == 0 ? 2 : 1);
            l->flags |= PROFILE_LOC_SYMBOLIZED;
            if (fmod[best] == 2)
                l->flags |= PROFILE_LOC_ALLOCATOR;
        }
        free(fa);
    }
    for (uint32_t f = 0; f < nf; f++) {
        free(fname[f]);
        free(ffile[f]);
    }
    free(fname);
    free(ffile);
    free(fbase);
    free(fmod);
    if (ret_raw)
        *ret_raw = hp_buf_detach(&raw, ret_raw_len);
    hp_buf_release(&raw);
    return p;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void canon_loc(const struct profile *p, uint32_t li, struct hp_buf *b)
{
    const struct profile_location *l = &p->locs[li];
    (void)hp_buf_printf(b, " %llx/%x[", (unsigned long long)l->address, l->flags);
    for (uint32_t k = 0; k < l->nframes; k++) {
        const struct profile_frame *f = &p->frames[l->frame_off + k];
        (void)hp_buf_printf(b, "%s%s@%s:%u", k ? "|" : "", f->function ? f->function : "?",
                            f->file ? f->file : "?", f->line);
    }
    if (l->mapping)
        (void)hp_buf_printf(b, "]m%s", p->mappings[l->mapping - 1].path);
    else
        (void)hp_buf_puts(b, "]");
}

static char *canon_sample(const struct profile *p, const struct profile_sample *s)
{
    struct hp_buf b = HP_BUF_INIT(0);
    (void)hp_buf_printf(&b, "sample t%u", s->thread);
    for (int v = 0; v < PV_COUNT; v++)
        (void)hp_buf_printf(&b, " %lld=%.17g", (long long)s->raw[v], s->value[v]);
    (void)hp_buf_puts(&b, " :");
    const uint32_t *locs = profile_stack_locs(p, s->stack);
    for (uint32_t i = 0; i < p->stacks[s->stack].n; i++)
        canon_loc(p, locs[i], &b);
    return hp_buf_detach(&b, NULL);
}

char *gen_canon(const struct profile *p)
{
    struct hp_buf b = HP_BUF_INIT(0);
    (void)hp_buf_printf(&b, "format %d scaling %d period %llu alloc %d hdr %d", p->format,
                        p->scaling, (unsigned long long)p->period, p->has_alloc,
                        p->has_header_totals);
    for (int v = 0; v < PV_COUNT; v++)
        (void)hp_buf_printf(&b, " %lld", (long long)p->header_raw[v]);
    (void)hp_buf_printf(&b, " time %lld hint %s units", (long long)p->time_ns,
                        p->hint ? p->hint : "(null)");
    for (int v = 0; v < PV_COUNT; v++)
        (void)hp_buf_printf(&b, " %s", p->value_unit[v] ? p->value_unit[v] : "(null)");
    (void)hp_buf_puts(&b, "\n");
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        (void)hp_buf_printf(&b, "map %llx-%llx %llx %llu %s %x %s %s\n",
                            (unsigned long long)m->start, (unsigned long long)m->limit,
                            (unsigned long long)m->offset, (unsigned long long)m->inode,
                            m->perms, m->flags, m->path, m->build_id ? m->build_id : "(null)");
    }
    for (size_t i = 0; i < p->nthreads; i++) {
        const struct profile_thread *t = &p->threads[i];
        (void)hp_buf_printf(&b, "thread %zu %llu %s %lld %lld %lld %lld\n", i + 1,
                            (unsigned long long)t->id, t->name ? t->name : "(null)",
                            (long long)t->raw[0], (long long)t->raw[1], (long long)t->raw[2],
                            (long long)t->raw[3]);
    }
    size_t n = p->nsamples + p->nthread_samples;
    char **lines = hp_xcalloc(n + 1, sizeof(*lines));
    for (size_t i = 0; i < p->nsamples; i++)
        lines[i] = canon_sample(p, &p->samples[i]);
    for (size_t i = 0; i < p->nthread_samples; i++)
        lines[p->nsamples + i] = canon_sample(p, &p->thread_samples[i]);
    hp_qsort(lines, n, sizeof(*lines), cmp_str);
    for (size_t i = 0; i < n; i++) {
        (void)hp_buf_puts(&b, lines[i]);
        (void)hp_buf_puts(&b, "\n");
        free(lines[i]);
    }
    free(lines);
    return hp_buf_detach(&b, NULL);
}
