/* DWARF reader for the symbolizer: the only file that includes libdwarf.
 *
 * Cost follows the addresses asked for, not the size of the binary: opening
 * reads the section headers and .debug_aranges (GCC emits it for every CU;
 * when it is missing or does not cover an address, the CU headers are walked
 * once to read each CU's own ranges). A compilation unit is parsed on the
 * first request that falls into it: its line table is copied into a sorted
 * array, and the DIE tree is walked down to the functions (namespaces and
 * lexical scopes only; types are skipped), recording each subprogram that
 * has addresses. A function's own subtree (inlined subroutines, lexical
 * blocks) is read when an address first lands in it, appended as one block
 * of scopes in preorder, each with the index one past its last descendant,
 * so a lookup finds the outermost function by binary search and descends
 * into the inline chain child by child. Names are
 * resolved only for the scopes an address lands in (through abstract_origin
 * and specification) and cached by DIE offset.
 *
 * Frames follow addr2line -i: the innermost scope gets the line table's
 * file:line for the address, each enclosing scope gets the DW_AT_call_file
 * and DW_AT_call_line of the inlined subroutine it contains.
 *
 * libdwarf handles are not thread-safe; sym_dw_prepare() parses CUs on extra
 * threads each with its own Dwarf_Debug on the same file, and hands the
 * results (plain arrays and strings in per-CU arenas) back to the owner.
 * libdwarf also keeps process-wide state shared by every handle: the calls
 * that touch it run under one lock (libdwarf_global_mu, with the audit).
 *
 * Where libdwarf's API was the measured bottleneck of the cold path, a
 * narrow reader (dwraw.c) does that one job on the same section bytes: the
 * line programs, the DIE walks above (a CU's functions, a function's inline
 * tree) and their DW_AT_ranges lists. perf on tests/bench/sym-bench.sh
 * (24 units, 14,936 addresses) before them: inline trees 55% of the cold
 * CPU, line tables 27%; symtool addr went from 0.42 s of CPU to 0.12 s.
 * Each falls back to libdwarf for what it does not read (compressed or
 * unusual sections, forms, opcodes; any malformed unit), and
 * HEAPFLEET_DWARF_READER=libdwarf (or sym_dw_set_narrow) turns them off;
 * tests/sym/narrow_agree.py checks that both give the same frames on the
 * C, C++ and Rust fixtures. libdwarf still opens the file, finds the CUs
 * (aranges, CU headers), lists a CU's files and resolves names.
 *
 * Every libdwarf error is translated here into "no information" for the
 * address or CU concerned (hostile files are expected); nothing is fatal. */
#include "collector/sym/sym-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dw_range {
    uint64_t lo, hi;
};

struct dw_scope {
    uint32_t range_off, nranges; /* into cu->ranges */
    uint32_t first_child;        /* children are [first_child, end), each */
    uint32_t end;                /* followed by its own descendants */
    bool lazy;                   /* subtree not read yet (scope_expand) */
    int32_t parent;              /* -1 for a top-level subprogram */
    uint64_t die_off;            /* for the name, resolved lazily */
    uint32_t call_file, call_line;
    bool inlined;
};

struct dw_top {
    uint64_t lo, hi;
    uint32_t scope;
};

/* Line rows are struct dwraw_row (sym-internal.h): the narrow reader's
 * array becomes the CU's as it is. file is an index into cu->files (from
 * cu->file_base), UINT32_MAX at an end of sequence. */

enum { CU_UNLOADED = 0, CU_LOADED, CU_FAILED };

struct dw_cu {
    uint64_t die_off;
    int state;
    uint16_t version;
    bool types_code; /* a Rust CU: methods with code may sit inside types */
    uint64_t base; /* CU base address for DWARF 4 range lists */
    struct hp_arena arena;
    const char **files;
    uint32_t nfiles;
    int32_t file_base; /* file number of files[0] (1 before DWARF 5, 0 after) */
    struct dwraw_row *rows;
    size_t nrows;
    struct dw_scope *scopes;
    size_t nscopes, scopes_cap;
    struct dw_range *ranges;
    size_t nranges, ranges_cap;
    struct dw_top *tops;
    uint64_t *tops_maxhi; /* hp_interval_maxhi of tops */
    size_t ntops;
    struct dwraw_unit raw; /* for the narrow readers (dwraw.c) */
    bool narrow;           /* use them (sym_dw_set_narrow) */
    bool raw_ok;
    bool raw_bad;          /* had its bytes, found its header malformed */
    bool ranges_narrow;    /* DW_AT_ranges lists read by dwraw_ranges */
    bool lines_narrow;     /* the rows came from dwraw_lines */
    uint32_t trees_narrow; /* inline trees read by the narrow reader */
};

/* One libdwarf handle and the ELF mapping under it (see "sections by
 * mmap" below); each is used by one thread at a time. */
struct dw_obj {
    char tag; /* dwarf_finish() switches on the object's first byte (E, F, M,
               * P for its own readers); we never call it, see finish_handle */
    Elf *elf;
    size_t nsec, shstrndx;
    unsigned char class_, data;
    struct dw_obj *next; /* open handles, under libdwarf_global_mu */
    Dwarf_Debug dbg;
    Dwarf_Obj_Access_Interface ai; /* libdwarf keeps a pointer to it */
    /* .debug_info and .debug_abbrev for the narrow reader, found once */
    int info_state; /* 0 not looked for, 1 found, -1 not usable */
    const uint8_t *info, *abbrev, *line, *ranges, *rnglists;
    size_t info_len, abbrev_len, line_len, ranges_len, rnglists_len;
};
static Dwarf_Debug obj_dbg(const struct dw_obj *o);
static bool obj_info_bytes(struct dw_obj *o, const uint8_t **info, size_t *info_len,
                           const uint8_t **abbrev, size_t *abbrev_len, bool *msb);
/* HEAPFLEET_DWARF_READER=libdwarf: inline trees through libdwarf's DIE API
 * only (tests/sym/narrow_agree.py compares the two readers). Set once, in
 * tracking_init, before any handle is opened. */
static bool narrow_off;

struct dw_aentry {
    uint64_t lo, hi;
    uint32_t cu;
};

struct sym_dw {
    char *path;
    int fd;
    Dwarf_Debug dbg;
    struct dw_obj *obj; /* dbg's */
    bool narrow;        /* new CUs use the narrow readers */
    /* dwz's common file (.gnu_debugaltlink), tied to dbg so libdwarf reads
     * DW_FORM_GNU_strp_alt strings from it; DW_FORM_GNU_ref_alt DIEs are
     * looked up in it here. -1 / NULL when there is none. */
    int alt_fd;
    Dwarf_Debug alt;
    struct dw_cu *cus;
    size_t ncus, cus_cap;
    struct hp_map64 cu_by_off; /* CU DIE offset -> index */
    struct dw_aentry *aranges;
    size_t naranges, aranges_cap;
    uint64_t *aranges_maxhi; /* hp_interval_maxhi of aranges */
    bool scanned; /* every CU header walked */
    bool aranges_read; /* .debug_aranges read (on the first lookup) */
    struct hp_map64 names;      /* DIE offset -> index into name_tab */
    struct dw_name *name_tab;
    size_t nnames, names_cap;
    struct hp_arena arena;
};

/* libdwarf 20210528 is not thread-safe across handles either: some of its
 * state is process-wide. What follows is the audit of every mutable static
 * and global in its libdwarf/ directory (tag 20210528), and what makes each
 * safe here. Calls marked LOCKED run under libdwarf_global_mu, one at a time
 * in the whole process, whichever sym_dw or thread makes them.
 *
 *  - dwarf_line.c create_fullest_file_path(): five function-level
 *    `static char[300]` buffers (targbuf, nbuf, compdirbuf, incdirbuf,
 *    filenamebuf) used as dwarfstring storage; the path is built there, an
 *    allocation is sized from this thread's length, then strcpy'd from the
 *    shared buffer. Two threads overflow each other's allocations (glibc
 *    "malloc(): corrupted top size"; ASan heap-buffer-overflow in strcpy).
 *    Reached from dwarf_srcfiles() and dwarf_linesrc()/dwarf_filename().
 *    We call only dwarf_srcfiles(): LOCKED. dwarf_linesrc is never called.
 *  - dwarf_groups.c: map_reccount, temp_map_data, target_group,
 *    found_name_in_group: built while a handle sorts its section groups,
 *    inside dwarf_object_init_b() (and freed in dwarf_object_finish()):
 *    both LOCKED.
 *  - dwarf_alloc.c: global_de_alloc_tree_on, written by
 *    dwarf_set_de_alloc_flag() and read by _dwarf_get_debug() (inside
 *    dwarf_object_init_b) and every allocation: we call the setter once per
 *    process, under pthread_once, before the first handle is opened (see
 *    tracking_init), so afterwards it is only read. The global_allocation_* and
 *    global_de_alloc_tree_* counters are compiled only with
 *    HAVE_GLOBAL_ALLOC_SUMS, which Debian's build does not define.
 *    _dwarf_failsafe_error is written only when malloc itself fails, and
 *    out of memory aborts this process anyway (STYLE.md).
 *  - dwarf_init_finish.c: _dwarf_assume_string_in_bounds,
 *    _dwarf_apply_relocs, _dwarf_get_elf_flags_func_ptr: written only by
 *    their setters (dwarf_set_stringcheck, dwarf_set_reloc_application,
 *    dwarf_set_elf_flags_func), which we never call.
 *  - dwarf_debuglink.c winbuf, joinchar, joinstr: dwarf_gnu_debuglink and
 *    dwarf_add_debuglink_global_paths only; never called.
 *  - dwarf_print_lines.c locallinebuf: the dwarf_print_lines family only;
 *    never called.
 *  - dwarf_die_CU_offset_range (cu_load, for the narrow reader) reads the
 *    DIE's CU context of its own handle only.
 *  - Read-only after load (never written): dwarfstring.c minimumnewlen and
 *    its digit tables, dwarf_tsearchhash.c primes/allowed_fill_percent,
 *    dwarf_die_deliv.c dwarfsig8zero, the expbytes table of the line
 *    reader, dwarf_object_detector.c archive_magic.
 * Everything else a call touches hangs off its own Dwarf_Debug (allocation
 * tree, section data, CU contexts, abbreviation tables), and each handle is
 * used by one thread at a time. Opening and closing handles
 * (dwarf_object_init_b/dwarf_object_finish) are LOCKED as well
 * for the group tables above; opening and closing handles is rare next to
 * parsing, and the file list of a CU is small next to its line table, so the
 * lock costs little. A call added to this file must be checked against this
 * list. */
static pthread_mutex_t libdwarf_global_mu = PTHREAD_MUTEX_INITIALIZER;

static void dw_err_free(Dwarf_Debug dbg, Dwarf_Error *e)
{
    if (*e) {
        dwarf_dealloc_error(dbg, *e);
        *e = NULL;
    }
}

/* A string attribute of a DIE (pointing into .debug_str or .debug_info:
 * never freed), or NULL. Not dwarf_die_text()/dwarf_diename(): libdwarf
 * 20210528's dwarf_die_text drops the error dwarf_attr makes on a malformed
 * DIE, which leaks once allocation tracking is off (see tracking_init). */
static char *die_string(Dwarf_Debug dbg, Dwarf_Die die, Dwarf_Half at)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    char *s = NULL;
    if (dwarf_attr(die, at, &a, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return NULL;
    }
    if (dwarf_formstring(a, &s, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        s = NULL;
    }
    dwarf_dealloc_attribute(a);
    return s;
}

/* ---- CU table ------------------------------------------------------------ */

static uint32_t cu_for_offset(struct sym_dw *d, uint64_t die_off)
{
    uint32_t idx;
    if (hp_map64_get(&d->cu_by_off, die_off, &idx))
        return idx;
    d->cus = hp_xgrow(d->cus, &d->cus_cap, d->ncus + 1, sizeof(*d->cus));
    idx = (uint32_t)d->ncus++;
    struct dw_cu *cu = &d->cus[idx];
    memset(cu, 0, sizeof(*cu));
    cu->die_off = die_off;
    cu->narrow = d->narrow;
    hp_arena_init(&cu->arena);
    (void)hp_map64_put(&d->cu_by_off, die_off, idx, &idx);
    return idx;
}

static void arange_add(struct sym_dw *d, uint64_t lo, uint64_t hi, uint32_t cu)
{
    if (hi <= lo)
        return;
    d->aranges = hp_xgrow(d->aranges, &d->aranges_cap, d->naranges + 1, sizeof(*d->aranges));
    d->aranges[d->naranges++] = (struct dw_aentry){ lo, hi, cu };
}

static int aentry_cmp(const void *a, const void *b)
{
    const struct dw_aentry *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static void aranges_sort(struct sym_dw *d)
{
    if (d->naranges > 1)
        hp_qsort(d->aranges, d->naranges, sizeof(*d->aranges), aentry_cmp);
    free(d->aranges_maxhi);
    d->aranges_maxhi = hp_xmalloc((d->naranges ? d->naranges : 1) * sizeof(uint64_t));
    hp_interval_maxhi(d->aranges, d->naranges, sizeof(*d->aranges),
                      offsetof(struct dw_aentry, hi), d->aranges_maxhi);
}

static void read_aranges(struct sym_dw *d)
{
    Dwarf_Arange *list = NULL;
    Dwarf_Signed count = 0;
    Dwarf_Error e = NULL;
    int r = dwarf_get_aranges(d->dbg, &list, &count, &e);
    if (r != DW_DLV_OK) {
        dw_err_free(d->dbg, &e);
        return;
    }
    for (Dwarf_Signed i = 0; i < count; i++) {
        Dwarf_Unsigned seg, segsz, len;
        Dwarf_Addr start;
        Dwarf_Off cuoff;
        if (dwarf_get_arange_info_b(list[i], &seg, &segsz, &start, &len, &cuoff, &e) ==
            DW_DLV_OK) {
            if (start != 0 && len != 0)
                arange_add(d, start, start + len, cu_for_offset(d, cuoff));
        } else {
            dw_err_free(d->dbg, &e);
        }
        dwarf_dealloc(d->dbg, list[i], DW_DLA_ARANGE);
    }
    dwarf_dealloc(d->dbg, list, DW_DLA_LIST);
}

/* Address ranges of a DIE: low/high pc, or DW_AT_ranges (DWARF 4
 * .debug_ranges relative to the CU base, or DWARF 5 .debug_rnglists).
 * Appends to (*out, *n, *cap). Returns the number appended. */
static size_t die_ranges(Dwarf_Debug dbg, Dwarf_Die die, uint16_t version, uint64_t cu_base,
                         struct dw_range **out, size_t *n, size_t *cap)
{
    Dwarf_Error e = NULL;
    size_t before = *n;
    Dwarf_Addr lo;
    if (dwarf_lowpc(die, &lo, &e) == DW_DLV_OK) {
        Dwarf_Addr hi;
        Dwarf_Half form;
        enum Dwarf_Form_Class cls;
        if (dwarf_highpc_b(die, &hi, &form, &cls, &e) == DW_DLV_OK) {
            if (cls == DW_FORM_CLASS_CONSTANT)
                hi += lo;
            if (hi > lo && lo != 0) {
                *out = hp_xgrow(*out, cap, *n + 1, sizeof(**out));
                (*out)[(*n)++] = (struct dw_range){ lo, hi };
            }
            return *n - before;
        }
        dw_err_free(dbg, &e);
    } else {
        dw_err_free(dbg, &e);
    }

    Dwarf_Attribute attr = NULL;
    if (dwarf_attr(die, DW_AT_ranges, &attr, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return 0;
    }
    Dwarf_Half form = 0;
    Dwarf_Unsigned val = 0;
    if (dwarf_whatform(attr, &form, &e) != DW_DLV_OK)
        goto out;
    if (form == DW_FORM_sec_offset) {
        /* libdwarf 20210528's dwarf_formudata refuses DW_FORM_sec_offset
         * with an allocated error (one per ranged scope, ~158k on a 100 MB
         * program); dwarf_global_formref reads it directly. */
        Dwarf_Off off;
        if (dwarf_global_formref(attr, &off, &e) != DW_DLV_OK)
            goto out;
        val = off;
    } else if (form == DW_FORM_rnglistx || form == DW_FORM_data4 || form == DW_FORM_data8) {
        if (dwarf_formudata(attr, &val, &e) != DW_DLV_OK)
            goto out;
    } else {
        goto out;
    }
    if (version >= 5) {
        Dwarf_Rnglists_Head head = NULL;
        Dwarf_Unsigned count = 0, goff = 0;
        if (dwarf_rnglists_get_rle_head(attr, form, val, &head, &count, &goff, &e) !=
            DW_DLV_OK)
            goto out;
        for (Dwarf_Unsigned i = 0; i < count && i < 1u << 20; i++) {
            unsigned elen = 0, code = 0;
            Dwarf_Unsigned raw1, raw2, c1 = 0, c2 = 0;
            Dwarf_Bool unavail = 0;
            if (dwarf_get_rnglists_entry_fields_a(head, i, &elen, &code, &raw1, &raw2,
                                                  &unavail, &c1, &c2, &e) != DW_DLV_OK) {
                dw_err_free(dbg, &e);
                break;
            }
            if (unavail)
                continue;
            if (code == DW_RLE_startx_endx || code == DW_RLE_startx_length ||
                code == DW_RLE_offset_pair || code == DW_RLE_start_end ||
                code == DW_RLE_start_length) {
                if (c2 > c1 && c1 != 0) {
                    *out = hp_xgrow(*out, cap, *n + 1, sizeof(**out));
                    (*out)[(*n)++] = (struct dw_range){ c1, c2 };
                }
            }
        }
        dwarf_dealloc_rnglists_head(head);
    } else {
        Dwarf_Ranges *rs = NULL;
        Dwarf_Signed cnt = 0;
        Dwarf_Unsigned bytes = 0;
        Dwarf_Off real = 0;
        if (dwarf_get_ranges_b(dbg, val, die, &real, &rs, &cnt, &bytes, &e) != DW_DLV_OK)
            goto out;
        uint64_t base = cu_base;
        for (Dwarf_Signed i = 0; i < cnt; i++) {
            if (rs[i].dwr_type == DW_RANGES_END)
                break;
            if (rs[i].dwr_type == DW_RANGES_ADDRESS_SELECTION) {
                base = rs[i].dwr_addr2;
                continue;
            }
            uint64_t a = rs[i].dwr_addr1 + base, b = rs[i].dwr_addr2 + base;
            if (b > a && a != 0) {
                *out = hp_xgrow(*out, cap, *n + 1, sizeof(**out));
                (*out)[(*n)++] = (struct dw_range){ a, b };
            }
        }
        dwarf_ranges_dealloc(dbg, rs, cnt);
    }
out:
    dw_err_free(dbg, &e);
    dwarf_dealloc_attribute(attr);
    return *n - before;
}

/* Walk every CU header once, adding the ranges of CUs that .debug_aranges
 * did not describe (clang emits no aranges by default). */
static void scan_cus(struct sym_dw *d)
{
    d->scanned = true;
    Dwarf_Error e = NULL;
    /* CUs already described by aranges are skipped. */
    struct hp_map64 have;
    hp_map64_init(&have);
    for (size_t i = 0; i < d->naranges; i++) {
        uint32_t dummy;
        (void)hp_map64_put(&have, d->aranges[i].cu, 1, &dummy);
    }
    for (unsigned guard = 0; guard < 1u << 24; guard++) {
        Dwarf_Unsigned hlen, typeoff, next;
        Dwarf_Half ver, asz, lsz, esz, cutype;
        Dwarf_Sig8 sig;
        Dwarf_Off aoff;
        int r = dwarf_next_cu_header_d(d->dbg, 1, &hlen, &ver, &aoff, &asz, &lsz, &esz, &sig,
                                       &typeoff, &next, &cutype, &e);
        if (r != DW_DLV_OK) {
            dw_err_free(d->dbg, &e);
            break;
        }
        Dwarf_Die die = NULL;
        if (dwarf_siblingof_b(d->dbg, NULL, 1, &die, &e) != DW_DLV_OK) {
            dw_err_free(d->dbg, &e);
            continue;
        }
        Dwarf_Off off = 0;
        if (dwarf_dieoffset(die, &off, &e) == DW_DLV_OK) {
            uint32_t idx = cu_for_offset(d, off), dummy;
            if (!hp_map64_get(&have, idx, &dummy)) {
                struct dw_range *rs = NULL;
                size_t n = 0, cap = 0;
                Dwarf_Addr base = 0;
                if (dwarf_lowpc(die, &base, &e) != DW_DLV_OK) {
                    dw_err_free(d->dbg, &e);
                    base = 0;
                }
                die_ranges(d->dbg, die, ver, base, &rs, &n, &cap);
                for (size_t i = 0; i < n; i++)
                    arange_add(d, rs[i].lo, rs[i].hi, idx);
                free(rs);
            }
        } else {
            dw_err_free(d->dbg, &e);
        }
        dwarf_dealloc_die(die);
    }
    hp_map64_release(&have);
    aranges_sort(d);
}

static int cu_find(struct sym_dw *d, uint64_t addr)
{
    if (!d->aranges_read) {
        /* Not at open: dwarf_get_aranges makes libdwarf read all of
         * .debug_info, and a run answered from the on-disk cache never
         * looks an address up. */
        d->aranges_read = true;
        read_aranges(d);
        aranges_sort(d);
    }
    for (int pass = 0; pass < 2; pass++) {
        size_t i = hp_interval_find(d->aranges, d->naranges, sizeof(*d->aranges),
                                    offsetof(struct dw_aentry, lo), offsetof(struct dw_aentry, hi),
                                    d->aranges_maxhi, addr);
        if (i != SIZE_MAX)
            return (int)d->aranges[i].cu;
        if (d->scanned)
            return -1;
        scan_cus(d);
    }
    return -1;
}

/* ---- loading one CU ------------------------------------------------------ */

static int row_cmp(const void *a, const void *b)
{
    const struct dwraw_row *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    /* At one address an end of sequence sorts before the rows that start
     * the next sequence there. */
    bool xe = x->file == UINT32_MAX, ye = y->file == UINT32_MAX;
    if (xe != ye)
        return xe ? -1 : 1;
    return 0;
}

struct dw_seq {
    uint64_t lo, hi;
    size_t first, n;
};

static int seq_cmp(const void *a, const void *b)
{
    const struct dw_seq *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Order the rows by address. Within a sequence addresses never decrease
 * (DWARF 5, 6.2.5.1), and GCC emits one sequence per code section
 * (.text, .text.startup, .text.unlikely, ...), so sorting the sequences and
 * concatenating them is enough unless sequences overlap; only then are the
 * rows themselves sorted. */
static void rows_sort(struct dw_cu *cu)
{
    size_t n = cu->nrows;
    struct dw_seq *seq = NULL;
    size_t nseq = 0, cap = 0, start = 0;
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && row_cmp(&cu->rows[i - 1], &cu->rows[i]) > 0)
            sorted = false;
        if (cu->rows[i].file == UINT32_MAX || i + 1 == n) {
            seq = hp_xgrow(seq, &cap, nseq + 1, sizeof(*seq));
            seq[nseq++] = (struct dw_seq){ cu->rows[start].addr, cu->rows[i].addr, start,
                                           i + 1 - start };
            start = i + 1;
        }
    }
    if (sorted) {
        free(seq);
        return;
    }
    hp_qsort(seq, nseq, sizeof(*seq), seq_cmp);
    bool disjoint = true;
    for (size_t i = 1; i < nseq && disjoint; i++)
        if (seq[i].lo < seq[i - 1].hi)
            disjoint = false;
    for (size_t i = 0; i < nseq && disjoint; i++)
        for (size_t k = seq[i].first + 1; k < seq[i].first + seq[i].n; k++)
            if (cu->rows[k].addr < cu->rows[k - 1].addr)
                disjoint = false;
    if (disjoint) {
        struct dwraw_row *out = hp_xmalloc(n * sizeof(*out));
        size_t w = 0;
        for (size_t i = 0; i < nseq; i++) {
            memcpy(out + w, cu->rows + seq[i].first, seq[i].n * sizeof(*out));
            w += seq[i].n;
        }
        free(cu->rows);
        cu->rows = out;
    } else {
        hp_qsort(cu->rows, n, sizeof(*cu->rows), row_cmp);
    }
    free(seq);
}

/* libdwarf 20210528 starts the file register of a DWARF 5 line program
 * at 0 instead of 1, so rows before the first DW_LNS_set_file come back
 * as file 0. GCC never refers to file 0 explicitly (its file 0 is the
 * CU's name, usually repeated as file 1), so for GCC-made v5 tables a 0
 * means the default, 1. Clang does use file 0 explicitly; leave it. */
static bool zero_is_one(Dwarf_Debug dbg, Dwarf_Die cudie, unsigned line_version)
{
    if (line_version < 5)
        return false;
    const char *prod = die_string(dbg, cudie, DW_AT_producer);
    return prod && strncmp(prod, "GNU ", 4) == 0;
}

static void row_set(struct dwraw_row *r, uint64_t addr, uint64_t ln, uint64_t fno, bool end,
                    bool zero_one)
{
    r->addr = addr;
    r->line = end ? 0 : (uint32_t)ln;
    if (end)
        fno = 0;
    else if (fno == 0 && zero_one)
        fno = 1;
    r->file = end ? UINT32_MAX : (uint32_t)(fno > UINT32_MAX - 1 ? 0 : fno);
}

/* The rows through the narrow reader (dwraw_lines); false when it leaves
 * this CU's program to libdwarf. */
static bool cu_lines_narrow(struct dw_obj *o, struct dw_cu *cu, Dwarf_Die cudie)
{
    const uint8_t *info, *abbrev;
    size_t ilen, alen;
    bool msb;
    if (!cu->raw_ok || !o->line || !obj_info_bytes(o, &info, &ilen, &abbrev, &alen, &msb))
        return false;
    uint64_t pos = cu->die_off;
    struct dwraw_die die;
    if (dwraw_die_read(&cu->raw, info, &pos, &die) != 1 || !die.has_stmt_list)
        return false;
    struct dwraw_row *rows = NULL;
    size_t n = 0;
    int ver = dwraw_lines(o->line, o->line_len, die.stmt_list, cu->raw.addr_size, msb, &rows, &n);
    if (ver < 0)
        return false;
    if (zero_is_one(obj_dbg(o), cudie, (unsigned)ver))
        for (size_t i = 0; i < n; i++)
            if (rows[i].file == 0)
                rows[i].file = 1;
    cu->rows = rows;
    cu->nrows = n;
    rows_sort(cu);
    return true;
}

static void cu_load_lines(struct dw_obj *o, struct dw_cu *cu, Dwarf_Die cudie)
{
    Dwarf_Debug dbg = obj_dbg(o);
    Dwarf_Error e = NULL;
    char **files = NULL;
    Dwarf_Signed nfiles = 0;
    /* create_fullest_file_path's static buffers: see libdwarf_global_mu. */
    pthread_mutex_lock(&libdwarf_global_mu);
    int sr = dwarf_srcfiles(cudie, &files, &nfiles, &e);
    pthread_mutex_unlock(&libdwarf_global_mu);
    if (sr == DW_DLV_OK) {
        if (nfiles > 0 && nfiles < (1 << 20)) {
            cu->files = hp_arena_alloc(&cu->arena, (size_t)nfiles * sizeof(*cu->files));
            for (Dwarf_Signed i = 0; i < nfiles; i++)
                cu->files[i] = hp_arena_strdup(&cu->arena, files[i] ? files[i] : "??");
            cu->nfiles = (uint32_t)nfiles;
        }
        for (Dwarf_Signed i = 0; i < nfiles; i++)
            dwarf_dealloc(dbg, files[i], DW_DLA_STRING);
        dwarf_dealloc(dbg, files, DW_DLA_LIST);
    } else {
        dw_err_free(dbg, &e);
    }
    /* dwarf_srcfiles lists DWARF 5 files from entry 0, older ones from 1. */
    cu->file_base = cu->version >= 5 ? 0 : 1;
    if (cu_lines_narrow(o, cu, cudie)) {
        cu->lines_narrow = true;
        return;
    }

    Dwarf_Unsigned lver = 0;
    Dwarf_Small tcount = 0;
    Dwarf_Line_Context ctx = NULL;
    if (dwarf_srclines_b(cudie, &lver, &tcount, &ctx, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return;
    }
    bool zero_one = zero_is_one(dbg, cudie, (unsigned)lver);
    Dwarf_Line *lines = NULL;
    Dwarf_Signed nlines = 0;
    if (dwarf_srclines_from_linecontext(ctx, &lines, &nlines, &e) == DW_DLV_OK && nlines > 0) {
        cu->rows = hp_xmalloc((size_t)nlines * sizeof(*cu->rows));
        size_t n = 0;
        for (Dwarf_Signed i = 0; i < nlines; i++) {
            Dwarf_Addr a;
            Dwarf_Unsigned ln = 0, fno = 0;
            Dwarf_Bool end = 0;
            if (dwarf_lineaddr(lines[i], &a, &e) != DW_DLV_OK) {
                dw_err_free(dbg, &e);
                continue;
            }
            if (dwarf_lineendsequence(lines[i], &end, &e) != DW_DLV_OK)
                dw_err_free(dbg, &e);
            if (end) {
                /* libdwarf 20210528 stores a special opcode's row with
                 * `li_end_sequence = li_epilogue_begin = epilogue_begin`
                 * (dwarf_line_table_reader_common.h), so every row after
                 * DW_LNS_set_epilogue_begin (LLVM emits it: rustc,
                 * clang) reads as an end of sequence and the function's
                 * epilogue had no line (??:0 where llvm-symbolizer prints
                 * the line; ~9% of a Rust binary's functions). A real
                 * DW_LNE_end_sequence row does not carry epilogue_begin:
                 * the flag is cleared after every row. */
                Dwarf_Bool pe = 0, eb = 0;
                Dwarf_Unsigned isa = 0, disc = 0;
                if (dwarf_prologue_end_etc(lines[i], &pe, &eb, &isa, &disc, &e) != DW_DLV_OK)
                    dw_err_free(dbg, &e);
                else if (eb)
                    end = 0;
            }
            if (!end) {
                if (dwarf_lineno(lines[i], &ln, &e) != DW_DLV_OK)
                    dw_err_free(dbg, &e);
                if (dwarf_line_srcfileno(lines[i], &fno, &e) != DW_DLV_OK)
                    dw_err_free(dbg, &e);
            }
            row_set(&cu->rows[n++], a, ln, fno, end, zero_one);
        }
        cu->nrows = n;
        rows_sort(cu);
    } else {
        dw_err_free(dbg, &e);
    }
    dwarf_srclines_dealloc_b(ctx);
}

struct walk {
    Dwarf_Debug dbg;
    struct dw_cu *cu;
    uint64_t cu_base;
    unsigned dies;
    bool in_sub;      /* inside a subprogram's subtree */
    bool types_code;  /* functions with code may sit inside type DIEs */
};

static bool tag_descends(Dwarf_Half tag, bool types_code)
{
    switch (tag) {
    /* rustc before 1.64 or so places methods with code inside the
     * DW_TAG_structure_type of their impl's Self type (later ones use a
     * "{impl#N}" namespace); only Rust CUs pay for descending into types. */
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
    case DW_TAG_enumeration_type:
    case DW_TAG_class_type:
        return types_code;
    case DW_TAG_compile_unit:
    case DW_TAG_partial_unit:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_lexical_block:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
        return true;
    /* Types are not descended into: member functions with code appear at
     * namespace or CU level (DW_AT_specification points into the class),
     * in GCC, clang and rustc output alike, and types are most of the DIEs. */
    default:
        return false;
    }
}

static uint32_t attr_udata(Dwarf_Debug dbg, Dwarf_Die die, Dwarf_Half at)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    Dwarf_Unsigned v = 0;
    if (dwarf_attr(die, at, &a, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return 0;
    }
    /* GCC 12 puts DW_AT_call_file/DW_AT_call_line values shared by every
     * DIE of an abbreviation into the abbreviation (DW_FORM_implicit_const),
     * which libdwarf 20210528's dwarf_formudata rejects; dwarf_formsdata
     * reads it. */
    Dwarf_Half form = 0;
    if (dwarf_whatform(a, &form, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        form = 0;
    }
    if (form == DW_FORM_implicit_const) {
        Dwarf_Signed sv = 0;
        if (dwarf_formsdata(a, &sv, &e) != DW_DLV_OK) {
            dw_err_free(dbg, &e);
            sv = 0;
        }
        v = sv < 0 ? 0 : (Dwarf_Unsigned)sv;
    } else if (dwarf_formudata(a, &v, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        v = 0;
    }
    dwarf_dealloc_attribute(a);
    return v > UINT32_MAX ? 0 : (uint32_t)v;
}

/* The next sibling of child, like dwarf_siblingof_b, but only forward: in
 * well-formed DWARF a sibling lies after the DIE before it, while a damaged
 * DW_AT_sibling can point back and make the chain a cycle (fuzz-elf found
 * one that walked forever). A sibling at or before child ends the chain. */
static int next_sibling(Dwarf_Debug dbg, Dwarf_Die child, Dwarf_Die *ret_next, Dwarf_Error *e)
{
    Dwarf_Die next = NULL;
    int r = dwarf_siblingof_b(dbg, child, 1, &next, e);
    if (r != DW_DLV_OK)
        return r;
    Dwarf_Off co = 0, no = 0;
    if (dwarf_dieoffset(child, &co, e) != DW_DLV_OK || dwarf_dieoffset(next, &no, e) != DW_DLV_OK ||
        no <= co) {
        dwarf_dealloc_die(next);
        return DW_DLV_NO_ENTRY; /* *e, if any, is freed by the caller */
    }
    *ret_next = next;
    return DW_DLV_OK;
}

/* Record a subprogram or inlined subroutine whose ranges were just
 * appended from ranges_before on; *ret_idx is its index. */
static struct dw_scope *scope_add(struct dw_cu *cu, size_t ranges_before, int32_t parent,
                                  uint64_t die_off, bool inlined, uint32_t call_file,
                                  uint32_t call_line, int32_t *ret_idx)
{
    cu->scopes = hp_xgrow(cu->scopes, &cu->scopes_cap, cu->nscopes + 1, sizeof(*cu->scopes));
    int32_t self = (int32_t)cu->nscopes++;
    struct dw_scope *s = &cu->scopes[self];
    memset(s, 0, sizeof(*s));
    s->range_off = (uint32_t)ranges_before;
    s->nranges = (uint32_t)(cu->nranges - ranges_before);
    /* A subprogram nested in another (GNU C nested functions) is a
     * physical function of its own: it ends the inline chain. */
    s->parent = inlined ? parent : -1;
    s->die_off = die_off;
    if (inlined) {
        s->inlined = true;
        s->call_file = call_file;
        s->call_line = call_line;
    }
    *ret_idx = self;
    return s;
}

static void walk_die(struct walk *w, Dwarf_Die die, int32_t parent, int depth)
{
    Dwarf_Error e = NULL;
    Dwarf_Half tag = 0;
    if (depth > SYM_MAX_DIE_DEPTH || dwarf_tag(die, &tag, &e) != DW_DLV_OK) {
        dw_err_free(w->dbg, &e);
        return;
    }
    w->dies++;
    struct dw_cu *cu = w->cu;
    int32_t self = parent;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
        size_t before = cu->nranges;
        if (die_ranges(w->dbg, die, cu->version, w->cu_base, &cu->ranges, &cu->nranges,
                       &cu->ranges_cap) == 0) {
            /* A declaration or an out-of-line-less abstract instance: no code
             * here, and nothing under it can have any. */
            return;
        }
        Dwarf_Off off = 0;
        if (dwarf_dieoffset(die, &off, &e) != DW_DLV_OK)
            dw_err_free(w->dbg, &e);
        bool inlined = tag == DW_TAG_inlined_subroutine;
        uint32_t cf = inlined ? attr_udata(w->dbg, die, DW_AT_call_file) : 0;
        uint32_t cl = inlined ? attr_udata(w->dbg, die, DW_AT_call_line) : 0;
        struct dw_scope *s = scope_add(cu, before, parent, off, inlined, cf, cl, &self);
        if (!w->in_sub) {
            /* A function seen from namespace level: its inline tree is read
             * only when an address lands in it (scope_expand), so a CU
             * costs its line table and function list, plus the trees of
             * the functions asked about. */
            s->lazy = true;
            return;
        }
        s->first_child = (uint32_t)self + 1;
    } else if (!tag_descends(tag, w->types_code)) {
        return;
    }

    bool was_in_sub = w->in_sub;
    if (self != parent)
        w->in_sub = true;
    Dwarf_Die child = NULL;
    int r = dwarf_child(die, &child, &e);
    while (r == DW_DLV_OK) {
        walk_die(w, child, self, depth + 1);
        Dwarf_Die next = NULL;
        r = next_sibling(w->dbg, child, &next, &e);
        dwarf_dealloc_die(child);
        child = next;
    }
    dw_err_free(w->dbg, &e);
    w->in_sub = was_in_sub;
    if (self != parent)
        cu->scopes[self].end = (uint32_t)cu->nscopes;
}

/* walk_die through the narrow reader (dwraw.c): the same scopes, in the
 * same order, for a CU's functions (cu_load) and a function's inline tree
 * (scope_expand), with libdwarf asked only for the DIEs whose ranges or
 * call coordinates it does not decode. */
struct nwalk {
    struct dw_obj *o;
    Dwarf_Debug dbg;
    struct dw_cu *cu;
    const uint8_t *info;
    bool msb;
    bool in_sub; /* as walk_die's */
};

static int nwalk_children(struct nwalk *w, uint64_t *pos, int32_t parent, int depth);

/* A scope's ranges and call coordinates from libdwarf, for one DIE. */
static size_t nwalk_libdwarf(struct nwalk *w, uint64_t off, bool inlined, uint32_t *call_file,
                             uint32_t *call_line)
{
    struct dw_cu *cu = w->cu;
    Dwarf_Error e = NULL;
    Dwarf_Die die = NULL;
    if (dwarf_offdie_b(w->dbg, off, 1, &die, &e) != DW_DLV_OK) {
        dw_err_free(w->dbg, &e);
        return 0;
    }
    size_t n = die_ranges(w->dbg, die, cu->version, cu->base, &cu->ranges, &cu->nranges,
                          &cu->ranges_cap);
    if (n && inlined) {
        *call_file = attr_udata(w->dbg, die, DW_AT_call_file);
        *call_line = attr_udata(w->dbg, die, DW_AT_call_line);
    }
    dwarf_dealloc_die(die);
    return n;
}

/* die_ranges for a DW_AT_ranges list through dwraw_ranges; SIZE_MAX when
 * that reader leaves the list to libdwarf. */
static size_t nwalk_ranges(struct nwalk *w, const struct dwraw_die *die)
{
    struct dw_cu *cu = w->cu;
    if (!cu->ranges_narrow || !die->ranges_secoff)
        return SIZE_MAX;
    bool v5 = cu->version >= 5;
    struct dwraw_range rs[64];
    int k = dwraw_ranges(v5 ? w->o->rnglists : w->o->ranges,
                         v5 ? w->o->rnglists_len : w->o->ranges_len, die->ranges, v5 ? 5 : 4,
                         cu->raw.addr_size, w->msb, cu->base, rs, sizeof(rs) / sizeof(rs[0]));
    if (k < 0)
        return SIZE_MAX;
    size_t n = 0;
    for (int i = 0; i < k; i++) {
        if (rs[i].hi > rs[i].lo && rs[i].lo != 0) {
            cu->ranges = hp_xgrow(cu->ranges, &cu->ranges_cap, cu->nranges + 1,
                                  sizeof(*cu->ranges));
            cu->ranges[cu->nranges++] = (struct dw_range){ rs[i].lo, rs[i].hi };
            n++;
        }
    }
    return n;
}

static int nwalk_die(struct nwalk *w, const struct dwraw_die *die, uint64_t *pos, int32_t parent,
                     int depth)
{
    struct dw_cu *cu = w->cu;
    if (depth > SYM_MAX_DIE_DEPTH)
        return dwraw_skip_children(&cu->raw, w->info, pos, die);
    int32_t self = parent;
    if (die->tag == DW_TAG_subprogram || die->tag == DW_TAG_inlined_subroutine) {
        bool inlined = die->tag == DW_TAG_inlined_subroutine;
        size_t before = cu->nranges, n = 0;
        uint64_t cf = die->call_file, cl = die->call_line;
        uint32_t call_file = cf > UINT32_MAX ? 0 : (uint32_t)cf;
        uint32_t call_line = cl > UINT32_MAX ? 0 : (uint32_t)cl;
        if (die->odd) {
            n = nwalk_libdwarf(w, die->off, inlined, &call_file, &call_line);
        } else if (die->has_low && die->has_high) {
            /* die_ranges' rule for low_pc/high_pc. */
            uint64_t hi = die->high_const ? die->high + die->low : die->high;
            if (hi > die->low && die->low != 0) {
                cu->ranges = hp_xgrow(cu->ranges, &cu->ranges_cap, cu->nranges + 1,
                                      sizeof(*cu->ranges));
                cu->ranges[cu->nranges++] = (struct dw_range){ die->low, hi };
                n = 1;
            }
        } else if (die->has_ranges) {
            n = nwalk_ranges(w, die);
            if (n == SIZE_MAX) {
                uint32_t f, l;
                n = nwalk_libdwarf(w, die->off, false, &f, &l);
            }
        }
        if (n == 0)
            return dwraw_skip_children(&cu->raw, w->info, pos, die);
        struct dw_scope *s =
            scope_add(cu, before, parent, die->off, inlined, call_file, call_line, &self);
        if (!w->in_sub) {
            s->lazy = true; /* see walk_die */
            return dwraw_skip_children(&cu->raw, w->info, pos, die);
        }
        s->first_child = (uint32_t)self + 1;
    } else if (!tag_descends(die->tag, cu->types_code)) {
        return dwraw_skip_children(&cu->raw, w->info, pos, die);
    }
    bool was_in_sub = w->in_sub;
    if (self != parent)
        w->in_sub = true;
    if (die->children && nwalk_children(w, pos, self, depth + 1) < 0)
        return -1;
    w->in_sub = was_in_sub;
    if (self != parent)
        cu->scopes[self].end = (uint32_t)cu->nscopes;
    return 0;
}

/* The child list starting at *pos, through its terminating null entry. */
static int nwalk_children(struct nwalk *w, uint64_t *pos, int32_t parent, int depth)
{
    for (;;) {
        struct dwraw_die die;
        int r = dwraw_die_read(&w->cu->raw, w->info, pos, &die);
        if (r <= 0)
            return r;
        if (nwalk_die(w, &die, pos, parent, depth) < 0)
            return -1;
    }
}

/* Read the inline tree of a function recorded lazily; its scopes are
 * appended to the CU's array as one block. */
static void scope_expand(struct dw_obj *o, struct dw_cu *cu, uint32_t idx)
{
    if (!cu->scopes[idx].lazy)
        return;
    cu->scopes[idx].lazy = false;
    Dwarf_Debug dbg = obj_dbg(o);
    uint32_t start = (uint32_t)cu->nscopes;
    size_t ranges_before = cu->nranges;
    const uint8_t *info, *abbrev;
    size_t ilen, alen;
    bool msb;
    if (cu->raw_ok && obj_info_bytes(o, &info, &ilen, &abbrev, &alen, &msb)) {
        struct nwalk nw = { .o = o, .dbg = dbg, .cu = cu, .info = info, .msb = msb,
                            .in_sub = true };
        uint64_t pos = cu->scopes[idx].die_off;
        struct dwraw_die fn;
        if (dwraw_die_read(&cu->raw, info, &pos, &fn) == 1 &&
            (!fn.children || nwalk_children(&nw, &pos, (int32_t)idx, 1) == 0)) {
            cu->scopes[idx].first_child = start;
            cu->scopes[idx].end = (uint32_t)cu->nscopes;
            cu->trees_narrow++;
            return;
        }
        /* Malformed (an abbreviation code the unit does not define, a form
         * no DWARF version has, a DIE past the unit's end): drop what was
         * read and leave the function without its inline tree. Not
         * libdwarf's walk: on such a tree it can take minutes (fuzz-elf
         * found an 18 KB file that kept it busy for more than 150 s in
         * dwarf_siblingof_b), and for any DWARF it reads well the narrow
         * reader does too (tests/sym/narrow_agree.py). */
        cu->nscopes = start;
        cu->nranges = ranges_before;
        cu->scopes[idx].first_child = start;
        cu->scopes[idx].end = start;
        return;
    }
    Dwarf_Error e = NULL;
    Dwarf_Die die = NULL;
    if (dwarf_offdie_b(dbg, cu->scopes[idx].die_off, 1, &die, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return;
    }
    struct walk w = { .dbg = dbg, .cu = cu, .cu_base = cu->base, .in_sub = true,
                      .types_code = cu->types_code };
    Dwarf_Die child = NULL;
    int r = dwarf_child(die, &child, &e);
    while (r == DW_DLV_OK) {
        walk_die(&w, child, (int32_t)idx, 1);
        Dwarf_Die next = NULL;
        r = next_sibling(dbg, child, &next, &e);
        dwarf_dealloc_die(child);
        child = next;
    }
    dw_err_free(dbg, &e);
    dwarf_dealloc_die(die);
    cu->scopes[idx].first_child = start;
    cu->scopes[idx].end = (uint32_t)cu->nscopes;
}

/* The function (top-level scope) holding addr, or -1. */
static int32_t top_for(const struct dw_cu *cu, uint64_t addr)
{
    size_t i = hp_interval_find(cu->tops, cu->ntops, sizeof(*cu->tops),
                                offsetof(struct dw_top, lo), offsetof(struct dw_top, hi),
                                cu->tops_maxhi, addr);
    return i == SIZE_MAX ? -1 : (int32_t)cu->tops[i].scope;
}

static int top_cmp(const void *a, const void *b)
{
    const struct dw_top *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* Parse one CU with the given handle. Touches only *cu (and libdwarf's
 * state of dbg), so CUs load in parallel on separate handles. */
static void cu_load(struct dw_obj *o, struct dw_cu *cu)
{
    Dwarf_Debug dbg = obj_dbg(o);
    Dwarf_Error e = NULL;
    Dwarf_Die cudie = NULL;
    if (dwarf_offdie_b(dbg, cu->die_off, 1, &cudie, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        cu->state = CU_FAILED;
        return;
    }
    const uint8_t *info, *abbrev;
    size_t ilen, alen;
    bool msb;
    Dwarf_Off uoff = 0, ulen = 0;
    if (cu->narrow && obj_info_bytes(o, &info, &ilen, &abbrev, &alen, &msb)) {
        if (dwarf_die_CU_offset_range(cudie, &uoff, &ulen, &e) == DW_DLV_OK) {
            cu->raw_ok = dwraw_unit_init(&cu->raw, info, ilen, uoff, abbrev, alen, msb) == 0;
            cu->raw_bad = !cu->raw_ok;
        }
        dw_err_free(dbg, &e);
    }
    Dwarf_Half ver = 0, offsz = 0;
    if (dwarf_get_version_of_die(cudie, &ver, &offsz) != DW_DLV_OK)
        ver = 4;
    cu->version = ver;
    Dwarf_Addr base = 0;
    if (dwarf_lowpc(cudie, &base, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        base = 0;
    }
    cu->base = base;
    Dwarf_Unsigned lang = 0;
    if (dwarf_srclang(cudie, &lang, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        lang = 0;
    }
    cu->types_code = lang == DW_LANG_Rust;
    if (cu->raw_ok) {
        /* Range lists relative to a base attribute (split DWARF) stay
         * with libdwarf. */
        uint64_t pos = cu->die_off;
        struct dwraw_die top;
        cu->ranges_narrow = dwraw_die_read(&cu->raw, info, &pos, &top) == 1 && !top.ranges_base;
    }
    cu_load_lines(o, cu, cudie);
    /* The CU's functions: the narrow reader where it reads the unit's
     * header and abbreviations; libdwarf only where the narrow reader is
     * off or cannot see the bytes (compressed sections). A unit it finds
     * malformed, in its header and abbreviations (raw_bad) or further on,
     * keeps its line table but lists no functions: on such bytes a single
     * dwarf_siblingof_b call can run for minutes (see scope_expand;
     * fuzz-elf found a second such file, tests/fuzz/corpus/elf/
     * slow-sibling-header, with a unit header libdwarf accepts and the
     * narrow reader does not). */
    if (cu->raw_ok) {
        struct nwalk nw = { .o = o, .dbg = dbg, .cu = cu, .info = info, .msb = msb };
        uint64_t pos = cu->die_off;
        struct dwraw_die top;
        if (dwraw_die_read(&cu->raw, info, &pos, &top) != 1 ||
            nwalk_die(&nw, &top, &pos, -1, 0) != 0) {
            cu->nscopes = 0;
            cu->nranges = 0;
        }
    } else if (!cu->raw_bad) {
        struct walk w = { .dbg = dbg, .cu = cu, .cu_base = base, .types_code = cu->types_code };
        walk_die(&w, cudie, -1, 0);
    }
    dwarf_dealloc_die(cudie);

    size_t ntops = 0;
    for (size_t i = 0; i < cu->nscopes; i++)
        if (cu->scopes[i].parent < 0)
            ntops += cu->scopes[i].nranges;
    if (ntops) {
        cu->tops = hp_xmalloc(ntops * sizeof(*cu->tops));
        for (size_t i = 0; i < cu->nscopes; i++) {
            const struct dw_scope *s = &cu->scopes[i];
            if (s->parent >= 0)
                continue;
            for (uint32_t k = 0; k < s->nranges; k++) {
                const struct dw_range *rg = &cu->ranges[s->range_off + k];
                cu->tops[cu->ntops++] = (struct dw_top){ rg->lo, rg->hi, (uint32_t)i };
            }
        }
        hp_qsort(cu->tops, cu->ntops, sizeof(*cu->tops), top_cmp);
        cu->tops_maxhi = hp_xmalloc(cu->ntops * sizeof(uint64_t));
        hp_interval_maxhi(cu->tops, cu->ntops, sizeof(*cu->tops), offsetof(struct dw_top, hi),
                          cu->tops_maxhi);
    }
    cu->state = CU_LOADED;
}

static void cu_release(struct dw_cu *cu)
{
    free(cu->rows);
    free(cu->scopes);
    free(cu->ranges);
    free(cu->tops);
    free(cu->tops_maxhi);
    dwraw_unit_release(&cu->raw);
    hp_arena_release(&cu->arena);
}

/* ---- names --------------------------------------------------------------- */

/* Names by DIE key, resolved once: the linkage name (mangled), directly
 * or through DW_AT_abstract_origin / DW_AT_specification; else DW_AT_name,
 * and, computed only when a physical frame needs it, that name qualified by
 * its enclosing namespaces, classes and functions. Keys are DIE offsets;
 * DIEs of dwz's common (alternate) file get the top bit so the two offset
 * spaces never collide. */
#define ALT_BIT (UINT64_C(1) << 63)

struct dw_name {
    const char *name;     /* NULL: none */
    const char *qual;     /* qualified DW_AT_name, once computed */
    uint64_t name_die;    /* the key of the DIE that carries `name` */
    bool linkage;
    bool qual_done;
};

/* Where a string lives in a file it cannot read (DW_FORM_GNU_strp_alt
 * without dwz's common file), libdwarf 20210528 returns a placeholder such
 * as "<DW_FORM_GNU_strp_alt-no-tied-file>" instead of an error: that is no
 * name, and the symbol table's is better. */
static bool placeholder(const char *s)
{
    return s && strncmp(s, "<DW_FORM_", 9) == 0;
}

static Dwarf_Debug key_dbg(const struct sym_dw *d, uint64_t key)
{
    return (key & ALT_BIT) ? d->alt : d->dbg;
}

static uint32_t name_of(struct sym_dw *d, uint64_t key, int depth);

static struct dw_name *name_at(struct sym_dw *d, uint32_t idx)
{
    return &d->name_tab[idx];
}

static uint32_t name_add(struct sym_dw *d, uint64_t key, struct dw_name n)
{
    d->name_tab = hp_xgrow(d->name_tab, &d->names_cap, d->nnames + 1, sizeof(*d->name_tab));
    uint32_t idx = (uint32_t)d->nnames++;
    d->name_tab[idx] = n;
    uint32_t dummy;
    (void)hp_map64_put(&d->names, key, idx, &dummy);
    return idx;
}

static uint32_t name_of(struct sym_dw *d, uint64_t key, int depth)
{
    uint32_t idx;
    if (hp_map64_get(&d->names, key, &idx))
        return idx;
    bool in_alt = (key & ALT_BIT) != 0;
    Dwarf_Debug dbg = key_dbg(d, key);
    uint64_t off = key & ~ALT_BIT;
    struct dw_name res = { .name_die = key };
    Dwarf_Error e = NULL;
    Dwarf_Die die = NULL;
    if (depth > 8 || !dbg || dwarf_offdie_b(dbg, off, 1, &die, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return name_add(d, key, res);
    }
    char *s = die_string(dbg, die, DW_AT_linkage_name);
    const char *own = NULL;
    if (!s)
        s = die_string(dbg, die, DW_AT_MIPS_linkage_name);
    if (s && !placeholder(s)) {
        res.name = s;
        res.linkage = true;
        goto done;
    }
    s = die_string(dbg, die, DW_AT_name);
    if (s && !placeholder(s))
        own = s;
    static const Dwarf_Half refs[] = { DW_AT_abstract_origin, DW_AT_specification };
    for (size_t i = 0; i < HP_ARRAY_SIZE(refs) && !res.name; i++) {
        Dwarf_Attribute a = NULL;
        if (dwarf_attr(die, refs[i], &a, &e) != DW_DLV_OK) {
            dw_err_free(dbg, &e);
            continue;
        }
        Dwarf_Off target = 0;
        Dwarf_Half form = 0;
        if (dwarf_whatform(a, &form, &e) != DW_DLV_OK)
            dw_err_free(dbg, &e);
        /* A reference into dwz's common file: an offset in its .debug_info
         * (a DIE there refers only within that file). */
        bool to_alt = in_alt || form == DW_FORM_GNU_ref_alt;
        if (dwarf_global_formref(a, &target, &e) == DW_DLV_OK) {
            uint64_t tkey = to_alt ? (target | ALT_BIT) : target;
            if (tkey != key) {
                const struct dw_name *t = name_at(d, name_of(d, tkey, depth + 1));
                res.name = t->name;
                res.linkage = t->linkage;
                res.name_die = t->name_die;
            }
        }
        dw_err_free(dbg, &e);
        dwarf_dealloc_attribute(a);
    }
    if (!res.name) {
        res.name = own;
        res.name_die = key;
    }
done:
    dwarf_dealloc_die(die);
    /* Strings from die_string point into .debug_str or the DIE data,
     * which live until dwarf_finish; copy anyway: small, and safe. Names
     * reached through a reference are already copies. */
    if (res.name && res.name_die == key)
        res.name = hp_arena_strdup(&d->arena, res.name);
    return name_add(d, key, res);
}

/* The DIEs enclosing `target`, outermost first, found by walking down from
 * its CU's DIE through the one child whose extent holds it (libdwarf
 * 20210528 has no parent link). Returns the count, or -1. */
static int die_parents(Dwarf_Debug dbg, Dwarf_Off target, Dwarf_Off *chain, int cap)
{
    Dwarf_Error e = NULL;
    Dwarf_Die die = NULL, cur = NULL;
    Dwarf_Off cu_off = 0;
    if (dwarf_offdie_b(dbg, target, 1, &die, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return -1;
    }
    int r = dwarf_CU_dieoffset_given_die(die, &cu_off, &e);
    dwarf_dealloc_die(die);
    if (r != DW_DLV_OK || dwarf_offdie_b(dbg, cu_off, 1, &cur, &e) != DW_DLV_OK) {
        dw_err_free(dbg, &e);
        return -1;
    }
    int n = 0;
    for (int guard = 0; guard < SYM_MAX_DIE_DEPTH; guard++) {
        Dwarf_Die c = NULL;
        r = dwarf_child(cur, &c, &e);
        dwarf_dealloc_die(cur);
        cur = NULL;
        while (r == DW_DLV_OK) {
            Dwarf_Off co = 0, no = UINT64_MAX;
            if (dwarf_dieoffset(c, &co, &e) != DW_DLV_OK) {
                /* Without libdwarf's tracking nothing frees c later. */
                dwarf_dealloc_die(c);
                break;
            }
            if (co == target) {
                dwarf_dealloc_die(c);
                return n;
            }
            Dwarf_Die nx = NULL;
            int r2 = dwarf_siblingof_b(dbg, c, 1, &nx, &e);
            if (r2 == DW_DLV_OK && dwarf_dieoffset(nx, &no, &e) != DW_DLV_OK) {
                dw_err_free(dbg, &e);
                no = UINT64_MAX;
            }
            if (r2 == DW_DLV_OK && no <= co) { /* a damaged sibling pointing back */
                dwarf_dealloc_die(nx);
                nx = NULL;
                r2 = DW_DLV_NO_ENTRY;
            }
            if (co < target && target < no) {
                if (nx)
                    dwarf_dealloc_die(nx);
                if (n < cap)
                    chain[n++] = co;
                cur = c;
                break;
            }
            dwarf_dealloc_die(c);
            c = nx;
            r = r2;
        }
        dw_err_free(dbg, &e);
        if (!cur)
            return -1;
    }
    if (cur)
        dwarf_dealloc_die(cur);
    return -1;
}

/* DW_AT_name of a physical function qualified as gdb prints it:
 * "outer::inner::Pool<Local>::fill", "(anonymous namespace)::Hidden::grow".
 * Used only when neither a linkage name nor a symbol names the function. */
static const char *qualified_name(struct sym_dw *d, uint32_t idx)
{
    struct dw_name *nm = name_at(d, idx);
    if (nm->qual_done || nm->linkage || !nm->name)
        return nm->qual_done ? nm->qual : nm->name;
    nm->qual_done = true;
    nm->qual = nm->name;
    Dwarf_Debug dbg = key_dbg(d, nm->name_die);
    Dwarf_Off chain[32];
    int n = dbg ? die_parents(dbg, nm->name_die & ~ALT_BIT, chain, 32) : -1;
    struct hp_buf b = HP_BUF_INIT(0);
    for (int i = 0; i < n && i < 32; i++) {
        Dwarf_Error e = NULL;
        Dwarf_Die p = NULL;
        Dwarf_Half tag = 0;
        if (dwarf_offdie_b(dbg, chain[i], 1, &p, &e) != DW_DLV_OK) {
            dw_err_free(dbg, &e);
            continue;
        }
        char *pn = NULL;
        if (dwarf_tag(p, &tag, &e) == DW_DLV_OK &&
            (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
             tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
             tag == DW_TAG_subprogram || tag == DW_TAG_module)) {
            if ((pn = die_string(dbg, p, DW_AT_name)) != NULL)
                hp_buf_printf(&b, "%s::", pn);
            else if (tag == DW_TAG_namespace)
                hp_buf_printf(&b, "(anonymous namespace)::");
        }
        dw_err_free(dbg, &e);
        dwarf_dealloc_die(p);
    }
    if (b.len) {
        hp_buf_printf(&b, "%s", nm->name);
        nm = name_at(d, idx);
        nm->qual = hp_arena_strdup(&d->arena, b.data);
    }
    hp_buf_release(&b);
    return nm->qual;
}

/* ---- public -------------------------------------------------------------- */

/* ---- sections by mmap --------------------------------------------------- *
 * libdwarf's own ELF reader read()s each section it needs into a malloc'ed
 * copy, per handle: peak RSS grew with the binary's DWARF (all of
 * .debug_info, .debug_line, .debug_str... as soon as one CU was read, times
 * the worker handles), and the copies cost a sixth of cold CPU (perf:
 * _copy_to_iter and its page faults). Handles are opened instead through
 * libdwarf's object access interface on libelf (ELF_C_READ_MMAP): a
 * section's bytes are the file's pages, shared by every handle and resident
 * only where touched, as llvm-symbolizer maps them. SHF_COMPRESSED sections
 * are inflated by libelf (elf_compress) when libdwarf first loads them;
 * .zdebug_ ones libdwarf inflates itself. Debug sections of executables and
 * shared objects carry no relocations, so relocate_a_section is NULL. The
 * mapping is private and writable (copy on write), so a libdwarf that
 * wrote into a section would get its own page, never a fault. */

static Dwarf_Debug obj_dbg(const struct dw_obj *o)
{
    return o->dbg;
}

/* The bytes of a section called `name` in this handle's mapping (libdwarf
 * reads the same ones through obj_load_section), or NULL. A compressed one
 * (SHF_COMPRESSED, as Debian's -dbgsym files have them) is inflated in
 * place by libelf, as obj_load_section would for libdwarf: both then read
 * the one copy. Left for libdwarf alone, .debug_line was not inflated yet
 * when the narrow readers first looked, and they read no line table of
 * such a file (2.3x the CPU of a cold symbolization, sym-bench's program).
 * GNU .zdebug_ sections are libdwarf's. */
static const uint8_t *obj_section_bytes(struct dw_obj *o, const char *name, size_t *ret_len)
{
    for (size_t i = 1; i < o->nsec; i++) {
        Elf_Scn *scn = elf_getscn(o->elf, i);
        GElf_Shdr sh;
        if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
            continue;
        const char *n = elf_strptr(o->elf, o->shstrndx, sh.sh_name);
        if (!n || strcmp(n, name) != 0)
            continue;
        if (sh.sh_flags & SHF_COMPRESSED) {
            GElf_Chdr ch;
            if (!gelf_getchdr(scn, &ch) || ch.ch_type != ELFCOMPRESS_ZLIB ||
                elf_compress(scn, 0, 0) < 0 || !gelf_getshdr(scn, &sh) ||
                sh.sh_size != ch.ch_size)
                return NULL;
        }
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size != sh.sh_size)
            return NULL;
        *ret_len = d->d_size;
        return d->d_buf;
    }
    return NULL;
}

static bool obj_info_bytes(struct dw_obj *o, const uint8_t **info, size_t *info_len,
                           const uint8_t **abbrev, size_t *abbrev_len, bool *msb)
{
    if (o->info_state == 0) {
        o->info = obj_section_bytes(o, ".debug_info", &o->info_len);
        o->abbrev = obj_section_bytes(o, ".debug_abbrev", &o->abbrev_len);
        o->line = obj_section_bytes(o, ".debug_line", &o->line_len);
        o->ranges = obj_section_bytes(o, ".debug_ranges", &o->ranges_len);
        o->rnglists = obj_section_bytes(o, ".debug_rnglists", &o->rnglists_len);
        o->info_state = o->info && o->abbrev ? 1 : -1;
    }
    if (o->info_state < 0)
        return false;
    *info = o->info;
    *info_len = o->info_len;
    *abbrev = o->abbrev;
    *abbrev_len = o->abbrev_len;
    *msb = o->data == ELFDATA2MSB;
    return true;
}

static struct dw_obj *dw_objs; /* LOCKED */

static int obj_section_info(void *obj, Dwarf_Half idx, Dwarf_Obj_Access_Section *ret, int *err)
{
    struct dw_obj *o = obj;
    Elf_Scn *scn = elf_getscn(o->elf, idx);
    GElf_Shdr sh;
    memset(ret, 0, sizeof(*ret));
    if (!scn || !gelf_getshdr(scn, &sh)) {
        *err = DW_DLE_SECTION_INDEX_BAD;
        return DW_DLV_ERROR;
    }
    const char *name = elf_strptr(o->elf, o->shstrndx, sh.sh_name);
    ret->addr = sh.sh_addr;
    ret->type = sh.sh_type;
    ret->size = sh.sh_type == SHT_NOBITS ? 0 : sh.sh_size;
    ret->name = name ? name : "";
    /* Location lists are never asked for here, but libdwarf 20210528 reads
     * the header of every .debug_loclists table as soon as .debug_info is
     * loaded: with the pages mapped, each header costs the 64 KiB the
     * kernel maps around a fault, so peak RSS followed the binary, not the
     * CUs touched (24 MB of 92 MB for one CU's addresses of sym-scale.sh's
     * 515 MB program, by /proc/PID/pagemap per section). Absent, it is
     * never read. */
    if (strcmp(ret->name, ".debug_loclists") == 0) {
        ret->name = "";
        ret->size = 0;
    }
    ret->link = sh.sh_link;
    ret->info = sh.sh_info;
    ret->entrysize = sh.sh_entsize;
    if ((sh.sh_flags & SHF_COMPRESSED) && sh.sh_type != SHT_NOBITS) {
        /* What load_section will hand over: the inflated bytes. */
        GElf_Chdr ch;
        if (!gelf_getchdr(scn, &ch) || ch.ch_type != ELFCOMPRESS_ZLIB) {
            ret->size = 0;
            ret->name = ""; /* unreadable: as if absent */
        } else {
            ret->size = ch.ch_size;
        }
    }
    return DW_DLV_OK;
}

static int obj_load_section(void *obj, Dwarf_Half idx, Dwarf_Small **ret, int *err)
{
    struct dw_obj *o = obj;
    Elf_Scn *scn = elf_getscn(o->elf, idx);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) {
        *err = DW_DLE_SECTION_INDEX_BAD;
        return DW_DLV_ERROR;
    }
    uint64_t want = sh.sh_size;
    if (sh.sh_flags & SHF_COMPRESSED) {
        GElf_Chdr ch;
        if (!gelf_getchdr(scn, &ch) || elf_compress(scn, 0, 0) < 0) {
            *err = DW_DLE_ZLIB_UNCOMPRESS_ERROR;
            return DW_DLV_ERROR;
        }
        want = ch.ch_size;
    }
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || (!d->d_buf && d->d_size) || d->d_size != want) {
        *err = DW_DLE_SECTION_SIZE_ERROR;
        return DW_DLV_ERROR;
    }
    *ret = d->d_buf;
    return DW_DLV_OK;
}

static Dwarf_Endianness obj_byte_order(void *obj)
{
    return ((struct dw_obj *)obj)->data == ELFDATA2MSB ? DW_OBJECT_MSB : DW_OBJECT_LSB;
}

static Dwarf_Small obj_length_size(void *obj)
{
    (void)obj;
    return 4;
}

static Dwarf_Small obj_pointer_size(void *obj)
{
    return ((struct dw_obj *)obj)->class_ == ELFCLASS64 ? 8 : 4;
}

static Dwarf_Unsigned obj_section_count(void *obj)
{
    return ((struct dw_obj *)obj)->nsec;
}

static const Dwarf_Obj_Access_Methods obj_methods = {
    obj_section_info, obj_byte_order,    obj_length_size, obj_pointer_size,
    obj_section_count, obj_load_section, NULL,
};

static int finish_handle(Dwarf_Debug dbg, Dwarf_Error *e)
{
    pthread_mutex_lock(&libdwarf_global_mu);
    /* dwarf_object_finish, not dwarf_finish: the latter guesses the reader
     * from the object's first byte. Then the object and its mapping. */
    int r = dwarf_object_finish(dbg, e);
    struct dw_obj *o = NULL;
    for (struct dw_obj **pp = &dw_objs; *pp; pp = &(*pp)->next)
        if ((*pp)->dbg == dbg) {
            o = *pp;
            *pp = o->next;
            break;
        }
    pthread_mutex_unlock(&libdwarf_global_mu);
    if (o) {
        elf_end(o->elf);
        free(o);
    }
    return r;
}

static void close_handle(Dwarf_Debug dbg)
{
    Dwarf_Error e = NULL;
    if (dbg && finish_handle(dbg, &e) != DW_DLV_OK && e)
        dwarf_dealloc_error(NULL, e);
}

/* libdwarf's allocation tracking is off (dwarf_set_de_alloc_flag(0)): with
 * it on, every object libdwarf hands out (each DIE, attribute, line row,
 * error, string) goes into a per-handle tsearch tree so that dwarf_finish
 * can free what the caller forgot, which cost about a quarter of CU parsing
 * (perf, issue 11). With it off, dwarf_finish frees only what a handle owns
 * structurally (sections, CU contexts and their abbreviation tables, the
 * rnglists/loclists contexts, the group map), so everything this file is
 * handed must be given back by this file. Who frees what, every call:
 *
 *   dwarf_get_aranges      list[i] DW_DLA_ARANGE, list DW_DLA_LIST (read_aranges)
 *   dwarf_offdie_b, dwarf_siblingof_b, dwarf_child
 *                          dwarf_dealloc_die on every DIE, on every path
 *                          (walk_die, scope_expand, cu_load, scan_cus,
 *                          name_of, qualify, the parent chain of enclosing)
 *   dwarf_attr            dwarf_dealloc_attribute (die_ranges, attr_udata,
 *                          name_of)
 *   dwarf_get_ranges_b     dwarf_ranges_dealloc
 *   dwarf_rnglists_get_rle_head  dwarf_dealloc_rnglists_head
 *   dwarf_srcfiles         each string DW_DLA_STRING, the list DW_DLA_LIST:
 *                          create_fullest_file_path allocates every string
 *                          with _dwarf_get_alloc, so none points into a
 *                          section (the case where dwarf_dealloc needs the
 *                          tree to tell a section pointer from its own)
 *   dwarf_srclines_b       dwarf_srclines_dealloc_b frees the context, its
 *                          rows, file entries and include dirs
 *   dwarf_next_cu_header_d its CU context: owned by the handle, freed by
 *                          dwarf_finish (freecontextlist) either way
 *   Dwarf_Error            dw_err_free / dwarf_dealloc_error on every
 *                          DW_DLV_ERROR return, including the init's
 *                          (a no-dbg error: malloc'ed, freed by
 *                          dwarf_dealloc_error(NULL, e))
 *   dwarf_formstring (die_string) points into .debug_str/.debug_info:
 *                          never freed (dwarf_dealloc on it would free a
 *                          wild pointer without the tree; nothing here
 *                          does). dwarf_die_text/dwarf_diename are not used:
 *                          they drop dwarf_attr's error (see die_string)
 *   dwarf_lowpc, dwarf_highpc_b, dwarf_whatform, dwarf_form*data,
 *   dwarf_die_CU_offset_range,
 *   dwarf_prologue_end_etc,
 *   dwarf_global_formref, dwarf_tag, dwarf_dieoffset, dwarf_srclang,
 *   dwarf_line* accessors, dwarf_get_version_of_die: no allocation
 *
 * What libdwarf itself loses without the tree: an error it makes and drops
 * internally on malformed DWARF (a few dozen bytes each). Valgrind over the
 * fuzz-elf corpus and the fixtures (tests/sym/dwarf-leaks.sh) measures it;
 * it is bounded by the work done on a file, which the caches do once per
 * address and once per CU per handle. HEAPFLEET_LIBDWARF_TRACKING=1 keeps
 * the tree on (for that comparison and as an escape hatch). */
static void tracking_init(void)
{
    const char *v = getenv("HEAPFLEET_LIBDWARF_TRACKING");
    (void)dwarf_set_de_alloc_flag(v && strcmp(v, "1") == 0 ? 1 : 0);
    v = getenv("HEAPFLEET_DWARF_READER");
    narrow_off = v && strcmp(v, "libdwarf") == 0;
    /* libelf's global version flag, set once here rather than by every
     * worker thread opening a handle. */
    (void)elf_version(EV_CURRENT);
}

static pthread_once_t tracking_once = PTHREAD_ONCE_INIT;

static int open_handle(int fd, Dwarf_Debug *ret, struct dw_obj **ret_obj)
{
    Dwarf_Error e = NULL;
    Dwarf_Debug dbg = NULL;
    pthread_once(&tracking_once, tracking_init);
    struct dw_obj *o = hp_xcalloc(1, sizeof(*o));
    o->tag = 'H';
    o->elf = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
    GElf_Ehdr eh;
    if (!o->elf || elf_kind(o->elf) != ELF_K_ELF || !gelf_getehdr(o->elf, &eh) ||
        elf_getshdrnum(o->elf, &o->nsec) != 0 || elf_getshdrstrndx(o->elf, &o->shstrndx) != 0 ||
        o->nsec > UINT16_MAX) {
        elf_end(o->elf);
        free(o);
        return HP_EDWARF;
    }
    o->class_ = eh.e_ident[EI_CLASS];
    o->data = eh.e_ident[EI_DATA];
    o->ai.object = o;
    o->ai.methods = &obj_methods;
    pthread_mutex_lock(&libdwarf_global_mu);
    int r = dwarf_object_init_b(&o->ai, NULL, NULL, DW_GROUPNUMBER_ANY, &dbg, &e);
    if (r == DW_DLV_OK) {
        o->dbg = dbg;
        o->next = dw_objs;
        dw_objs = o;
    }
    pthread_mutex_unlock(&libdwarf_global_mu);
    if (r != DW_DLV_OK) {
        if (e)
            dwarf_dealloc_error(NULL, e);
        elf_end(o->elf);
        free(o);
        return r == DW_DLV_NO_ENTRY ? HP_ENOTFOUND : HP_EDWARF;
    }
    *ret = dbg;
    if (ret_obj)
        *ret_obj = o;
    return 0;
}

/* libdwarf 20210528 double-frees on some malformed .debug_rnglists and
 * .debug_loclists headers (found by tests/fuzz/fuzz-elf), and it loads
 * .debug_rnglists as soon as any CU is read. So the unit headers of both
 * sections are checked here first (DWARF 5, 6.1.x: unit_length, version 5,
 * address size 4 or 8, no segment selectors, offset array inside the unit)
 * and a file that fails keeps its symbols but not its DWARF. */
static int check_lists_section(Elf *e, Elf_Scn *scn, const char *name, struct hp_buf *err,
                               const char *path)
{
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
        return 0;
    if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) {
        hp_err_printf(err, "%s: %s: cannot decompress: %s", path, name, elf_errmsg(-1));
        return HP_EDWARF;
    }
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || !d->d_buf)
        return 0;
    const unsigned char *b = d->d_buf;
    size_t n = d->d_size, off = 0;
    bool le = elf_getident(e, NULL)[EI_DATA] == ELFDATA2LSB;
    while (off < n) {
        if (n - off < 12)
            goto bad;
        uint64_t len = 0;
        size_t hdr = 4, osz = 4;
        for (int i = 0; i < 4; i++)
            len |= (uint64_t)b[off + (le ? i : 3 - i)] << (8 * i);
        if (len == 0xffffffff) {
            if (n - off < 20)
                goto bad;
            len = 0;
            for (int i = 0; i < 8; i++)
                len |= (uint64_t)b[off + 4 + (le ? i : 7 - i)] << (8 * i);
            hdr = 12;
            osz = 8;
        } else if (len >= 0xfffffff0) {
            goto bad;
        }
        if (len < 8 || len > n - off - hdr)
            goto bad;
        const unsigned char *u = b + off + hdr;
        unsigned ver = le ? (unsigned)(u[0] | u[1] << 8) : (unsigned)(u[1] | u[0] << 8);
        uint32_t count = 0;
        for (int i = 0; i < 4; i++)
            count |= (uint32_t)u[4 + (le ? i : 3 - i)] << (8 * i);
        if (ver != 5 || (u[2] != 4 && u[2] != 8) || u[3] != 0 ||
            (uint64_t)count * osz > len - 8)
            goto bad;
        off += hdr + (size_t)len;
    }
    return 0;
bad:
    hp_err_printf(err, "%s: %s: malformed unit header at offset 0x%zx", path, name, off);
    return HP_EDWARF;
}

static int check_sections(int fd, const char *path, struct hp_buf *err)
{
    elf_version(EV_CURRENT);
    /* Mapped, not read: ELF_C_READ copied .debug_rnglists whole into the
     * heap to read its unit headers (25 MB of the 515 MB of DWARF of
     * sym-scale.sh's program: most of the page faults of a one-CU lookup
     * there, perf -e page-faults). */
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e)
        return 0; /* not ELF: libdwarf will say so */
    int r = 0;
    size_t shstrndx, shnum = 0;
    GElf_Ehdr eh;
    struct stat st;
    /* libdwarf reads the section header table with its own ELF reader and
     * trusts e_shnum and e_shentsize for a malloc: check that the table is
     * the standard shape and lies inside the file first. */
    if (elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh) && fstat(fd, &st) == 0 &&
        elf_getshdrnum(e, &shnum) == 0) {
        size_t entsz = gelf_getclass(e) == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
        if (eh.e_shentsize != entsz || shnum > 65536 ||
            eh.e_shoff + (uint64_t)shnum * entsz > (uint64_t)st.st_size) {
            hp_err_printf(err, "%s: malformed section header table", path);
            elf_end(e);
            return HP_EDWARF;
        }
    }
    if (elf_kind(e) == ELF_K_ELF && elf_getshdrstrndx(e, &shstrndx) == 0) {
        for (Elf_Scn *scn = NULL; r == 0 && shnum && (scn = elf_nextscn(e, scn)) != NULL;) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh))
                continue;
            /* Same for every section's extent and links. */
            if ((sh.sh_type != SHT_NOBITS &&
                 (sh.sh_offset > (uint64_t)st.st_size ||
                  sh.sh_size > (uint64_t)st.st_size - sh.sh_offset)) ||
                sh.sh_link >= shnum) {
                hp_err_printf(err, "%s: section %zu lies outside the file or links nowhere",
                              path, elf_ndxscn(scn));
                r = HP_EDWARF;
                break;
            }
            const char *name = elf_strptr(e, shstrndx, sh.sh_name);
            /* .debug_loclists has the same header and the same libdwarf
             * bug, but is only loaded for location lists, which the
             * symbolizer never asks for. */
            if (name && strcmp(name, ".debug_rnglists") == 0)
                r = check_lists_section(e, scn, name, err, path);
        }
    }
    elf_end(e);
    return r;
}

int sym_dw_open(const char *path, struct sym_dw **ret, struct hp_buf *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int en = errno;
        hp_err_printf(err, "%s: cannot open: %s", path, strerror(en));
        return HP_ERR(en);
    }
    int r = check_sections(fd, path, err);
    if (r < 0) {
        close(fd);
        return r;
    }
    Dwarf_Debug dbg = NULL;
    struct dw_obj *obj = NULL;
    r = open_handle(fd, &dbg, &obj);
    if (r < 0) {
        close(fd);
        if (r == HP_EDWARF)
            hp_err_printf(err, "%s: unreadable DWARF", path);
        return r;
    }
    struct sym_dw *d = hp_xcalloc(1, sizeof(*d));
    d->path = hp_xstrdup(path);
    d->fd = fd;
    d->dbg = dbg;
    d->obj = obj;
    d->narrow = !narrow_off;
    d->alt_fd = -1;
    hp_map64_init(&d->cu_by_off);
    hp_map64_init(&d->names);
    hp_arena_init(&d->arena);
    *ret = d;
    return 0;
}

int sym_dw_set_alt(struct sym_dw *d, const char *path, struct hp_buf *err)
{
    if (d->alt)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int en = errno;
        hp_err_printf(err, "%s: cannot open: %s", path, strerror(en));
        return HP_ERR(en);
    }
    int r = check_sections(fd, path, err);
    Dwarf_Debug alt = NULL;
    if (r == 0)
        r = open_handle(fd, &alt, NULL);
    if (r < 0) {
        close(fd);
        if (r == HP_EDWARF || r == HP_ENOTFOUND)
            hp_err_printf(err, "%s: unreadable DWARF", path);
        return r == HP_ENOTFOUND ? HP_EDWARF : r;
    }
    Dwarf_Error e = NULL;
    if (dwarf_set_tied_dbg(d->dbg, alt, &e) != DW_DLV_OK) {
        dw_err_free(d->dbg, &e);
        close_handle(alt);
        close(fd);
        hp_err_printf(err, "%s: cannot be tied to %s", path, d->path);
        return HP_EDWARF;
    }
    d->alt = alt;
    d->alt_fd = fd;
    return 0;
}

void sym_dw_free(struct sym_dw *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->ncus; i++)
        cu_release(&d->cus[i]);
    free(d->cus);
    free(d->aranges);
    free(d->aranges_maxhi);
    free(d->name_tab);
    hp_map64_release(&d->cu_by_off);
    hp_map64_release(&d->names);
    hp_arena_release(&d->arena);
    close_handle(d->dbg);
    close_handle(d->alt);
    if (d->alt_fd >= 0)
        close(d->alt_fd);
    if (d->fd >= 0)
        close(d->fd);
    free(d->path);
    free(d);
}

void sym_dw_set_narrow(struct sym_dw *d, bool on)
{
    d->narrow = on;
}

void sym_dw_narrow_counts(const struct sym_dw *d, size_t *ret_lines, size_t *ret_trees)
{
    size_t l = 0, t = 0;
    for (size_t i = 0; i < d->ncus; i++) {
        l += d->cus[i].lines_narrow;
        t += d->cus[i].trees_narrow;
    }
    *ret_lines = l;
    *ret_trees = t;
}

size_t sym_dw_cus_loaded(const struct sym_dw *d, size_t *ret_total)
{
    size_t n = 0;
    for (size_t i = 0; i < d->ncus; i++)
        n += d->cus[i].state != CU_UNLOADED;
    if (ret_total)
        *ret_total = d->ncus;
    return n;
}

struct prep_pair {
    uint32_t cu;
    uint64_t addr;
};

struct prep_job {
    struct sym_dw *d;
    uint32_t *cus;           /* CUs to load */
    size_t *first, *count;   /* their addresses in pairs */
    struct prep_pair *pairs; /* sorted by CU */
    size_t ncus;
    size_t next; /* shared cursor, under mu */
    pthread_mutex_t mu;
};

/* Load CU i of the job and read the inline trees of the functions its
 * addresses fall in, all with one handle. */
static void prep_one(struct dw_obj *o, struct prep_job *j, size_t i)
{
    struct dw_cu *cu = &j->d->cus[j->cus[i]];
    cu_load(o, cu);
    if (cu->state != CU_LOADED)
        return;
    for (size_t k = j->first[i]; k < j->first[i] + j->count[i]; k++) {
        int32_t t = top_for(cu, j->pairs[k].addr);
        if (t >= 0)
            scope_expand(o, cu, (uint32_t)t);
    }
}

static size_t prep_next(struct prep_job *j)
{
    pthread_mutex_lock(&j->mu);
    size_t i = j->next < j->ncus ? j->next++ : SIZE_MAX;
    pthread_mutex_unlock(&j->mu);
    return i;
}

static void *prep_worker(void *arg)
{
    struct prep_job *j = arg;
    Dwarf_Debug dbg = NULL;
    struct dw_obj *o = NULL;
    int fd = open(j->d->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (open_handle(fd, &dbg, &o) < 0) {
        close(fd);
        return NULL;
    }
    for (size_t i; (i = prep_next(j)) != SIZE_MAX;)
        prep_one(o, j, i);
    Dwarf_Error e = NULL;
    if (finish_handle(dbg, &e) != DW_DLV_OK && e)
        dwarf_dealloc_error(NULL, e);
    close(fd);
    return NULL;
}

static int pair_cmp(const void *a, const void *b)
{
    const struct prep_pair *x = a, *y = b;
    if (x->cu != y->cu)
        return x->cu < y->cu ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void sym_dw_prepare(struct sym_dw *d, const uint64_t *addrs, size_t n, int threads)
{
    /* Pair every address with its CU (cu_find may extend the CU table, so
     * this stays on the calling thread), keep the CUs not loaded yet. */
    struct prep_pair *pairs = hp_xmalloc((n ? n : 1) * sizeof(*pairs));
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        int c = cu_find(d, addrs[i]);
        if (c >= 0 && d->cus[c].state == CU_UNLOADED)
            pairs[np++] = (struct prep_pair){ (uint32_t)c, addrs[i] };
    }
    qsort(pairs, np, sizeof(*pairs), pair_cmp);
    struct prep_job j = { .d = d, .pairs = pairs };
    size_t cap = 0, cap2 = 0, cap3 = 0;
    for (size_t k = 0; k < np; k++) {
        if (k == 0 || pairs[k].cu != pairs[k - 1].cu) {
            j.cus = hp_xgrow(j.cus, &cap, j.ncus + 1, sizeof(*j.cus));
            j.first = hp_xgrow(j.first, &cap2, j.ncus + 1, sizeof(*j.first));
            j.count = hp_xgrow(j.count, &cap3, j.ncus + 1, sizeof(*j.count));
            j.cus[j.ncus] = pairs[k].cu;
            j.first[j.ncus] = k;
            j.count[j.ncus] = 0;
            j.ncus++;
        }
        j.count[j.ncus - 1]++;
    }
    pthread_mutex_init(&j.mu, NULL);
    /* Extra handles cost a second copy of the sections libdwarf reads; only
     * worth it with enough CUs to share. */
    int started = 0;
    pthread_t tids[15];
    if (threads > 1 && j.ncus >= 8) {
        int nt = HP_MIN(threads - 1, 15);
        for (int t = 0; t < nt; t++)
            if (pthread_create(&tids[t], NULL, prep_worker, &j) == 0)
                started++;
    }
    /* The calling thread works too, with the main handle. */
    for (size_t i; (i = prep_next(&j)) != SIZE_MAX;)
        prep_one(d->obj, &j, i);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    pthread_mutex_destroy(&j.mu);
    free(j.cus);
    free(j.first);
    free(j.count);
    free(pairs);
}

static bool scope_contains(const struct dw_cu *cu, const struct dw_scope *s, uint64_t addr)
{
    for (uint32_t k = 0; k < s->nranges; k++) {
        const struct dw_range *r = &cu->ranges[s->range_off + k];
        if (addr >= r->lo && addr < r->hi)
            return true;
    }
    return false;
}

static const char *cu_file(const struct dw_cu *cu, uint32_t fno)
{
    int64_t i = (int64_t)fno - cu->file_base;
    if (i < 0 || i >= (int64_t)cu->nfiles)
        return NULL;
    return cu->files[i];
}

int sym_dw_lookup(struct sym_dw *d, uint64_t addr, struct sym_dw_frame *out, int cap)
{
    int c = cu_find(d, addr);
    if (c < 0 || cap <= 0)
        return 0;
    struct dw_cu *cu = &d->cus[c];
    if (cu->state == CU_UNLOADED)
        cu_load(d->obj, cu);
    if (cu->state != CU_LOADED)
        return 0;

    /* Line: the last row at or before addr, unless it ends a sequence. */
    const char *file = NULL;
    uint32_t line = 0;
    size_t lo = hp_search_le_u64(cu->rows, cu->nrows, sizeof(*cu->rows),
                                 offsetof(struct dwraw_row, addr), addr);
    if (lo > 0 && cu->rows[lo - 1].file != UINT32_MAX) {
        file = cu_file(cu, cu->rows[lo - 1].file);
        line = cu->rows[lo - 1].line;
    }

    /* Scope: the top-level subprogram, then down the inline chain. */
    int32_t cur = top_for(cu, addr);
    if (cur >= 0)
        scope_expand(d->obj, cu, (uint32_t)cur);
    if (cur < 0) {
        if (!file)
            return 0;
        out[0] = (struct sym_dw_frame){ .file = file, .line = line };
        return 1;
    }
    for (int guard = 0; guard < SYM_MAX_INLINE_DEPTH; guard++) {
        const struct dw_scope *s = &cu->scopes[cur];
        int32_t next = -1;
        for (uint32_t ch = s->first_child; ch < s->end; ch = cu->scopes[ch].end) {
            if (cu->scopes[ch].end <= ch)
                break; /* malformed nesting; never loop */
            if (scope_contains(cu, &cu->scopes[ch], addr)) {
                next = (int32_t)ch;
                break;
            }
        }
        if (next < 0)
            break;
        cur = next;
    }

    int n = 0;
    for (int guard = 0; cur >= 0 && n < cap && guard < SYM_MAX_INLINE_DEPTH; guard++) {
        const struct dw_scope *s = &cu->scopes[cur];
        uint32_t ni = name_of(d, s->die_off, 0);
        const struct dw_name *nm = name_at(d, ni);
        out[n] = (struct sym_dw_frame){ .name = nm->name, .file = file, .line = line,
                                        .linkage = nm->linkage };
        if (!s->inlined && s->nranges) {
            /* The physical function: its entry (the first range is the
             * one holding low_pc), and the gdb-style qualified name for
             * the caller's last resort. */
            out[n].entry = cu->ranges[s->range_off].lo;
            if (!nm->linkage)
                out[n].qualified = qualified_name(d, ni);
        }
        n++;
        if (!s->inlined)
            break;
        file = cu_file(cu, s->call_file);
        line = s->call_line;
        cur = s->parent;
    }
    return n;
}
