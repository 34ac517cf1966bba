/* Heap dump file names as jemalloc and the databases write them: the kind
 * of dump, its pid, its time and what triggered it, read from the name
 * alone. The agent uses it to decide what it serves; `query` to tell
 * process lifetimes apart and to date a dump whose content has no time.
 *
 * The parser reads untrusted bytes (a folder anyone on the node can write
 * to): it takes an explicit length, never reads past it and never
 * allocates. Its libFuzzer target is tests/fuzz/agent_dumpname.c. */
#include "collector/ingest/ingest.h"

#include <string.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parse the decimal field [s, s+n): digits only (no sign, no blanks). */
static int digits(const char *s, size_t n, int64_t *ret)
{
    uint64_t v;
    if (n == 0 || n > 19)
        return HP_EPARSE;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(s[i]))
            return HP_EPARSE;
    if (hp_parse_u64(s, n, &v) < 0 || v > INT64_MAX)
        return HP_EPARSE;
    *ret = (int64_t)v;
    return 0;
}

/* Find the last '.' in [s, s+n) before position `end`; -1 when none. */
static ptrdiff_t last_dot(const char *s, size_t end)
{
    for (size_t i = end; i > 0; i--)
        if (s[i - 1] == '.')
            return (ptrdiff_t)(i - 1);
    return -1;
}

static bool has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

static void dumpname_clear(struct ingest_dumpname *d)
{
    memset(d, 0, sizeof(*d));
    d->pid = d->seq = d->trigger_seq = d->time = -1;
}

/* <prefix>.<pid>.<seq>.<i|m|u><n> or <prefix>.<pid>.<seq>.f, given the name
 * without ".heap". The prefix may itself contain dots (Doris sets
 * JEMALLOC_PROF_PRFIX="jemalloc_heap_profile_", RisingWave's K8s recipe a
 * path), so the fields are taken from the right. */
static bool parse_jemalloc(const char *s, size_t n, struct ingest_dumpname *d)
{
    ptrdiff_t d3 = last_dot(s, n);
    if (d3 < 0)
        return false;
    const char *v = s + d3 + 1;
    size_t vn = n - (size_t)d3 - 1;
    if (vn == 1 && v[0] == 'f') {
        d->trigger = INGEST_TRIGGER_FINAL;
    } else if (vn >= 2 && (v[0] == 'i' || v[0] == 'm' || v[0] == 'u')) {
        if (digits(v + 1, vn - 1, &d->trigger_seq) < 0)
            return false;
        d->trigger = v[0] == 'i' ? INGEST_TRIGGER_INTERVAL
                     : v[0] == 'm' ? INGEST_TRIGGER_MANUAL
                                   : INGEST_TRIGGER_GDUMP;
    } else {
        return false;
    }
    ptrdiff_t d2 = last_dot(s, (size_t)d3);
    if (d2 < 0 || digits(s + d2 + 1, (size_t)(d3 - d2 - 1), &d->seq) < 0)
        return false;
    ptrdiff_t d1 = last_dot(s, (size_t)d2);
    if (d1 < 0 || digits(s + d1 + 1, (size_t)(d2 - d1 - 1), &d->pid) < 0)
        return false;
    d->kind = INGEST_DUMP_JEMALLOC;
    d->prefix_len = (size_t)d1;
    return true;
}

/* jeheap_dump.<time>.<pid>.<rand> (without ".heap"). */
static bool parse_doris(const char *s, size_t n, struct ingest_dumpname *d)
{
    static const char pfx[] = "jeheap_dump.";
    size_t pl = sizeof(pfx) - 1;
    int64_t rnd;
    if (n <= pl || memcmp(s, pfx, pl) != 0)
        return false;
    const char *p = s + pl, *end = s + n;
    const char *a = memchr(p, '.', (size_t)(end - p));
    if (!a)
        return false;
    const char *b = memchr(a + 1, '.', (size_t)(end - a - 1));
    if (!b)
        return false;
    if (digits(p, (size_t)(a - p), &d->time) < 0 ||
        digits(a + 1, (size_t)(b - a - 1), &d->pid) < 0 ||
        digits(b + 1, (size_t)(end - b - 1), &rnd) < 0)
        return false;
    d->kind = INGEST_DUMP_DORIS;
    d->trigger = INGEST_TRIGGER_MANUAL;
    d->prefix_len = pl - 1;
    return true;
}

/* YYYY-mm-dd-HH-MM-SS (exactly 19 bytes), chrono's "%Y-%m-%d-%H-%M-%S". */
static bool parse_rw_time(const char *s, size_t n, int tm[6])
{
    static const int width[6] = { 4, 2, 2, 2, 2, 2 };
    static const int lo[6] = { 1970, 1, 1, 0, 0, 0 }, hi[6] = { 9999, 12, 31, 23, 59, 60 };
    size_t pos = 0;
    if (n != 19)
        return false;
    for (int i = 0; i < 6; i++) {
        int64_t v;
        if (i > 0 && s[pos++] != '-')
            return false;
        if (digits(s + pos, (size_t)width[i], &v) < 0 || v < lo[i] || v > hi[i])
            return false;
        tm[i] = (int)v;
        pos += (size_t)width[i];
    }
    return true;
}

int ingest_dumpname_parse(const char *name, size_t len, struct ingest_dumpname *ret)
{
    struct ingest_dumpname d;
    dumpname_clear(&d);
    if (len == 0 || len > INGEST_DUMPNAME_MAX || name[0] == '.')
        return 0; /* also rules out "." and ".." and hidden temp files */
    /* Printable ASCII only: a name goes into JSON, a response header
     * (X-Heapfleet-Dump-Name) and log lines, where a newline or invalid
     * UTF-8 would break or inject. Every database names its dumps so. */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] > 0x7e || name[i] == '/')
            return 0;

    if (has_suffix(name, len, ".heap")) {
        size_t n = len - 5;
        if (n == 0)
            return 0;
        if (has_suffix(name, n, ".auto") || has_suffix(name, n, ".manual")) {
            bool autod = has_suffix(name, n, ".auto");
            size_t tn = n - (autod ? 5 : 7);
            if (parse_rw_time(name, tn, d.tm)) {
                d.kind = INGEST_DUMP_RISINGWAVE;
                d.trigger = autod ? INGEST_TRIGGER_AUTO : INGEST_TRIGGER_MANUAL;
                d.prefix_len = 0;
                goto found;
            }
        }
        if (parse_doris(name, n, &d))
            goto found;
        dumpname_clear(&d);
        if (parse_jemalloc(name, n, &d))
            goto found;
        dumpname_clear(&d);
        d.kind = INGEST_DUMP_HEAP;
        d.prefix_len = n;
        goto found;
    }
    /* StarRocks: heap_profile.<pid>.<rand>, no suffix. */
    static const char sr[] = "heap_profile.";
    size_t sl = sizeof(sr) - 1;
    if (len > sl && memcmp(name, sr, sl) == 0) {
        const char *p = name + sl, *end = name + len;
        const char *a = memchr(p, '.', (size_t)(end - p));
        int64_t rnd;
        if (a && digits(p, (size_t)(a - p), &d.pid) == 0 &&
            digits(a + 1, (size_t)(end - a - 1), &rnd) == 0) {
            d.kind = INGEST_DUMP_STARROCKS;
            d.trigger = INGEST_TRIGGER_MANUAL;
            d.prefix_len = sl - 1;
            goto found;
        }
    }
    return 0;
found:
    *ret = d;
    return 1;
}

const char *ingest_dump_kind_name(enum ingest_dump_kind k)
{
    switch (k) {
    case INGEST_DUMP_JEMALLOC:
        return "jemalloc";
    case INGEST_DUMP_DORIS:
        return "doris";
    case INGEST_DUMP_RISINGWAVE:
        return "risingwave";
    case INGEST_DUMP_STARROCKS:
        return "starrocks";
    case INGEST_DUMP_HEAP:
        return "heap";
    }
    return "unknown";
}

const char *ingest_dump_trigger_name(enum ingest_dump_trigger t)
{
    switch (t) {
    case INGEST_TRIGGER_NONE:
        return "none";
    case INGEST_TRIGGER_INTERVAL:
        return "interval";
    case INGEST_TRIGGER_MANUAL:
        return "manual";
    case INGEST_TRIGGER_GDUMP:
        return "gdump";
    case INGEST_TRIGGER_FINAL:
        return "final";
    case INGEST_TRIGGER_AUTO:
        return "auto";
    }
    return "unknown";
}

int64_t ingest_dumpname_time(const struct ingest_dumpname *d)
{
    return d->kind == INGEST_DUMP_DORIS && d->time > 0 ? d->time : -1;
}
