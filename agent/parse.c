/* The agent's parsers: dump file names, query strings, request paths, /proc
 * "Key: value kB" text and MAPPED_LIBRARIES lines.
 *
 * All of them read untrusted bytes (a client's request, a folder anyone on the
 * node can write to, the kernel's text) and share two rules: they take an
 * explicit length and never read past it, and they never allocate, so a
 * hostile input costs at most one pass over its bytes. Each has a libFuzzer
 * target in tests/fuzz/agent_*.c. */
#include "agent/agent.h"

#include <string.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- query strings ---- */

/* Decode [s, s+n) into out; '+' is a space (HTML form encoding, which curl
 * and browsers produce). Returns the decoded length or a negative error. */
static ptrdiff_t pct_decode(const char *s, size_t n, char *out, size_t outsz)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= n)
                return HP_EPARSE;
            h = hp_hex_digit(s[i + 1]);
            l = hp_hex_digit(s[i + 2]);
            if (h < 0 || l < 0)
                return HP_EPARSE;
            c = (char)(h * 16 + l);
            if (c == '\0')
                return HP_EPARSE;
            i += 2;
        } else if (c == '+') {
            c = ' ';
        } else if (c == '\0') {
            return HP_EPARSE;
        }
        if (o + 1 >= outsz)
            return HP_ETOOBIG;
        out[o++] = c;
    }
    if (outsz == 0)
        return HP_ETOOBIG;
    out[o] = '\0';
    return (ptrdiff_t)o;
}

int agent_query_get(const char *qs, size_t qlen, const char *key, char *out, size_t outsz,
                    size_t *ret_len)
{
    char kbuf[64];
    size_t pos = 0;
    int found = 0;
    size_t found_len = 0;
    if (qlen > AGENT_QUERY_MAX)
        return HP_ETOOBIG;
    while (pos < qlen) {
        const char *pair = qs + pos;
        const char *amp = memchr(pair, '&', qlen - pos);
        size_t plen = amp ? (size_t)(amp - pair) : qlen - pos;
        pos += plen + (amp ? 1 : 0);
        if (plen == 0)
            continue;
        const char *eq = memchr(pair, '=', plen);
        size_t klen = eq ? (size_t)(eq - pair) : plen;
        ptrdiff_t kd = pct_decode(pair, klen, kbuf, sizeof(kbuf));
        if (kd == HP_ETOOBIG)
            continue; /* a key this long is none of ours */
        if (kd < 0)
            return (int)kd;
        if (strcmp(kbuf, key) != 0)
            continue;
        if (found)
            return HP_EPARSE;
        const char *val = eq ? eq + 1 : pair + plen;
        size_t vlen = eq ? plen - klen - 1 : 0;
        ptrdiff_t vd = pct_decode(val, vlen, out, outsz);
        if (vd < 0)
            return (int)vd;
        found = 1;
        found_len = (size_t)vd;
    }
    if (found && ret_len)
        *ret_len = found_len;
    return found;
}

/* ---- ranges ---- */

int agent_range_parse(const char *v, size_t n, uint64_t size, uint64_t *ret_start,
                      uint64_t *ret_end)
{
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n < 7 || memcmp(v, "bytes=", 6) != 0)
        return 0;
    v += 6;
    n -= 6;
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    const char *dash = memchr(v, '-', n);
    if (!dash || memchr(v, ',', n))
        return 0;
    size_t fl = (size_t)(dash - v), ll = n - fl - 1;
    uint64_t first, last;
    if (fl == 0) { /* the last N bytes */
        if (ll == 0 || hp_parse_u64(dash + 1, ll, &last) < 0)
            return 0;
        if (last == 0 || size == 0)
            return -1;
        *ret_start = size - HP_MIN(last, size);
        *ret_end = size;
        return 1;
    }
    if (hp_parse_u64(v, fl, &first) < 0)
        return 0;
    if (ll == 0)
        last = UINT64_MAX;
    else if (hp_parse_u64(dash + 1, ll, &last) < 0 || last < first)
        return 0;
    if (first >= size)
        return -1;
    *ret_start = first;
    *ret_end = last >= size - 1 ? size : last + 1;
    return 1;
}

/* ---- routes ---- */

static bool path_is(const char *p, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n == k && memcmp(p, lit, k) == 0;
}

enum agent_route agent_route_match(const char *path, size_t len, char *build_id)
{
    if (path_is(path, len, "/health"))
        return AGENT_ROUTE_HEALTH;
    if (path_is(path, len, "/dumps"))
        return AGENT_ROUTE_DUMPS;
    if (path_is(path, len, "/dumps/newest"))
        return AGENT_ROUTE_NEWEST;
    if (path_is(path, len, "/dumps/file"))
        return AGENT_ROUTE_FILE;
    if (path_is(path, len, "/dumps/delete"))
        return AGENT_ROUTE_DELETE;
    if (path_is(path, len, "/identity"))
        return AGENT_ROUTE_IDENTITY;
    if (path_is(path, len, "/proc"))
        return AGENT_ROUTE_PROC;
    static const char pfx[] = "/buildid/";
    size_t pl = sizeof(pfx) - 1;
    if (len > pl && memcmp(path, pfx, pl) == 0) {
        const char *h = path + pl, *end = path + len;
        const char *slash = memchr(h, '/', (size_t)(end - h));
        if (!slash)
            return AGENT_ROUTE_NONE;
        size_t hn = (size_t)(slash - h);
        /* A GNU build-id is 2..64 bytes; debuginfod clients send lowercase
         * hex, uppercase is accepted and folded. */
        if (hn < 4 || hn > AGENT_BUILD_ID_HEX_MAX || hn % 2 != 0)
            return AGENT_ROUTE_NONE;
        for (size_t i = 0; i < hn; i++) {
            int v = hp_hex_digit(h[i]);
            if (v < 0)
                return AGENT_ROUTE_NONE;
            build_id[i] = "0123456789abcdef"[v];
        }
        build_id[hn] = '\0';
        const char *rest = slash;
        size_t rn = (size_t)(end - slash);
        if (path_is(rest, rn, "/executable"))
            return AGENT_ROUTE_BUILDID_EXEC;
        if (path_is(rest, rn, "/debuginfo"))
            return AGENT_ROUTE_BUILDID_DEBUG;
    }
    return AGENT_ROUTE_NONE;
}

/* ---- /proc text ---- */

void agent_proc_parse(const char *text, size_t len, struct agent_proc_fields *ret)
{
    memset(ret, 0, sizeof(*ret));
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        const char *colon = memchr(line, ':', ll);
        if (!colon)
            continue;
        size_t kl = (size_t)(colon - line);
        if (kl == 0 || kl >= sizeof(ret->f[0].key))
            continue;
        bool key_ok = true;
        for (size_t i = 0; i < kl; i++) {
            char c = line[i];
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' ||
                  c == '(' || c == ')'))
                key_ok = false;
        }
        if (!key_ok)
            continue;
        const char *v = colon + 1, *end = line + ll;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        if (kl == 4 && memcmp(line, "Name", 4) == 0) {
            size_t vn = HP_MIN((size_t)(end - v), sizeof(ret->name) - 1);
            memcpy(ret->name, v, vn);
            ret->name[vn] = '\0';
            continue;
        }
        const char *num = v;
        while (v < end && is_digit(*v))
            v++;
        size_t nn = (size_t)(v - num);
        uint64_t value;
        if (nn == 0 || hp_parse_u64(num, nn, &value) < 0)
            continue;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        bool kb = false;
        if ((size_t)(end - v) == 2 && memcmp(v, "kB", 2) == 0)
            kb = true;
        else if (v != end)
            continue; /* "SigQ: 0/63" and other composite values */
        if (kb) {
            if (value > UINT64_MAX / 1024)
                continue;
            value *= 1024;
        }
        if (ret->n == AGENT_PROC_FIELDS_MAX)
            break;
        memcpy(ret->f[ret->n].key, line, kl);
        ret->f[ret->n].key[kl] = '\0';
        ret->f[ret->n].value = value;
        ret->f[ret->n].bytes = kb;
        ret->n++;
    }
}

int agent_proc_get(const struct agent_proc_fields *p, const char *key, uint64_t *ret_value)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->f[i].key, key) == 0) {
            *ret_value = p->f[i].value;
            return 1;
        }
    return 0;
}

int agent_proc_start_time(const char *stat, size_t stat_len, const char *sys_stat,
                          size_t sys_len, long ticks_per_s, double *ret_s)
{
    if (ticks_per_s <= 0)
        return 0;
    const char *rp = NULL;
    for (size_t i = stat_len; i-- > 0;)
        if (stat[i] == ')') {
            rp = stat + i;
            break;
        }
    if (!rp)
        return 0;
    /* After ") ": state is field 3, starttime field 22. */
    const char *p = rp + 1, *end = stat + stat_len;
    uint64_t ticks = 0;
    bool found = false;
    for (int field = 2; p < end && field < 22;) {
        while (p < end && *p == ' ')
            p++;
        field++;
        const char *tok = p;
        while (p < end && *p != ' ' && *p != '\n')
            p++;
        if (field == 22) {
            found = p > tok && hp_parse_u64(tok, (size_t)(p - tok), &ticks) == 0;
            break;
        }
    }
    if (!found)
        return 0;
    uint64_t btime = 0;
    bool boot = false;
    for (size_t pos = 0; pos < sys_len && !boot;) {
        const char *line = sys_stat + pos;
        const char *nl = memchr(line, '\n', sys_len - pos);
        size_t ll = nl ? (size_t)(nl - line) : sys_len - pos;
        pos += ll + 1;
        if (ll > 6 && memcmp(line, "btime ", 6) == 0)
            boot = hp_parse_u64(line + 6, ll - 6, &btime) == 0 && btime > 0;
    }
    if (!boot)
        return 0;
    *ret_s = (double)btime + (double)ticks / (double)ticks_per_s;
    return 1;
}

/* ---- MAPPED_LIBRARIES ---- */

void agent_maps_paths(const char *text, size_t len, int (*cb)(const char *path, void *arg),
                      void *arg)
{
    /* Paths repeat (one line per mapping of the same file); remember the
     * hashes of those already reported. A bounded table: past it, repeats are
     * reported again, which callers tolerate. */
    uint64_t seen[256];
    size_t nseen = 0;
    char path[4096];
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        /* address perms offset dev inode path: the path starts at the first
         * '/' after five blank-separated fields. */
        size_t i = 0;
        int fields = 0;
        while (i < ll && fields < 5) {
            while (i < ll && line[i] == ' ')
                i++;
            if (i == ll)
                break;
            while (i < ll && line[i] != ' ')
                i++;
            fields++;
        }
        if (fields < 5)
            continue;
        while (i < ll && line[i] == ' ')
            i++;
        if (i == ll || line[i] != '/')
            continue;
        size_t pn = ll - i;
        static const char del[] = " (deleted)";
        if (pn >= sizeof(del) - 1 && memcmp(line + ll - (sizeof(del) - 1), del, sizeof(del) - 1) == 0)
            continue; /* replaced on disk: the file there now is another one */
        if (pn >= sizeof(path) || memchr(line + i, '\0', pn))
            continue;
        uint64_t h = hp_hash_bytes(line + i, pn, 0);
        bool dup = false;
        for (size_t k = 0; k < nseen; k++)
            if (seen[k] == h)
                dup = true;
        if (dup)
            continue;
        if (nseen < HP_ARRAY_SIZE(seen))
            seen[nseen++] = h;
        memcpy(path, line + i, pn);
        path[pn] = '\0';
        if (cb(path, arg))
            return;
    }
}
