/* Fuzz target: the narrow DWARF readers (collector/sym/dwraw.c), which read
 * .debug_info, .debug_abbrev and .debug_line bytes of any file handed to the
 * symbolizer. Nothing may crash, read outside the input or loop forever.
 * Input: one byte picks the reader and the byte order; for DIEs two bytes
 * (little-endian) give the length of the .debug_abbrev part that follows,
 * the rest is .debug_info, walked as scope_expand walks it (children read,
 * other subtrees skipped, by DW_AT_sibling when there is one); for lines
 * the rest is .debug_line, read from offset 0 with 8-byte addresses; for
 * range lists (bit 4) the rest is .debug_ranges (bit 8 clear) or
 * .debug_rnglists (set), read from offset 0. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sym/sym-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int walk(const struct dwraw_unit *u, const uint8_t *info, uint64_t *pos, int depth)
{
    for (;;) {
        struct dwraw_die d;
        int r = dwraw_die_read(u, info, pos, &d);
        if (r <= 0)
            return r;
        if (d.off < u->die_start || d.off >= u->end || *pos > u->end)
            abort();
        if (depth > SYM_MAX_DIE_DEPTH || (d.tag & 1)) {
            if (dwraw_skip_children(u, info, pos, &d) < 0)
                return -1;
        } else if (d.children && walk(u, info, pos, depth + 1) < 0) {
            return -1;
        }
    }
}

/* A copy of exactly n bytes, so reading past them is caught; NULL when
 * out of memory. */
static uint8_t *dup(const uint8_t *data, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    if (b)
        memcpy(b, data, n);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool msb = data[0] & 2;
    size_t n = size - 1;
    if (data[0] & 4) {
        uint8_t *b = dup(data + 1, n);
        if (!b)
            return 0;
        struct dwraw_range rs[64];
        int k = dwraw_ranges(b, n, 0, (data[0] & 8) ? 5 : 4, (data[0] & 16) ? 4 : 8, msb,
                             0x1000, rs, 64);
        if (k > 64)
            abort();
        free(b);
        return 0;
    }
    if (data[0] & 1) {
        uint8_t *b = dup(data + 1, n);
        if (!b)
            return 0;
        struct dwraw_row *rows = NULL;
        size_t nrows = 0;
        if (dwraw_lines(b, n, 0, 8, msb, &rows, &nrows) >= 0)
            for (size_t i = 0; i < nrows; i++)
                if (rows[i].file == UINT32_MAX && rows[i].line != 0)
                    abort();
        free(rows);
        free(b);
        return 0;
    }
    if (size < 3)
        return 0;
    size_t alen = (size_t)data[1] | (size_t)data[2] << 8;
    if (alen > size - 3)
        return 0;
    size_t ilen = size - 3 - alen;
    uint8_t *abbrev = dup(data + 3, alen), *info = dup(data + 3 + alen, ilen);
    if (!abbrev || !info) {
        free(abbrev);
        free(info);
        return 0;
    }
    struct dwraw_unit u;
    if (dwraw_unit_init(&u, info, ilen, 0, abbrev, alen, msb) == 0) {
        if (u.end > ilen || u.die_start > u.end)
            abort();
        uint64_t pos = u.die_start;
        (void)walk(&u, info, &pos, 0);
        dwraw_unit_release(&u);
    }
    free(abbrev);
    free(info);
    return 0;
}
