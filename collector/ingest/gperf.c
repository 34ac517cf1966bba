/* gperftools heap profiles, with the header rules of jeprof's ReadHeapProfile:
 *
 *   heap profile:   1246:  8800744 [  1246:  8800744] @ heapprofile
 *   heap profile:   1922: 127792360 [  1922: 127792360] @ heap_v2/524288
 *   heap profile:     12:   102400 [    40:   409600] @ heap/1048576
 *   heap profile: ... @ growth
 *     <objs>: <bytes> [<objs>: <bytes>] @ 0x... 0x...     one per bucket
 *   MAPPED_LIBRARIES: (or --- Memory map: ---)
 *
 * Type "heapprofile", or any type without "heap" (growth): no scaling. A type
 * containing "_v2": Poisson scaling with the stated period. Any other "heap"
 * type: v1 scaling with half the stated period. No type at all: v1 when the
 * in-use and alloc pairs are equal (an old remote-heap profile), else none.
 * A v1/v2 profile without a period uses 128 KiB, as jeprof does.
 *
 * Go's runtime/pprof writes the same text (debug=1 heap profiles) with a
 * "heap/N" header where N is twice runtime.MemProfileRate, "#\t0x..." frame
 * comments, an empty stack for allocations it could not unwind ("1: 288
 * [2: 296] @") and a "# runtime.MemStats" trailer. go tool pprof scales
 * "heap/N" with the Poisson (v2) formula at N/2; jeprof uses v1 there. A file
 * that shows any Go mark is scaled as go pprof does, so totals match
 * `go tool pprof -raw`; others keep jeprof's rule. An empty stack becomes one
 * "<no stack>" frame. */
#include "collector/ingest/ingest-internal.h"

#include <string.h>

static int gperf_header(struct ingest_parser *ps, const char *line, size_t len,
                        struct hp_buf *err)
{
    const char *s = line + 13, *end = line + len; /* after "heap profile:" */
    char ex[200];
    int64_t raw[PV_COUNT];
    size_t used;
    if (ingest__counts(s, (size_t)(end - s), raw, &used) < 0)
        return ingest__error(ps, err, HP_EPARSE,
                             "expected \"heap profile: <objects>: <bytes> [<objects>: <bytes>] "
                             "@ <type>\", got \"%s\"",
                             ingest__excerpt(line, len, ex, sizeof(ex)));
    struct profile *p = ps->p;
    memcpy(p->header_raw, raw, sizeof(raw));
    p->has_header_totals = true;
    s += used;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    const char *type = NULL, *period = NULL;
    size_t type_len = 0, period_len = 0;
    if (s < end && *s == '@') {
        s++;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        type = s;
        while (s < end && *s != '/' && *s != ' ')
            s++;
        type_len = (size_t)(s - type);
        if (s < end && *s == '/') {
            period = ++s;
            while (s < end && (unsigned)(*s - '0') <= 9)
                s++;
            period_len = (size_t)(s - period);
        }
    }
    uint64_t stated = 0;
    if (period_len && hp_parse_u64(period, period_len, &stated) < 0)
        return ingest__error(ps, err, HP_EPARSE, "sampling period is not a number in \"%s\"",
                             ingest__excerpt(line, len, ex, sizeof(ex)));
    bool has_heap = false, has_v2 = false;
    for (size_t i = 0; i + 4 <= type_len; i++)
        if (memcmp(type + i, "heap", 4) == 0)
            has_heap = true;
    for (size_t i = 0; i + 3 <= type_len; i++)
        if (memcmp(type + i, "_v2", 3) == 0)
            has_v2 = true;
    if (type_len) {
        if ((type_len == 11 && memcmp(type, "heapprofile", 11) == 0) || !has_heap) {
            p->scaling = PROFILE_SCALING_NONE;
        } else if (has_v2) {
            p->scaling = PROFILE_SCALING_V2;
            p->period = stated;
        } else {
            p->scaling = PROFILE_SCALING_V1;
            p->period = stated / 2;
        }
        p->hint = profile_intern(p, type, type_len);
    } else if (raw[0] == raw[2] && raw[1] == raw[3]) {
        p->scaling = PROFILE_SCALING_V1;
        p->period = 0;
    }
    if (p->scaling != PROFILE_SCALING_NONE && p->period == 0)
        p->period = 128 * 1024;
    if (p->scaling == PROFILE_SCALING_NONE)
        p->period = 1;
    p->has_alloc = true;
    ps->header_done = true;
    return 0;
}

static int gperf_line(struct ingest_parser *ps, const char *line, size_t len, struct hp_buf *err)
{
    char ex[200];
    if (ps->in_maps)
        return ingest__maps_line(ps, line, len, err);
    if (!ps->header_done)
        return gperf_header(ps, line, len, err);
    const char *s = line, *end = line + len;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s == end)
        return 0;
    if (*s == '#') {
        /* Go's frame comments and MemStats trailer; pprof skips any '#' line. */
        size_t n = (size_t)(end - s);
        if ((n >= 3 && s[1] == '\t' && s[2] == '0') ||
            (n >= 18 && memcmp(s, "# runtime.MemStats", 18) == 0))
            ps->go_legacy = true;
        return 0;
    }
    /* The map sentinels may carry decoration around them ("\n--- Memory
     * map: ---"); go pprof looks for them anywhere in the line. */
    if (memmem(s, (size_t)(end - s), "MAPPED_LIBRARIES:", 17) ||
        memmem(s, (size_t)(end - s), "--- Memory map:", 15)) {
        ps->in_maps = true;
        return 0;
    }
    int64_t raw[PV_COUNT];
    size_t used;
    int r = ingest__counts(s, (size_t)(end - s), raw, &used);
    if (r < 0)
        return ingest__error(ps, err, HP_EPARSE,
                             "expected \"<objects>: <bytes> [<objects>: <bytes>] @ <addresses>\", "
                             "got \"%s\"",
                             ingest__excerpt(line, len, ex, sizeof(ex)));
    s += used;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s >= end || *s != '@')
        return ingest__error(ps, err, HP_EPARSE, "expected \"@ <addresses>\" after the counts in \"%s\"",
                             ingest__excerpt(line, len, ex, sizeof(ex)));
    uint32_t stack;
    const char *a = s + 1;
    while (a < end && (*a == ' ' || *a == '\t'))
        a++;
    if (a == end) {
        /* Go writes allocations it could not unwind with no addresses. */
        static const char no_stack[] = "<no stack>";
        ingest__stack_flush(ps);
        uint32_t loc = profile_location_for_name(ps->p, no_stack, sizeof(no_stack) - 1);
        stack = profile_stack_add(ps->p, &loc, 1);
        ps->go_legacy = true;
    } else {
        r = ingest__stack_from_hex(ps, s + 1, (size_t)(end - s - 1), &stack, err);
        if (r < 0)
            return r;
    }
    (void)profile_sample_add(ps->p, stack, 0, raw);
    return 0;
}

static int gperf_end(struct ingest_parser *ps, struct hp_buf *err)
{
    if (!ps->header_done)
        return ingest__error(ps, err, HP_EPARSE, "missing \"heap profile:\" header");
    if (ps->go_legacy && ps->p->scaling == PROFILE_SCALING_V1)
        ps->p->scaling = PROFILE_SCALING_V2; /* the period is already N/2 */
    return 0;
}

int ingest__gperf_begin(struct ingest_parser *ps, struct hp_buf *err)
{
    ps->line = gperf_line;
    ps->end = gperf_end;
    return 0;
}
