/* /proc/<pid>/maps lines, as jemalloc and gperftools append them after
 * "MAPPED_LIBRARIES:":
 *   55d1c2a00000-55d1c5e00000 r-xp 00000000 fd:01 1234   /opt/be/lib/doris_be
 * The path may be missing (anonymous), contain spaces, be a pseudo path like
 * [vdso], or end in " (deleted)" when the file was replaced after mapping. */
#include "collector/ingest/ingest.h"

#include <stddef.h>
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

int ingest_maps_line(char *line, size_t len, struct profile_mapping *m)
{
    const char *end = line + len, *fe;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    const char *range = field(line, end, &fe);
    const char *dash = memchr(range, '-', (size_t)(fe - range));
    if (!dash)
        return 0;
    memset(m, 0, sizeof(*m));
    if (hp_parse_hex64(range, (size_t)(dash - range), &m->start) < 0 ||
        hp_parse_hex64(dash + 1, (size_t)(fe - dash - 1), &m->limit) < 0 || m->limit < m->start)
        return 0;
    const char *perms = field(fe, end, &fe);
    if (fe - perms != 4)
        return 0;
    memcpy(m->perms, perms, 4);
    m->perms[4] = '\0';
    const char *off = field(fe, end, &fe);
    if (hp_parse_hex64(off, (size_t)(fe - off), &m->offset) < 0)
        return 0;
    const char *dev = field(fe, end, &fe);
    if (fe == dev || !memchr(dev, ':', (size_t)(fe - dev)))
        return 0;
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
