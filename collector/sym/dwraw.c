/* Narrow readers of DWARF section bytes, each for one job where libdwarf's
 * API was the measured bottleneck of cold symbolization (collector/sym/
 * dwarf.c keeps libdwarf for everything else: opening, finding CUs, file
 * names, names). Figures from perf on tests/bench/sym-bench.sh (24 units,
 * 14,936 addresses, load 5-10 on 2 cores):
 *  - DIEs (dwraw_unit_init, dwraw_die_read): the walk of a function's inline
 *    tree was 55% of the cold CPU time, most of it libdwarf allocating,
 *    sizing and freeing one Dwarf_Die per DIE visited (dwarf_siblingof_b
 *    22%, dwarf_attr/dwarf_lowpc/dwarf_highpc_b 17%, attr_udata 8%); the
 *    walk of a CU down to its functions was 8% once that was done.
 *  - Line programs (dwraw_lines): dwarf_srclines_b, which builds a row
 *    array with two allocations per row, was 42% once the trees were read
 *    here.
 *  - Range lists (dwraw_ranges): 30% after both, one Dwarf_Die, attribute
 *    and list head per ranged scope.
 * symtool addr on that program: 0.42 s of CPU with libdwarf alone, 0.12 s
 * with these.
 *
 * The DIE reader decodes a unit header and its abbreviation table once,
 * then reads one DIE at a time from a byte position: its tag, whether it
 * has children, DW_AT_sibling, and the few attributes the scope walk needs
 * in the forms compilers use for them (low_pc as an address, high_pc as an
 * address or a constant, call_file/call_line as constants, ranges and
 * stmt_list as section offsets). Any other form of those is flagged so the
 * caller asks libdwarf for that one DIE; the line and range readers answer
 * -1 for what they do not read, and the caller asks libdwarf for the whole
 * table or list. The readers agree with libdwarf by construction on what
 * they hand back, and tests/sym/narrow_agree.py checks that they agree on
 * the rest (C, C++ and Rust fixtures, DWARF 4 and 5). Every read is bounded
 * by its unit, table or section: malformed bytes are an error, never a read
 * outside them or a loop (tests/fuzz/fuzz-dwraw.c). No pointer into a
 * section is kept: the caller hands the bytes of its own mapping with every
 * call. */
#include "collector/sym/sym-internal.h"

#include <stdlib.h>
#include <string.h>

/* DWARF 5 constants (7.5.4, 7.5.5, 7.5.6), so this file needs no libdwarf
 * header; the GNU forms are those of dwz and split DWARF. */
enum {
    AT_sibling = 0x01, AT_stmt_list = 0x10, AT_low_pc = 0x11, AT_high_pc = 0x12, AT_ranges = 0x55,
    AT_call_file = 0x58, AT_call_line = 0x59, AT_rnglists_base = 0x74,
    AT_GNU_ranges_base = 0x2132,
    F_addr = 0x01, F_block2 = 0x03, F_block4 = 0x04, F_data2 = 0x05, F_data4 = 0x06,
    F_data8 = 0x07, F_string = 0x08, F_block = 0x09, F_block1 = 0x0a, F_data1 = 0x0b,
    F_flag = 0x0c, F_sdata = 0x0d, F_strp = 0x0e, F_udata = 0x0f, F_ref_addr = 0x10,
    F_ref1 = 0x11, F_ref2 = 0x12, F_ref4 = 0x13, F_ref8 = 0x14, F_ref_udata = 0x15,
    F_indirect = 0x16, F_sec_offset = 0x17, F_exprloc = 0x18, F_flag_present = 0x19,
    F_strx = 0x1a, F_addrx = 0x1b, F_ref_sup4 = 0x1c, F_strp_sup = 0x1d, F_data16 = 0x1e,
    F_line_strp = 0x1f, F_ref_sig8 = 0x20, F_implicit_const = 0x21, F_loclistx = 0x22,
    F_rnglistx = 0x23, F_ref_sup8 = 0x24, F_strx1 = 0x25, F_strx2 = 0x26, F_strx3 = 0x27,
    F_strx4 = 0x28, F_addrx1 = 0x29, F_addrx2 = 0x2a, F_addrx3 = 0x2b, F_addrx4 = 0x2c,
    F_GNU_addr_index = 0x1f01, F_GNU_str_index = 0x1f02, F_GNU_ref_alt = 0x1f20,
    F_GNU_strp_alt = 0x1f21,
};

/* Abbreviations beyond this code go to the sorted list (binary search);
 * compilers number them from 1 densely. */
#define DIRECT_CODES 4096u
#define MAX_ABBREVS (1u << 20)
#define MAX_SPECS (1u << 24)

struct dwraw_abbrev {
    uint64_t code;
    uint16_t tag;
    bool children;
    uint32_t first, n; /* into specs */
    /* No attribute dwraw_die_read reports, and every form of a fixed size:
     * such a DIE (a parameter, a variable, a call site...) is skipped by
     * its size alone. UINT32_MAX: read it attribute by attribute. */
    uint32_t plain_size;
};

/* The size of a form whose size depends on the unit only, or -1. */
static int form_fixed_size(const struct dwraw_unit *u, uint64_t form)
{
    switch (form) {
    case F_flag_present:
    case F_implicit_const:
        return 0;
    case F_data1: case F_ref1: case F_flag: case F_strx1: case F_addrx1:
        return 1;
    case F_data2: case F_ref2: case F_strx2: case F_addrx2:
        return 2;
    case F_strx3: case F_addrx3:
        return 3;
    case F_data4: case F_ref4: case F_ref_sup4: case F_strx4: case F_addrx4:
        return 4;
    case F_data8: case F_ref8: case F_ref_sig8: case F_ref_sup8:
        return 8;
    case F_data16:
        return 16;
    case F_addr:
        return u->addr_size;
    case F_strp: case F_line_strp: case F_sec_offset: case F_strp_sup: case F_GNU_ref_alt:
    case F_GNU_strp_alt:
        return u->off_size;
    case F_ref_addr:
        return u->version <= 2 ? u->addr_size : u->off_size;
    default:
        return -1;
    }
}

static bool attr_reported(uint64_t at)
{
    return at == AT_sibling || at == AT_stmt_list || at == AT_low_pc || at == AT_high_pc ||
           at == AT_ranges || at == AT_call_file || at == AT_call_line ||
           at == AT_rnglists_base || at == AT_GNU_ranges_base;
}

struct dwraw_spec {
    uint16_t at, form;
    int64_t implicit; /* DW_FORM_implicit_const */
};

/* ---- bounded little/big-endian reads --------------------------------- */

struct cur {
    const uint8_t *p, *end;
    bool msb;
};

static int rd_n(struct cur *c, unsigned n, uint64_t *v)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++)
        x |= (uint64_t)c->p[c->msb ? n - 1 - i : i] << (8 * i);
    c->p += n;
    *v = x;
    return 0;
}

static int rd_uleb(struct cur *c, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        if (shift < 64)
            x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int rd_sleb(struct cur *c, int64_t *v)
{
    uint64_t x = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
        if (c->p >= c->end)
            return -1;
        b = *c->p++;
        if (shift < 64)
            x |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        x |= ~UINT64_C(0) << shift;
    *v = (int64_t)x;
    return 0;
}

static int skip(struct cur *c, uint64_t n)
{
    if ((uint64_t)(c->end - c->p) < n)
        return -1;
    c->p += n;
    return 0;
}

static int skip_cstr(struct cur *c)
{
    const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!z)
        return -1;
    c->p = z + 1;
    return 0;
}

/* ---- unit header and abbreviations ----------------------------------- */

static int abbrev_cmp(const void *a, const void *b)
{
    const struct dwraw_abbrev *x = a, *y = b;
    return x->code < y->code ? -1 : x->code > y->code;
}

int dwraw_unit_init(struct dwraw_unit *u, const uint8_t *info, size_t info_len,
                    uint64_t unit_off, const uint8_t *abbrev, size_t abbrev_len, bool msb)
{
    memset(u, 0, sizeof(*u));
    u->msb = msb;
    if (unit_off >= info_len)
        return HP_EPARSE;
    struct cur c = { info + unit_off, info + info_len, msb };
    uint64_t len, v, aoff;
    if (rd_n(&c, 4, &len) < 0)
        return HP_EPARSE;
    u->off_size = 4;
    if (len == 0xffffffff) {
        if (rd_n(&c, 8, &len) < 0)
            return HP_EPARSE;
        u->off_size = 8;
    } else if (len >= 0xfffffff0) {
        return HP_EPARSE;
    }
    if (len > (uint64_t)(c.end - c.p))
        return HP_EPARSE;
    c.end = c.p + len;
    u->off = unit_off;
    u->end = (uint64_t)(c.end - info);
    if (rd_n(&c, 2, &v) < 0 || v < 2 || v > 5)
        return HP_EPARSE;
    u->version = (uint16_t)v;
    uint64_t asz = 0;
    if (u->version >= 5) {
        uint64_t ut;
        if (rd_n(&c, 1, &ut) < 0 || rd_n(&c, 1, &asz) < 0 || rd_n(&c, u->off_size, &aoff) < 0)
            return HP_EPARSE;
        if (ut == 4 || ut == 5) { /* skeleton, split_compile: dwo_id */
            if (skip(&c, 8) < 0)
                return HP_EPARSE;
        } else if (ut == 2 || ut == 6) { /* type units: signature, type offset */
            if (skip(&c, 8 + u->off_size) < 0)
                return HP_EPARSE;
        } else if (ut != 1 && ut != 3) {
            return HP_EPARSE;
        }
    } else {
        if (rd_n(&c, u->off_size, &aoff) < 0 || rd_n(&c, 1, &asz) < 0)
            return HP_EPARSE;
    }
    if (asz != 2 && asz != 4 && asz != 8)
        return HP_EPARSE;
    u->addr_size = (uint8_t)asz;
    u->die_start = (uint64_t)(c.p - info);
    if (aoff >= abbrev_len)
        return HP_EPARSE;

    struct cur a = { abbrev + aoff, abbrev + abbrev_len, msb };
    size_t cap = 0, scap = 0;
    bool sorted = true;
    for (;;) {
        uint64_t code, tag, at, form;
        if (rd_uleb(&a, &code) < 0)
            goto bad;
        if (code == 0)
            break;
        if (u->nabbrevs >= MAX_ABBREVS || rd_uleb(&a, &tag) < 0 || a.p >= a.end)
            goto bad;
        u->abbrevs = hp_xgrow(u->abbrevs, &cap, u->nabbrevs + 1, sizeof(*u->abbrevs));
        struct dwraw_abbrev *ab = &u->abbrevs[u->nabbrevs];
        *ab = (struct dwraw_abbrev){ .code = code, .tag = (uint16_t)(tag > 0xffff ? 0 : tag),
                                     .children = *a.p++ != 0,
                                     .first = (uint32_t)u->nspecs };
        uint64_t plain = 0;
        if (u->nabbrevs && code <= u->abbrevs[u->nabbrevs - 1].code)
            sorted = false;
        for (;;) {
            if (rd_uleb(&a, &at) < 0 || rd_uleb(&a, &form) < 0)
                goto bad;
            if (at == 0 && form == 0)
                break;
            if (u->nspecs >= MAX_SPECS)
                goto bad;
            int64_t ic = 0;
            if (form == F_implicit_const && rd_sleb(&a, &ic) < 0)
                goto bad;
            int fs = form_fixed_size(u, form);
            if (fs < 0 || attr_reported(at) || plain > UINT32_MAX)
                plain = UINT64_MAX;
            else
                plain += (uint64_t)fs;
            u->specs = hp_xgrow(u->specs, &scap, u->nspecs + 1, sizeof(*u->specs));
            u->specs[u->nspecs++] = (struct dwraw_spec){ (uint16_t)(at > 0xffff ? 0 : at),
                                                         (uint16_t)(form > 0xffff ? 0 : form),
                                                         ic };
            ab->n++;
        }
        ab->plain_size = plain >= UINT32_MAX ? UINT32_MAX : (uint32_t)plain;
        u->nabbrevs++;
    }
    /* An abbreviation code defined twice: libdwarf takes the first one. */
    if (!sorted)
        qsort(u->abbrevs, u->nabbrevs, sizeof(*u->abbrevs), abbrev_cmp);
    uint64_t maxc = u->nabbrevs ? u->abbrevs[u->nabbrevs - 1].code : 0;
    u->ndirect = (uint32_t)(maxc < DIRECT_CODES ? maxc + 1 : DIRECT_CODES);
    u->direct = hp_xcalloc(u->ndirect ? u->ndirect : 1, sizeof(*u->direct));
    for (size_t i = u->nabbrevs; i-- > 0;)
        if (u->abbrevs[i].code < u->ndirect)
            u->direct[u->abbrevs[i].code] = (uint32_t)i + 1;
    return 0;
bad:
    dwraw_unit_release(u);
    return HP_EPARSE;
}

void dwraw_unit_release(struct dwraw_unit *u)
{
    free(u->abbrevs);
    free(u->specs);
    free(u->direct);
    memset(u, 0, sizeof(*u));
}

static const struct dwraw_abbrev *abbrev_find(const struct dwraw_unit *u, uint64_t code)
{
    if (code < u->ndirect)
        return u->direct[code] ? &u->abbrevs[u->direct[code] - 1] : NULL;
    size_t lo = 0, hi = u->nabbrevs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->abbrevs[mid].code < code)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* The first of equal codes, as the direct table holds. */
    return lo < u->nabbrevs && u->abbrevs[lo].code == code ? &u->abbrevs[lo] : NULL;
}

/* ---- DIEs ------------------------------------------------------------- */

enum val_kind { V_NONE, V_ADDR, V_CONST, V_REF, V_SECOFF, V_OTHER };

/* Read (or skip) one attribute value of `form`; *kind says what *v holds. */
static int form_read(const struct dwraw_unit *u, struct cur *c, uint64_t form, int64_t implicit,
                     uint64_t *v, enum val_kind *kind)
{
    *kind = V_OTHER;
    *v = 0;
    uint64_t n;
    for (int indirections = 0;; indirections++) {
        if (form != F_indirect)
            break;
        if (indirections > 4 || rd_uleb(c, &form) < 0)
            return -1;
        if (form == F_implicit_const)
            return -1; /* has no value in the DIE to read */
    }
    switch (form) {
    case F_addr:
        *kind = V_ADDR;
        return rd_n(c, u->addr_size, v);
    case F_data1:
    case F_ref1:
    case F_flag:
    case F_strx1:
    case F_addrx1:
        *kind = form == F_data1 ? V_CONST : form == F_ref1 ? V_REF : V_OTHER;
        return rd_n(c, 1, v);
    case F_data2:
    case F_ref2:
    case F_strx2:
    case F_addrx2:
        *kind = form == F_data2 ? V_CONST : form == F_ref2 ? V_REF : V_OTHER;
        return rd_n(c, 2, v);
    case F_strx3:
    case F_addrx3:
        return rd_n(c, 3, v);
    case F_data4:
    case F_ref4:
    case F_ref_sup4:
    case F_strx4:
    case F_addrx4:
        *kind = form == F_data4 ? V_CONST : form == F_ref4 ? V_REF : V_OTHER;
        return rd_n(c, 4, v);
    case F_data8:
    case F_ref8:
    case F_ref_sig8:
    case F_ref_sup8:
        *kind = form == F_data8 ? V_CONST : form == F_ref8 ? V_REF : V_OTHER;
        return rd_n(c, 8, v);
    case F_data16:
        return skip(c, 16);
    case F_udata:
    case F_ref_udata:
        *kind = form == F_udata ? V_CONST : V_REF;
        return rd_uleb(c, v);
    case F_sdata: {
        int64_t s;
        return rd_sleb(c, &s);
    }
    case F_strx:
    case F_addrx:
    case F_loclistx:
    case F_rnglistx:
    case F_GNU_addr_index:
    case F_GNU_str_index:
        return rd_uleb(c, v);
    case F_string:
        return skip_cstr(c);
    case F_sec_offset:
        *kind = V_SECOFF;
        return rd_n(c, u->off_size, v);
    case F_strp:
    case F_line_strp:
    case F_strp_sup:
    case F_GNU_ref_alt:
    case F_GNU_strp_alt:
        return rd_n(c, u->off_size, v);
    case F_ref_addr:
        return rd_n(c, u->version <= 2 ? u->addr_size : u->off_size, v);
    case F_block1:
        return rd_n(c, 1, &n) < 0 ? -1 : skip(c, n);
    case F_block2:
        return rd_n(c, 2, &n) < 0 ? -1 : skip(c, n);
    case F_block4:
        return rd_n(c, 4, &n) < 0 ? -1 : skip(c, n);
    case F_block:
    case F_exprloc:
        return rd_uleb(c, &n) < 0 ? -1 : skip(c, n);
    case F_flag_present:
        return 0;
    case F_implicit_const:
        *kind = V_CONST;
        *v = (uint64_t)implicit;
        return 0;
    default:
        return -1; /* unknown form: its size is unknown */
    }
}

int dwraw_die_read(const struct dwraw_unit *u, const uint8_t *info, uint64_t *pos,
                   struct dwraw_die *d)
{
    memset(d, 0, sizeof(*d));
    if (*pos < u->die_start || *pos >= u->end)
        return -1;
    struct cur c = { info + *pos, info + u->end, u->msb };
    d->off = *pos;
    uint64_t code;
    if (rd_uleb(&c, &code) < 0)
        return -1;
    if (code == 0) {
        *pos = (uint64_t)(c.p - info);
        return 0;
    }
    const struct dwraw_abbrev *ab = abbrev_find(u, code);
    if (!ab)
        return -1;
    d->tag = ab->tag;
    d->children = ab->children;
    if (ab->plain_size != UINT32_MAX) {
        if ((uint64_t)(c.end - c.p) < ab->plain_size)
            return -1;
        *pos = (uint64_t)(c.p - info) + ab->plain_size;
        return 1;
    }
    bool seen_low = false, seen_high = false, seen_file = false, seen_line = false;
    for (uint32_t i = 0; i < ab->n; i++) {
        const struct dwraw_spec *s = &u->specs[ab->first + i];
        uint64_t v;
        enum val_kind k;
        if (form_read(u, &c, s->form, s->implicit, &v, &k) < 0)
            return -1;
        /* libdwarf's dwarf_attr answers the first of repeated attributes. */
        switch (s->at) {
        case AT_sibling:
            if (k == V_REF && !d->sibling && v < u->end - u->off)
                d->sibling = u->off + v;
            break;
        case AT_low_pc:
            if (seen_low)
                break;
            seen_low = true;
            if (k == V_ADDR) {
                d->has_low = true;
                d->low = v;
            } else {
                d->odd = true;
            }
            break;
        case AT_high_pc:
            if (seen_high)
                break;
            seen_high = true;
            if (k == V_ADDR || (k == V_CONST && s->form != F_implicit_const)) {
                d->has_high = true;
                d->high_const = k == V_CONST;
                d->high = v;
            } else {
                d->odd = true;
            }
            break;
        case AT_ranges:
            if (!d->has_ranges && k == V_SECOFF) {
                d->ranges_secoff = true;
                d->ranges = v;
            }
            d->has_ranges = true;
            break;
        case AT_rnglists_base:
        case AT_GNU_ranges_base:
            d->ranges_base = true;
            break;
        case AT_stmt_list:
            /* dwarf_srclines_b's reading: a section offset, or data4/data8
             * before DWARF 4. */
            if (!d->has_stmt_list &&
                (k == V_SECOFF || (k == V_CONST && (s->form == F_data4 || s->form == F_data8)))) {
                d->has_stmt_list = true;
                d->stmt_list = v;
            }
            break;
        case AT_call_file:
        case AT_call_line: {
            bool *seen = s->at == AT_call_file ? &seen_file : &seen_line;
            if (*seen)
                break;
            *seen = true;
            if (k != V_CONST) {
                d->odd = true;
                break;
            }
            if (s->form == F_implicit_const)
                v = s->implicit < 0 ? 0 : (uint64_t)s->implicit;
            if (s->at == AT_call_file)
                d->call_file = v;
            else
                d->call_line = v;
            break;
        }
        default:
            break;
        }
    }
    *pos = (uint64_t)(c.p - info);
    return 1;
}

int dwraw_skip_children(const struct dwraw_unit *u, const uint8_t *info, uint64_t *pos,
                        const struct dwraw_die *d)
{
    if (!d->children)
        return 0;
    /* DW_AT_sibling, when it points forward inside the unit, saves reading
     * the subtree; otherwise read it through to its terminating entry. */
    if (d->sibling > d->off && d->sibling < u->end && d->sibling >= *pos) {
        *pos = d->sibling;
        return 0;
    }
    struct dwraw_die x;
    for (uint64_t depth = 1; depth > 0;) {
        int r = dwraw_die_read(u, info, pos, &x);
        if (r < 0)
            return -1;
        if (r == 0)
            depth--;
        else if (x.children)
            depth++;
    }
    return 0;
}

/* ---- line programs ---------------------------------------------------- */

/* Rows of a line program; file names stay with libdwarf (dwarf_srcfiles).
 * It reads the programs compilers write (DWARF 2-5, opcode_base 10 or 13
 * with the standard operand counts, one operation per instruction) and
 * answers -1 for anything else, so the caller asks libdwarf. Rows follow
 * libdwarf 20210528's reading of the same bytes: its file register starts
 * at 0 in a DWARF 5 program, advance_pc ignores op_index, a negative line
 * fails the table. And where libdwarf reports a row after
 * DW_LNS_set_epilogue_begin as an end of sequence (see cu_load_lines in
 * dwarf.c), `end` here is already what cu_load_lines made of it: only
 * DW_LNE_end_sequence ends a sequence, unless epilogue_begin is pending. */
enum {
    LNS_copy = 1, LNS_advance_pc, LNS_advance_line, LNS_set_file, LNS_set_column,
    LNS_negate_stmt, LNS_set_basic_block, LNS_const_add_pc, LNS_fixed_advance_pc,
    LNS_set_prologue_end, LNS_set_epilogue_begin, LNS_set_isa,
    LNE_end_sequence = 1, LNE_set_address = 2, LNE_define_file = 3, LNE_set_discriminator = 4,
};

#define MAX_LINE_ROWS (1u << 26)

int dwraw_lines(const uint8_t *sec, size_t sec_len, uint64_t off, uint8_t cu_addr_size, bool msb,
                struct dwraw_row **ret_rows, size_t *ret_n)
{
    static const uint8_t std_lengths[12] = { 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1 };
    if (off >= sec_len)
        return -1;
    struct cur c = { sec + off, sec + sec_len, msb };
    uint64_t len, v;
    unsigned offsz = 4;
    if (rd_n(&c, 4, &len) < 0)
        return -1;
    if (len == 0xffffffff) {
        if (rd_n(&c, 8, &len) < 0)
            return -1;
        offsz = 8;
    } else if (len >= 0xfffffff0) {
        return -1;
    }
    if (len > (uint64_t)(c.end - c.p))
        return -1;
    c.end = c.p + len;
    if (rd_n(&c, 2, &v) < 0 || v < 2 || v > 5)
        return -1;
    unsigned version = (unsigned)v;
    uint64_t asz = cu_addr_size, seg = 0;
    if (version >= 5 && (rd_n(&c, 1, &asz) < 0 || rd_n(&c, 1, &seg) < 0 || seg != 0))
        return -1;
    if (asz != 4 && asz != 8)
        return -1;
    uint64_t hlen, min_inst, max_ops = 1, def_stmt, lrange, obase, lb;
    if (rd_n(&c, offsz, &hlen) < 0)
        return -1;
    const uint8_t *prog = c.p;
    if (hlen > (uint64_t)(c.end - prog))
        return -1;
    prog += hlen;
    if (rd_n(&c, 1, &min_inst) < 0 || (version >= 4 && rd_n(&c, 1, &max_ops) < 0) ||
        rd_n(&c, 1, &def_stmt) < 0 || rd_n(&c, 1, &lb) < 0 || rd_n(&c, 1, &lrange) < 0 ||
        rd_n(&c, 1, &obase) < 0)
        return -1;
    (void)def_stmt;
    int64_t line_base = (int8_t)(uint8_t)lb;
    if (max_ops > 1 || lrange == 0 || (obase != 13 && obase != 10))
        return -1;
    if ((uint64_t)(c.end - c.p) < obase - 1 || memcmp(c.p, std_lengths, obase - 1) != 0)
        return -1;

    /* Every row takes at least one byte of the program: reserving that
     * many (up to a bound) spares the copies of growing the array. */
    size_t cap = HP_MIN((size_t)(c.end - prog) + 1, (size_t)1 << 20);
    struct dwraw_row *rows = hp_xmalloc(cap * sizeof(*rows));
    size_t n = 0;
    c.p = prog;
    uint64_t addr = 0, file = version >= 5 ? 0 : 1;
    int64_t line = 1;
    bool epi = false;
    while (c.p < c.end) {
        uint8_t op = *c.p++;
        bool emit = false, end = false;
        if (op >= obase) {
            uint8_t adj = (uint8_t)(op - obase);
            addr += (adj / lrange) * min_inst;
            line += line_base + adj % lrange;
            if (line < 0)
                goto bad;
            emit = true;
        } else if (op == 0) {
            uint64_t ilen;
            if (rd_uleb(&c, &ilen) < 0 || c.p >= c.end || ilen == 0)
                goto bad;
            const uint8_t *next = c.p + 1;
            if (ilen - 1 > (uint64_t)(c.end - next))
                goto bad;
            next += ilen - 1;
            uint8_t sub = *c.p++;
            switch (sub) {
            case LNE_end_sequence:
                emit = true;
                end = !epi;
                break;
            case LNE_set_address:
                /* libdwarf reads the address size, whatever the length says */
                if (rd_n(&c, (unsigned)asz, &addr) < 0)
                    goto bad;
                next = c.p;
                break;
            case LNE_set_discriminator: /* libdwarf reads one uleb */
                if (rd_uleb(&c, &v) < 0)
                    goto bad;
                next = c.p;
                break;
            default: /* define_file (gone in DWARF 5) and the unknown: to libdwarf */
                goto bad;
            }
            c.p = next;
        } else {
            switch (op) {
            case LNS_copy:
                emit = true;
                break;
            case LNS_advance_pc:
                if (rd_uleb(&c, &v) < 0)
                    goto bad;
                addr += min_inst * v;
                break;
            case LNS_advance_line: {
                int64_t d;
                if (rd_sleb(&c, &d) < 0)
                    goto bad;
                line = (int64_t)((uint64_t)line + (uint64_t)d);
                if (line < 0)
                    goto bad;
                break;
            }
            case LNS_set_file:
                if (rd_uleb(&c, &file) < 0)
                    goto bad;
                break;
            case LNS_set_column:
            case LNS_set_isa:
                if (rd_uleb(&c, &v) < 0)
                    goto bad;
                break;
            case LNS_const_add_pc:
                addr += ((255u - obase) / lrange) * min_inst;
                break;
            case LNS_fixed_advance_pc:
                if (rd_n(&c, 2, &v) < 0)
                    goto bad;
                addr += v;
                break;
            case LNS_set_epilogue_begin:
                epi = true;
                break;
            default: /* negate_stmt, basic_block, prologue_end */
                break;
            }
        }
        if (!emit)
            continue;
        if (n >= MAX_LINE_ROWS)
            goto bad;
        rows = hp_xgrow(rows, &cap, n + 1, sizeof(*rows));
        struct dwraw_row *r = &rows[n++];
        r->addr = addr;
        r->line = end ? 0 : (uint32_t)line;
        r->file = end ? UINT32_MAX : file > UINT32_MAX - 1 ? 0 : (uint32_t)file;
        epi = false;
        if (op == 0) { /* end_sequence: the registers start over */
            addr = 0;
            file = version >= 5 ? 0 : 1;
            line = 1;
        }
    }
    *ret_rows = rows;
    *ret_n = n;
    return (int)version;
bad:
    free(rows);
    return -1;
}

/* ---- address range lists ---------------------------------------------- */

/* DW_AT_ranges in DW_FORM_sec_offset, for the scope walk. Reads what
 * die_ranges() in dwarf.c reads through libdwarf: DWARF 4 .debug_ranges
 * (pairs relative to the base, base selection entries) and DWARF 5
 * .debug_rnglists entries that carry addresses (offset_pair, base_address,
 * start_end, start_length); lists that need .debug_addr (the *x entries)
 * or run past the section are left to libdwarf. */
enum { RLE_end_of_list, RLE_base_addressx, RLE_startx_endx, RLE_startx_length,
       RLE_offset_pair, RLE_base_address, RLE_start_end, RLE_start_length };

#define MAX_RANGE_ENTRIES (1u << 20)

int dwraw_ranges(const uint8_t *sec, size_t sec_len, uint64_t off, unsigned version,
                 uint8_t addr_size, bool msb, uint64_t base, struct dwraw_range *out, size_t cap)
{
    if (!sec || off >= sec_len || (addr_size != 4 && addr_size != 8))
        return -1;
    struct cur c = { sec + off, sec + sec_len, msb };
    uint64_t maxaddr = addr_size == 8 ? UINT64_MAX : UINT32_MAX;
    size_t n = 0;
    for (unsigned guard = 0; guard < MAX_RANGE_ENTRIES; guard++) {
        uint64_t a, b;
        if (version < 5) {
            if (rd_n(&c, addr_size, &a) < 0 || rd_n(&c, addr_size, &b) < 0)
                return -1;
            if (a == 0 && b == 0)
                return (int)n;
            if (a == maxaddr) {
                base = b;
                continue;
            }
            a += base;
            b += base;
        } else {
            uint64_t kind;
            if (rd_n(&c, 1, &kind) < 0)
                return -1;
            switch (kind) {
            case RLE_end_of_list:
                return (int)n;
            case RLE_offset_pair:
                if (rd_uleb(&c, &a) < 0 || rd_uleb(&c, &b) < 0)
                    return -1;
                a += base;
                b += base;
                break;
            case RLE_base_address:
                if (rd_n(&c, addr_size, &base) < 0)
                    return -1;
                continue;
            case RLE_start_end:
                if (rd_n(&c, addr_size, &a) < 0 || rd_n(&c, addr_size, &b) < 0)
                    return -1;
                break;
            case RLE_start_length:
                if (rd_n(&c, addr_size, &a) < 0 || rd_uleb(&c, &b) < 0)
                    return -1;
                b += a;
                break;
            default:
                return -1;
            }
        }
        if (n >= cap)
            return -1;
        out[n++] = (struct dwraw_range){ a, b };
    }
    return -1;
}
