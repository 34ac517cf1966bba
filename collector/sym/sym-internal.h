/* Internal interfaces of the symbolizer (collector/sym/ only).
 *
 *   dwarf.c    the only file that includes libdwarf: line tables and inlined
 *              subroutines per compilation unit, loaded lazily;
 *   object.c   libelf: PT_LOAD headers and the ELF symbol tables;
 *   debuginfod.c  the only file that includes curl;
 *   demangle.c libiberty and jeprof's naming rules;
 *   sym.c      the public API: where files come from (--binary, --symbols,
 *              maps path, debuglink, /usr/lib/debug/.build-id, debuginfod)
 *              and their checks, profile walking, caches, allocator
 *              trimming. */
#ifndef HP_SYM_INTERNAL_H
#define HP_SYM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "collector/sym/sym.h"
#include "store/hp.h"

/* Caps on what a (possibly hostile) file may make us hold. */
#define SYM_MAX_INLINE_DEPTH 64   /* frames for one address */
#define SYM_MAX_DIE_DEPTH 256     /* DIE tree nesting we follow */
#define SYM_MAX_SYMBOLS (1u << 26) /* ELF symbols per object */

/* ---- dwarf.c ------------------------------------------------------------ */
struct sym_dw;

/* A raw frame: name as the DWARF has it (a linkage name is still mangled),
 * file as a full path. Strings live as long as the sym_dw. */
struct sym_dw_frame {
    const char *name;
    const char *file;
    uint32_t line;
    bool linkage;          /* name is a (mangled) linkage name */
    const char *qualified; /* physical frame without a linkage name: DW_AT_name
                            * qualified by its enclosing scopes, gdb style */
    uint64_t entry;        /* physical frame: the function's low_pc */
};

/* Open the DWARF of an ELF file. 0; HP_ENOTFOUND when it carries no DWARF;
 * HP_EDWARF (reason in err) when it is unreadable. Nothing but the section
 * headers is read here; .debug_aranges (which makes libdwarf load all of
 * .debug_info) on the first lookup. */
int sym_dw_open(const char *path, struct sym_dw **ret, struct hp_buf *err);
void sym_dw_free(struct sym_dw *d);
/* Attach dwz's common file (the one .gnu_debugaltlink names, found and
 * build-id checked by the caller): strings (DW_FORM_GNU_strp_alt) and DIEs
 * (DW_FORM_GNU_ref_alt) that dwz moved there are read from it. 0, or
 * HP_EDWARF / -errno with a reason in err (d is unchanged then). */
int sym_dw_set_alt(struct sym_dw *d, const char *path, struct hp_buf *err);
/* Prepare the compilation units holding these addresses (sorted or not),
 * parsing them on up to `threads` threads. Optional: sym_dw_lookup loads
 * what it needs on its own. */
void sym_dw_prepare(struct sym_dw *d, const uint64_t *addrs, size_t n, int threads);
/* Frames for one ELF virtual address, innermost first, at most cap. Returns
 * the count (0: no DWARF covers the address). A frame may have a NULL name
 * (line info without a subprogram). */
int sym_dw_lookup(struct sym_dw *d, uint64_t addr, struct sym_dw_frame *out, int cap);
/* Read line programs and inline trees with libdwarf only (false) or with
 * the narrow readers of dwraw.c where they can (true, the default unless
 * $HEAPFLEET_DWARF_READER is "libdwarf"); for CUs not loaded yet. */
void sym_dw_set_narrow(struct sym_dw *d, bool on);
/* CUs whose line table, and inline trees, the narrow readers read. */
void sym_dw_narrow_counts(const struct sym_dw *d, size_t *ret_lines, size_t *ret_trees);
/* Bytes of CUs parsed so far (tests check laziness with it). */
size_t sym_dw_cus_loaded(const struct sym_dw *d, size_t *ret_total);

/* ---- dwraw.c: narrow readers of DIEs, line programs and range lists -- */
struct dwraw_abbrev;
struct dwraw_spec;

/* One unit's header and abbreviation table, with no pointer into the
 * sections: every read is handed the bytes of .debug_info. */
struct dwraw_unit {
    uint64_t off, end;  /* the unit's bytes in .debug_info: [off, end) */
    uint64_t die_start; /* its first DIE */
    uint16_t version;
    uint8_t addr_size, off_size;
    bool msb;
    struct dwraw_abbrev *abbrevs; /* sorted by code */
    size_t nabbrevs;
    struct dwraw_spec *specs;
    size_t nspecs;
    uint32_t *direct; /* small code -> index + 1 into abbrevs */
    uint32_t ndirect;
};

/* What the scope walk needs of one DIE. `odd`: low_pc, high_pc, call_file
 * or call_line is in a form this reader does not decode (the caller asks
 * libdwarf for that DIE); has_ranges: DW_AT_ranges is there (ditto). */
struct dwraw_die {
    uint64_t off;
    uint16_t tag;
    bool children;
    uint64_t sibling; /* DW_AT_sibling as a .debug_info offset, or 0 */
    bool has_low, has_high, high_const, has_ranges, odd;
    uint64_t low, high;
    uint64_t call_file, call_line;
    bool has_stmt_list;
    uint64_t stmt_list; /* DW_AT_stmt_list: offset in .debug_line */
    bool ranges_secoff; /* DW_AT_ranges is a DW_FORM_sec_offset: */
    uint64_t ranges;    /* its offset in .debug_ranges / .debug_rnglists */
    bool ranges_base;   /* DW_AT_GNU_ranges_base or DW_AT_rnglists_base */
};

/* Parse the header of the unit at unit_off and its abbreviations. 0, or
 * HP_EPARSE for a malformed or unsupported unit (u is then empty). */
int dwraw_unit_init(struct dwraw_unit *u, const uint8_t *info, size_t info_len,
                    uint64_t unit_off, const uint8_t *abbrev, size_t abbrev_len, bool msb);
void dwraw_unit_release(struct dwraw_unit *u);
/* Read the DIE at *pos (an offset in .debug_info inside u) into *d and move
 * *pos past its attributes: 1, 0 for a null entry (end of a child list), -1
 * malformed. */
int dwraw_die_read(const struct dwraw_unit *u, const uint8_t *info, uint64_t *pos,
                   struct dwraw_die *d);
/* Move *pos (just past d's attributes) past d's children. 0, or -1. */
int dwraw_skip_children(const struct dwraw_unit *u, const uint8_t *info, uint64_t *pos,
                        const struct dwraw_die *d);

/* The entries of the range list at `off` of .debug_ranges (version < 5)
 * or .debug_rnglists (5), as absolute [lo, hi) in list order, empty ones
 * included, into out: how many, or -1 for a list this reader leaves to
 * libdwarf (entries through .debug_addr, malformed, more than cap). */
struct dwraw_range {
    uint64_t lo, hi;
};
int dwraw_ranges(const uint8_t *sec, size_t sec_len, uint64_t off, unsigned version,
                 uint8_t addr_size, bool msb, uint64_t base, struct dwraw_range *out, size_t cap);

/* One row of a line program, as dwarf.c keeps them: file is UINT32_MAX
 * where the row ends a sequence (see dwraw.c for how libdwarf's
 * epilogue_begin quirk is read), and then line is 0; else the line is
 * truncated to 32 bits and a file number above UINT32_MAX - 1 reads 0. */
struct dwraw_row {
    uint64_t addr;
    uint32_t line;
    uint32_t file;
};

/* The rows of the line program at `off` in .debug_line (sec), in program
 * order, into a malloc'ed *ret_rows: the program's version (2-5), or -1 when the program is
 * malformed or of a kind this reader leaves to libdwarf (see dwraw.c). */
int dwraw_lines(const uint8_t *sec, size_t sec_len, uint64_t off, uint8_t cu_addr_size, bool msb,
                struct dwraw_row **ret_rows, size_t *ret_n);

/* ---- object.c ----------------------------------------------------------- */
struct sym_load {
    uint64_t vaddr, memsz, offset, filesz;
    uint32_t flags; /* PF_X ... */
};

struct sym_symbol {
    uint64_t addr, size;
    const char *name; /* mangled, as in the table */
};

struct sym_elf {
    char *path;
    struct sym_elf_identity id;
    uint16_t type; /* ET_EXEC, ET_DYN */
    struct sym_load *loads;
    size_t nloads;
    struct sym_symbol *syms; /* sorted by addr; read only once syms_loaded */
    size_t nsyms;
    bool has_symtab;
    bool syms_loaded;
    struct stat st; /* the file as opened */
    struct hp_arena arena;
};

/* Read an ELF file's identity, PT_LOADs and symbols (.symtab, else .dynsym,
 * merged when both). 0 or HP_EELF/-errno with a reason in err. */
int sym_elf_open(const char *path, struct sym_elf **ret, struct hp_buf *err);
/* The same, but the symbols are read when first asked for
 * (sym_elf_symbol_at, sym_elf_nsyms); syms/nsyms are not to be read
 * directly then. */
int sym_elf_open_lazy(const char *path, struct sym_elf **ret, struct hp_buf *err);
/* How many symbols (reading them first when opened lazily). */
size_t sym_elf_nsyms(struct sym_elf *e);
void sym_elf_free(struct sym_elf *e);
/* The ELF virtual address of file offset `off`, via PT_LOAD. 1 found, 0 not. */
int sym_elf_offset_to_vaddr(const struct sym_elf *e, uint64_t off, uint64_t *ret_vaddr);
/* Symbol containing vaddr (or, when none does, the nearest one before it in
 * the same PT_LOAD, as nm-based tools attribute stripped code). NULL if none. */
const struct sym_symbol *sym_elf_symbol_at(struct sym_elf *e, uint64_t vaddr, bool *ret_exact);
/* Check that a maps line [start, limit) at file offset `offset` lies in an
 * executable PT_LOAD of this file. 0 or HP_EMISMATCH with a reason. */
int sym_elf_check_mapping(const struct sym_elf *e, uint64_t offset, uint64_t len,
                          struct hp_buf *err);

struct sym_dbgd_options;

/* Where to look for dwz's common file of a debug file (object.c). */
struct sym_alt_where {
    const char *debug_file;  /* the file whose .gnu_debugaltlink this is */
    const char *altlink;     /* the path it names */
    const char *build_id;    /* the build-id it names */
    const char *symbols_dir; /* or NULL */
    bool system_debug;       /* look in /usr/lib/debug/.build-id too */
    const struct sym_dbgd_options *dbgd; /* or NULL */
};

/* Find the alternate file: the path as written (relative to the debug
 * file's folder), its basename next to the debug file and in symbols_dir,
 * the .build-id layouts, then debuginfod. Every candidate's build-id must
 * match. 0 with a malloc'ed path, or HP_ENOTFOUND (rejected candidates are
 * described in why). */
int sym_alt_find(const struct sym_alt_where *w, char **ret_path, struct hp_buf *why);

/* ---- symcache.c: the on-disk cache's file format ------------------------ */
/* Bump when what resolve_vaddr() answers for an address changes (naming
 * rules, frame order): files made by older rules are then ignored. */
#define SYM_CACHE_RULES 1u

/* A checked cache file image (pointers into the caller's bytes). */
struct sym_cache_image {
    const unsigned char *entries, *frames;
    const char *strings;
    size_t nentries, nframes;
};

/* Check a whole cache file (see symcache.c for the format): 0, or
 * HP_ECORRUPT / HP_EVERSION with the reason in err. build_id NULL skips the
 * name check (fuzzing). Every entry and offset is checked here, so the
 * accessors below cannot read outside `data`. */
int sym_cache_image_parse(const void *data, size_t len, const char *build_id,
                          struct sym_cache_image *ret, struct hp_buf *err);
uint64_t sym_cache_image_vaddr(const struct sym_cache_image *im, size_t i);
/* Entry i's frames into out (SYM_MAX_INLINE_DEPTH of them at most). */
uint32_t sym_cache_image_get(const struct sym_cache_image *im, size_t i,
                             struct profile_frame *out);

/* ---- debuginfod.c ------------------------------------------------------- */
/* Servers that failed at the transport level (down, stalled) are skipped
 * for a while, so one dead server costs one timeout per symbolizer, not one
 * per object. Owned by the symbolizer. */
struct sym_dbgd_backoff {
    uint64_t url_hash[16];
    uint64_t until_ns[16];
};

struct sym_dbgd_options {
    struct sym_dbgd_backoff *backoff; /* may be NULL */
    const struct sym_server *servers; /* asked in order */
    size_t nservers;
    const char *cache_dir; /* on-disk cache root */
    long timeout_ms;
    uint64_t max_bytes;       /* one download; 0: 4 GiB */
    uint64_t cache_max_bytes; /* the whole cache; 0: 16 GiB */
};

/* Fetch /buildid/<hex>/<kind> ("debuginfo" or "executable") into the cache
 * and return its path (malloc'ed). The download is verified to be ELF with
 * the requested build-id before it is placed in the cache. 0, HP_ENOTFOUND
 * (no server has it), HP_EHTTP / HP_EMISMATCH with reasons in err. */
int sym_debuginfod_fetch(const struct sym_dbgd_options *o, const char *build_id,
                         const char *kind, char **ret_path, struct hp_buf *err);
/* Append the servers of a space-separated URL list ($DEBUGINFOD_URLS) to
 * *servers (urls malloc'ed, owned by the caller). */
void sym_dbgd_servers_parse(const char *urls, struct sym_server **servers, size_t *n,
                            size_t *cap);
/* Ask a node's agent which build it has at `path` (GET /identity?path=).
 * 0 with the lowercase hex build-id in ret_build_id (2*SYM_BUILD_ID_MAX+1
 * bytes); HP_ENOTFOUND when the agent does not serve that path or the file
 * has no build-id; HP_EHTTP / HP_EPARSE with a reason in err. */
int sym_agent_identity(const struct sym_server *agent, const char *path, long timeout_ms,
                       char *ret_build_id, struct hp_buf *err);
/* Its answer parser: 0, HP_ENOTFOUND ("build_id": ""), HP_EPARSE. */
int sym_agent_identity_parse(const char *body, size_t len, char *ret_build_id);

/* gperftools' symbol service (Doris and StarRocks BEs serve it at
 * /pprof/symbol): POST "0xA+0xB+..." to sv->url, cb once per "0xADDR name"
 * answer line (name not NUL-terminated). Batches of 4096 addresses, 16 MiB
 * per answer. 0, or HP_EHTTP / HP_ENOTFOUND with a reason in err. */
typedef void (*sym_symbol_cb)(void *ctx, uint64_t addr, const char *name, size_t len);
int sym_pprof_symbol(const struct sym_server *sv, const uint64_t *addrs, size_t n,
                     long timeout_ms, sym_symbol_cb cb, void *ctx, struct hp_buf *err);
/* The answer parser of sym_pprof_symbol (fuzzed on its own). */
void sym_pprof_symbol_parse(const char *b, size_t n, sym_symbol_cb cb, void *ctx);

/* ---- demangle.c --------------------------------------------------------- */
/* Display name for a raw symbol/DWARF name, interned by the caller. Returns
 * either `raw` itself or a malloc'ed string stored in *ret_owned. */
const char *sym_display_name(const char *raw, char **ret_owned);

#endif
