/* /proc/<pid>/maps lines, as jemalloc and gperftools append them after
 * "MAPPED_LIBRARIES:":
 *   55d1c2a00000-55d1c5e00000 r-xp 00000000 fd:01 1234   /opt/be/lib/doris_be
 * The path may be missing (anonymous), contain spaces, be a pseudo path like
 * [vdso], or end in " (deleted)" when the file was replaced after mapping.
 *
 * Older Google heap profiles put a brief form after "--- Memory map: ---",
 * which go pprof also reads:
 *   00400000-00fcb000 r-xp /usr/local/bin/server @ 0 deadbeef
 *   00400000-00fcb000: /usr/local/bin/server
 * (range, then optional permissions, file, "@offset" and build id). */
#include "collector/ingest/ingest.h"

#include <stddef.h>
#include <stdbool.h>
#include <string.h>

static const char *field(const char *s, const char *end, const char **ret_end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t')
        e++;
    *ret_end = e;
    return s;
}

static bool all_perm_chars(const char *s, const char *e)
{
    if (s == e)
        return false;
    for (; s < e; s++)
        if (!strchr("-rwxps", *s))
            return false;
    return true;
}

static bool all_hex(const char *s, const char *e)
{
    if (s == e)
        return false;
    for (; s < e; s++)
        if (!strchr("0123456789abcdefABCDEF", *s))
            return false;
    return true;
}

/* The brief form, tried when a line with a valid range is not a maps line. */
static int maps_brief(char *line, const char *after_range, const char *end,
                      struct profile_mapping *m)
{
    const char *s = after_range, *fe;
    if (s < end && *s == ':')
        s++;
    if (s < end && *s != ' ' && *s != '\t')
        return 0;
    m->offset = 0;
    m->inode = 0;
    memcpy(m->perms, "r-xp", 5);
    const char *tok = field(s, end, &fe);
    if (all_perm_chars(tok, fe) && (size_t)(fe - tok) <= 4) {
        memset(m->perms, '-', 4);
        memcpy(m->perms, tok, (size_t)(fe - tok));
        m->perms[4] = '\0';
        tok = field(fe, end, &fe);
    }
    const char *path = tok, *path_end = fe;
    tok = field(fe, end, &fe);
    if (fe - tok == 1 && *tok == '@')
        tok = field(fe, end, &fe); /* "@ 1000" */
    else if (tok < fe && *tok == '@')
        tok++; /* "@1000" */
    if (all_hex(tok, fe)) {
        if (hp_parse_hex64(tok, (size_t)(fe - tok), &m->offset) < 0)
            return 0;
        /* A build id may follow; the brief form's ids are not trusted for
         * lookups (no note to check them against), so it is not kept. */
    }
    line[path_end - line] = '\0';
    m->path = path;
    m->flags = 0;
    if (m->perms[2] == 'x')
        m->flags |= PROFILE_MAP_EXEC;
    if (path == path_end)
        m->flags |= PROFILE_MAP_ANON;
    else if (path[0] == '[')
        m->flags |= PROFILE_MAP_SPECIAL;
    return 1;
}

int ingest_maps_line(char *line, size_t len, struct profile_mapping *m)
{
    const char *end = line + len, *fe;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    const char *range = field(line, end, &fe);
    const char *range_end = fe > range && fe[-1] == ':' ? fe - 1 : fe; /* brief "a-b:" */
    const char *dash = memchr(range, '-', (size_t)(range_end - range));
    if (!dash)
        return 0;
    memset(m, 0, sizeof(*m));
    if (hp_parse_hex64(range, (size_t)(dash - range), &m->start) < 0 ||
        hp_parse_hex64(dash + 1, (size_t)(range_end - dash - 1), &m->limit) < 0 || m->limit < m->start)
        return 0;
    const char *after_range = range_end;
    if (range_end != fe)
        return maps_brief(line, after_range, end, m);
    const char *perms = field(fe, end, &fe);
    if (fe - perms != 4)
        return maps_brief(line, after_range, end, m);
    memcpy(m->perms, perms, 4);
    m->perms[4] = '\0';
    const char *off = field(fe, end, &fe);
    if (hp_parse_hex64(off, (size_t)(fe - off), &m->offset) < 0)
        return maps_brief(line, after_range, end, m);
    const char *dev = field(fe, end, &fe);
    if (fe == dev || !memchr(dev, ':', (size_t)(fe - dev)))
        return maps_brief(line, after_range, end, m);
    const char *ino = field(fe, end, &fe);
    if (hp_parse_u64(ino, (size_t)(fe - ino), &m->inode) < 0)
        return 0;
    const char *path = fe;
    while (path < end && (*path == ' ' || *path == '\t'))
        path++;
    static const char deleted[] = " (deleted)";
    size_t plen = (size_t)(end - path);
    if (plen > sizeof(deleted) - 1 &&
        memcmp(end - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0) {
        m->flags |= PROFILE_MAP_DELETED;
        plen -= sizeof(deleted) - 1;
    }
    /* Terminate the path in place: m->path points into the caller's line. */
    line[path - line + (ptrdiff_t)plen] = '\0';
    m->path = path;
    if (m->perms[2] == 'x')
        m->flags |= PROFILE_MAP_EXEC;
    if (plen == 0)
        m->flags |= PROFILE_MAP_ANON;
    else if (path[0] == '[')
        m->flags |= PROFILE_MAP_SPECIAL;
    return 1;
}
