/* jemalloc prof.dump reader ("heap_v2/<period>"), following jeprof's
 * ReadThreadedHeapProfile:
 *
 *   heap_v2/524288
 *     t*: 28106: 56637512 [0: 0]            totals (header)
 *     t3: 352: 16777344 [0: 0] worker-3     per-thread totals, optional name
 *   @ 0x5f86da8 0x5f5a1dc 0x29e4d4e         a stack, leaf first
 *     t*: 13: 6688 [0: 0]                   its counts, all threads
 *     t3: 12: 6496 [0: 0]                   its counts in thread 3
 *
 *   MAPPED_LIBRARIES:
 *   /proc/<pid>/maps verbatim
 *
 * Counts are "inuse objects: inuse bytes [alloc objects: alloc bytes]". The
 * header totals are kept as stated but never used as the profile's total:
 * jemalloc 5.3 unbiases per record, so totals come from the records, as
 * jeprof computes them. */
#include "collector/ingest/ingest-internal.h"

#include <string.h>

static int bad_counts(struct ingest_parser *ps, const char *line, size_t len,
                      struct hp_buf *err, int r)
{
    char ex[200];
    if (r == HP_ETOOBIG)
        return ingest__error(ps, err, HP_EPARSE, "count larger than 2^63-1 in \"%s\"",
                             ingest__excerpt(line, len, ex, sizeof(ex)));
    return ingest__error(ps, err, HP_EPARSE,
                         "expected \"t<thread>: <objects>: <bytes> [<objects>: <bytes>]\", "
                         "got \"%s\"",
                         ingest__excerpt(line, len, ex, sizeof(ex)));
}

/* "t*:" or "t<uid>:" -> 1 for '*', 0 for a uid (in *ret_uid); <0 if neither. */
static int thread_tag(const char *s, const char *end, uint64_t *ret_uid, const char **ret_next)
{
    if (s >= end || *s != 't')
        return HP_EPARSE;
    s++;
    if (s < end && *s == '*') {
        if (s + 1 >= end || s[1] != ':')
            return HP_EPARSE;
        *ret_next = s + 2;
        return 1;
    }
    const char *d = s;
    while (d < end && (unsigned)(*d - '0') <= 9)
        d++;
    if (d == s || d >= end || *d != ':' || hp_parse_u64(s, (size_t)(d - s), ret_uid) < 0)
        return HP_EPARSE;
    *ret_next = d + 1;
    return 0;
}

static uint32_t thread_index(struct ingest_parser *ps, uint64_t uid, const char *name,
                             size_t name_len, const int64_t raw[PV_COUNT], bool *ret_new)
{
    uint32_t idx;
    *ret_new = false;
    if (hp_map64_get(&ps->thread_ids, uid, &idx))
        return idx;
    idx = profile_thread_add(ps->p, uid, name, name_len, raw);
    (void)hp_map64_put(&ps->thread_ids, uid, idx, &idx);
    *ret_new = true;
    return idx;
}

static int jemalloc_line(struct ingest_parser *ps, const char *line, size_t len,
                         struct hp_buf *err)
{
    const char *s = line, *end = line + len;
    char ex[200];
    if (ps->in_maps)
        return ingest__maps_line(ps, line, len, err);
    if (!ps->header_done) {
        /* Checked by detection; the period must be a positive integer. */
        uint64_t period;
        if (len < 9 || memcmp(line, "heap_v2/", 8) != 0 ||
            hp_parse_u64(line + 8, len - 8, &period) < 0 || period == 0)
            return ingest__error(ps, err, HP_EPARSE,
                                 "expected \"heap_v2/<sample period>\" with a positive period, "
                                 "got \"%s\"",
                                 ingest__excerpt(line, len, ex, sizeof(ex)));
        ps->p->period = period;
        ps->p->scaling = PROFILE_SCALING_V2;
        ps->header_done = true;
        return 0;
    }
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s == end)
        return 0;
    if (*s == '@') {
        if (ps->stack_open)
            return ingest__error(ps, err, HP_EPARSE,
                                 "the previous stack has no \"t*:\" counts line");
        int r = ingest__stack_from_hex(ps, s + 1, (size_t)(end - s - 1), &ps->cur_stack, err);
        if (r < 0)
            return r;
        ps->stack_open = true;
        return 0;
    }
    if (*s == 't') {
        uint64_t uid = 0;
        const char *next;
        int all = thread_tag(s, end, &uid, &next);
        if (all < 0)
            return bad_counts(ps, line, len, err, all);
        int64_t raw[PV_COUNT];
        size_t used;
        int r = ingest__counts(next, (size_t)(end - next), raw, &used);
        if (r < 0)
            return bad_counts(ps, line, len, err, r);
        const char *rest = next + used;
        if (ps->p->nstacks == 0) {
            /* Header section: totals and per-thread summaries. */
            if (all) {
                memcpy(ps->p->header_raw, raw, sizeof(raw));
                ps->p->has_header_totals = true;
            } else {
                if (ps->p->nthreads >= ps->lim.max_threads)
                    return ingest__error(ps, err, HP_ETOOBIG,
                                         "more than %zu threads (the limit)",
                                         ps->lim.max_threads);
                while (rest < end && (*rest == ' ' || *rest == '\t'))
                    rest++;
                bool fresh;
                (void)thread_index(ps, uid, rest, (size_t)(end - rest), raw, &fresh);
                if (!fresh)
                    return ingest__error(ps, err, HP_EPARSE, "thread t%llu listed twice",
                                         (unsigned long long)uid);
            }
            return 0;
        }
        while (rest < end && (*rest == ' ' || *rest == '\t'))
            rest++;
        if (rest != end)
            return bad_counts(ps, line, len, err, HP_EPARSE);
        if (raw[PV_ALLOC_OBJECTS] || raw[PV_ALLOC_SPACE])
            ps->p->has_alloc = true;
        if (all) {
            if (!ps->stack_open)
                return ingest__error(ps, err, HP_EPARSE,
                                     "a second \"t*:\" line for the same stack");
            (void)profile_sample_add(ps->p, ps->cur_stack, 0, raw);
            ps->stack_open = false;
        } else {
            if (ps->stack_open)
                return ingest__error(ps, err, HP_EPARSE,
                                     "per-thread counts before the stack's \"t*:\" line");
            bool fresh;
            uint32_t t = thread_index(ps, uid, NULL, 0, NULL, &fresh);
            if (fresh && ps->p->nthreads > ps->lim.max_threads)
                return ingest__error(ps, err, HP_ETOOBIG, "more than %zu threads (the limit)",
                                     ps->lim.max_threads);
            (void)profile_sample_add(ps->p, ps->cur_stack, t, raw);
        }
        return 0;
    }
    if ((size_t)(end - s) >= 17 && memcmp(s, "MAPPED_LIBRARIES:", 17) == 0) {
        if (ps->stack_open)
            return ingest__error(ps, err, HP_EPARSE, "the last stack has no \"t*:\" counts line");
        ps->in_maps = true;
        return 0;
    }
    if ((size_t)(end - s) >= 15 && memcmp(s, "--- Memory map:", 15) == 0) {
        ps->in_maps = true;
        return 0;
    }
    return ingest__error(ps, err, HP_EPARSE,
                         "expected \"@ <addresses>\", \"t<thread>: <counts>\" or "
                         "\"MAPPED_LIBRARIES:\", got \"%s\"",
                         ingest__excerpt(line, len, ex, sizeof(ex)));
}

static int jemalloc_end(struct ingest_parser *ps, struct hp_buf *err)
{
    if (!ps->header_done)
        return ingest__error(ps, err, HP_EPARSE, "missing \"heap_v2/<period>\" header");
    if (ps->stack_open)
        return ingest__error(ps, err, HP_EPARSE,
                             "input ends after a stack line without its \"t*:\" counts "
                             "(truncated dump?)");
    /* Version hints. jemalloc 5.3 unbiases each record before printing it
     * (opt.prof_unbias), so in a sampled dump the header's t* totals differ
     * from the sum of the records; earlier versions print raw counts whose
     * sum equals the header. Readers must apply jeprof's formula either way;
     * the hint tells a user which figures the node's jemalloc produced. */
    struct profile *p = ps->p;
    int64_t sum = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        sum = hp_i64_add_sat(sum, p->samples[i].raw[PV_INUSE_SPACE]);
    const char *hint = NULL;
    if (p->period <= 1)
        hint = "jemalloc heap_v2, every allocation recorded";
    else if (p->has_header_totals && sum != p->header_raw[PV_INUSE_SPACE])
        hint = "jemalloc >= 5.3 (records unbiased per stack: header total differs from their sum)";
    else if (p->has_header_totals)
        hint = "jemalloc < 5.3 or prof_unbias:false (header total equals the sum of records)";
    if (hint)
        p->hint = profile_intern(p, hint, strlen(hint));
    if (!ps->in_maps)
        return ingest__error(ps, err, HP_EPARSE,
                             "input ends before the \"MAPPED_LIBRARIES:\" section that jemalloc "
                             "always writes (truncated dump?)");
    return 0;
}

int ingest__jemalloc_begin(struct ingest_parser *ps, struct hp_buf *err)
{
    ps->line = jemalloc_line;
    ps->end = jemalloc_end;
    return 0;
}
