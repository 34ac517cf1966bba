/* The symbolizer: turns the addresses of a profile into function names,
 * source files, lines and inlined frames, off the node that produced them.
 *
 * For every address location of a profile the symbolizer finds the mapping
 * (profile->mappings, from the dump's MAPPED_LIBRARIES), turns the runtime
 * address into the object's ELF virtual address through its PT_LOAD headers,
 * finds a file for the object on this host (see "Where binaries come from"),
 * and resolves the address with DWARF (libdwarf: line tables and inlined
 * subroutines, parsed lazily per compilation unit) and the ELF symbol tables
 * (libelf: .symtab, .dynsym). Names are demangled with libiberty (C++, Rust
 * legacy and v0; Rust `::h<hash>` suffixes dropped).
 *
 * Addresses in a profile are already caller-adjusted (every caller address
 * minus one, the leaf as recorded; see store/profile.h): the symbolizer looks
 * them up as they are.
 *
 * Where binaries come from, in this order, for each object of the profile:
 *   1. sym_options.binary, for the main executable (the mapping whose file
 *      name matches its basename, else the lowest file-backed mapping);
 *   2. sym_options.symbols_dir: DIR/<basename>, and DIR/.build-id/xx/rest.debug
 *      once a build-id is known;
 *   3. the path of the maps line, when it exists on this host;
 *   4. the node's agent (sym_profile_node): /buildid/<id>/debuginfo, then
 *      /executable, the build-id learnt from its /identity?path=;
 *   5. debuginfod servers (sym_options.servers, then debuginfod_urls), the
 *      same two files each;
 *   then, for debug info when the file found has none: the file's
 *   .gnu_debuglink (next to it, in .debug/, under /usr/lib/debug/), the
 *   /usr/lib/debug/.build-id/xx/rest.debug layout, and debuginfod servers
 *   (sym_options.debuginfod_urls, else $DEBUGINFOD_URLS; GET
 *   /buildid/<hex>/debuginfo and /executable) with an on-disk cache in
 *   sym_options.cache_dir. Every candidate is verified: its build-id against
 *   the one the profile records (pprof inputs carry it; jemalloc dumps do
 *   not), a separate debug file's build-id against its image's, and the
 *   maps' executable segments against the file's PT_LOAD headers. A file
 *   that fails is reported in the per-object status and never used.
 *
 * Output, per location: frames innermost first as `addr2line -f -i -C` prints
 * them (function names demangled with parameters, like addr2line -C; use
 * sym_function_short() for jeprof --text style names), PROFILE_LOC_SYMBOLIZED
 * set, and PROFILE_LOC_ALLOCATOR set on the leaf-end locations that belong to
 * the allocator, trimmed as jeprof's RemoveUninterestingFrames does.
 * Unresolved addresses keep no frames (profile_frame_label() then prints
 * "0x… object") and are counted in sym_stats.
 *
 * Caching: results are kept in memory per object identity (build-id, or path
 * and size when the file has none) for the life of the symbolizer, so the next
 * profile of the same binary resolves without touching DWARF. A persistent
 * store can plug in with sym_cache_ops (see below).
 *
 * Thread context: a symbolizer is used by one thread at a time and does
 * blocking work (file I/O, DWARF parsing, debuginfod HTTP): call it from a
 * worker thread, never from an event loop. It may start helper threads of its
 * own for DWARF parsing (sym_options.threads). */
#ifndef HP_SYM_H
#define HP_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

/* ---- ELF identity (elfid.c; its own library, sym_elfid, libelf only) ------
 * The GNU build-id note and size of an object file, used to check that a
 * binary found on this host (or served by a node's agent) is the one a
 * profile was taken from, and to key symbol caches. The agent links only
 * sym_elfid and uses just this part of the header. Any thread. */
#define SYM_BUILD_ID_MAX 64 /* bytes; hex form needs 2x + 1 */

struct sym_elf_identity {
    char build_id[2 * SYM_BUILD_ID_MAX + 1]; /* lowercase hex, "" when the file has none */
    uint64_t size;                          /* file size in bytes */
    char debuglink[256];                    /* .gnu_debuglink file name, "" if none */
    char altlink[256];                      /* .gnu_debugaltlink path (dwz), "" if none */
    char altlink_build_id[2 * SYM_BUILD_ID_MAX + 1]; /* the alternate file's build-id */
    bool has_debug_info;                    /* has .debug_info (or .zdebug_info) */
    bool has_symtab;                        /* has .symtab */
};

/* Read the identity of an ELF file. 0, or HP_EELF (not ELF / corrupt) or a
 * negated errno, with the reason appended to err. */
int sym_elf_identity_read(const char *path, struct sym_elf_identity *ret, struct hp_buf *err);

/* Same, for an ELF image in memory (fuzzing, files fetched over HTTP). */
int sym_elf_identity_mem(const void *data, size_t len, struct sym_elf_identity *ret,
                         struct hp_buf *err);

struct symbolizer;

/* Persistence hook, keyed by build-id (lowercase hex) and ELF virtual
 * address. Both callbacks are optional and are called on the symbolizer's
 * thread. Objects without a build-id are never persisted.
 *
 * load_cb: 1 when the store has an answer (frames in *ret_frames, *ret_n of
 *   them, possibly 0 = "known to be unresolvable"; the strings and array
 *   must stay valid until the next call on ctx), 0 when it has none, <0 on
 *   error (the symbolizer then resolves the address itself).
 * save_cb: a freshly resolved address; frames innermost first, strings valid
 *   only during the call. Return value is ignored except for logging.
 * flush_cb: called at the end of each sym_profile() that saved anything, so
 *   a store can commit one transaction per profile.
 * stable_strings: true when the strings load_cb hands out stay valid and
 *   unchanged for the whole sym_profile() call, so the symbolizer can copy
 *   each once, by its pointer, instead of hashing its bytes at every frame
 *   that names it. */
struct sym_cache_ops {
    void *ctx;
    int (*load_cb)(void *ctx, const char *build_id, uint64_t vaddr,
                   const struct profile_frame **ret_frames, uint32_t *ret_n);
    int (*save_cb)(void *ctx, const char *build_id, uint64_t vaddr,
                   const struct profile_frame *frames, uint32_t n);
    void (*flush_cb)(void *ctx);
    bool stable_strings;
};

/* The on-disk cache for one-shot processes (`query top FILE --binary B`
 * run twice): one file per build-id in `dir` (NULL: the default below),
 * written whole and renamed into place, checked on every read (a truncated
 * or corrupt file is ignored and replaced), all files together kept under
 * max_bytes (0: 1 GiB) by removing the least recently used. Plug it in with
 * sym_options.cache_ops = sym_file_cache_ops(c); free it after sym_free().
 * Only answers made with the object's full debug info are stored. One
 * thread at a time, like the symbolizer. Never fails: a folder that cannot
 * be written makes writes fail quietly (counted in the stats). */
struct sym_file_cache;
struct sym_file_cache_stats {
    size_t hits;          /* addresses answered from files */
    size_t files_loaded;  /* valid files read */
    size_t rejected;      /* files ignored: truncated, corrupt, other rules */
    size_t files_written;
    size_t write_errors;
    size_t evicted;       /* files removed to stay under max_bytes */
};
struct sym_file_cache *sym_file_cache_new(const char *dir, uint64_t max_bytes);
const struct sym_cache_ops *sym_file_cache_ops(struct sym_file_cache *c);
void sym_file_cache_stats(const struct sym_file_cache *c, struct sym_file_cache_stats *ret);
void sym_file_cache_free(struct sym_file_cache *c);
/* $XDG_CACHE_HOME/heapfleet/sym, else ~/.cache/heapfleet/sym (malloc'ed),
 * NULL when neither variable is set. */
char *sym_file_cache_default_dir(void);

/* A server that answers GET /buildid/<hex>/debuginfo|executable: a
 * debuginfod, or a node's agent. Strings are borrowed (copied by sym_new). */
struct sym_server {
    const char *url;         /* base URL, "https://debuginfod.example" */
    const char *bearer;      /* token sent as "Authorization: Bearer", or NULL */
    const char *header_file; /* file of "Name: value" header lines, or NULL */
    const char *ca_file;     /* CA bundle for private TLS, or NULL */
    const char *user, *password; /* HTTP basic auth (a BE's own), or NULL */
};

/* The node a profile came from, for sym_profile_node(): its agent is asked
 * which build each mapped path is (GET /identity?path=) and for that
 * build's files, after the local sources and before debuginfod. */
struct sym_node {
    const char *name;  /* for messages */
    struct sym_server agent; /* url NULL: the node has no agent */
    /* The node's gperftools symbol service ("http://be:8040/pprof/symbol"),
     * or url NULL: asked for the addresses of objects no source above had,
     * it gives names only (no file:line, no inlined frames); such locations
     * are flagged PROFILE_LOC_NAMED and the profile's hint says so. */
    struct sym_server symbol_service;
};

struct sym_options {
    const char *binary;          /* --binary: the main executable, or NULL */
    const char *symbols_dir;     /* --symbols DIR, or NULL */
    bool no_inline;              /* one frame per address (the physical function) */
    bool no_local_paths;         /* do not open maps paths on this host */
    bool no_system_debug;        /* skip /usr/lib/debug (tests) */
    const struct sym_server *servers; /* --debuginfod, asked in order before ... */
    size_t nservers;
    const char *debuginfod_urls; /* ... these, space-separated; NULL: $DEBUGINFOD_URLS; "" none */
    const char *cache_dir;       /* debuginfod download cache; NULL: $XDG_CACHE_HOME/heapfleet
                                    or ~/.cache/heapfleet */
    long debuginfod_timeout_ms;  /* per request, 0: 10000 */
    uint64_t debuginfod_max_bytes; /* per download, 0: 4 GiB */
    uint64_t debuginfod_cache_max_bytes; /* the download cache in all, 0: 16 GiB;
                                            the least recently used go first */
    int threads;                 /* DWARF worker threads, 0: 2 */
    const struct sym_cache_ops *cache_ops; /* NULL: memory cache only */
};

/* What happened to one object (mapping file) of the last sym_profile(). */
struct sym_object_status {
    const char *path;        /* as the profile names it */
    const char *used;        /* file symbols came from, or NULL */
    const char *debug;       /* separate debug file, or NULL */
    const char *build_id;    /* "" when unknown */
    const char *message;     /* one line a user reads: "ok", "build-id mismatch (...)", ... */
    /* Every source asked, in order, and what it said: "SOURCE: SAID"
     * joined by " | " ("maps path /opt/be/bin/be: no such file | agent
     * http://be-1:8041: debuginfo not found, executable not found"). A
     * SOURCE never holds ": ", neither part holds '|' or a newline. "" when
     * nothing was asked (the memory cache answered). */
    const char *tried;
    int status;              /* 0 ok, or the HP_E* code that made it unusable */
    uint32_t addresses, resolved;
};

struct sym_stats {
    size_t locations;   /* address locations seen */
    size_t resolved;    /* got at least a function name */
    size_t unresolved;  /* object found, address had no symbol */
    size_t no_binary;   /* object file not found or not usable */
    size_t anonymous;   /* anonymous, [vdso]-like or unmapped addresses */
    size_t cache_hits;  /* answered from the memory or persistent cache */
    size_t allocator;   /* locations flagged PROFILE_LOC_ALLOCATOR */
    size_t nobjects;
    const struct sym_object_status *objects; /* valid until the next call or sym_free */
};

/* NULL options mean all defaults. Never fails (files are opened lazily). */
struct symbolizer *sym_new(const struct sym_options *opt);
void sym_free(struct symbolizer *s);

/* Symbolize every address location of p in place (see the file comment).
 * Returns 0 even when some objects could not be symbolized (their status and
 * the counts say so; a line per problem is appended to err), or a negative
 * HP_E* when nothing could be attempted. ret_stats may be NULL. */
int sym_profile(struct symbolizer *s, struct profile *p, struct sym_stats *ret_stats,
                struct hp_buf *err);
/* Same, for a profile fetched from `node` (NULL: same as sym_profile): its
 * agent is a source of build-ids and files (see struct sym_node). */
int sym_profile_node(struct symbolizer *s, struct profile *p, const struct sym_node *node,
                     struct sym_stats *ret_stats, struct hp_buf *err);

/* Forget every object no source could supply, and every object found
 * without debug info (with what it resolved), and the servers skipped after
 * a transport failure, so the next profile asks the local folders and
 * remote sources again at once (files added to a symbols folder, an agent
 * back, a debuginfod server that now has the debug file): without this a
 * local failure stands for the life of the symbolizer and a remote one for
 * a minute. Same thread rules. */
void sym_forget_failures(struct symbolizer *s);

/* One resolved address of sym_batch_resolve(): frames innermost first, in
 * `frames[first .. first+n)` of the result. */
struct sym_batch_result {
    uint32_t first, n;
};

struct sym_batch {
    struct sym_batch_result *results; /* one per input address */
    struct profile_frame *frames;
    size_t nframes;
    const char *build_id; /* identity of the file used, "" if none */
    struct hp_arena arena; /* owns the strings */
};

/* Batched lookup for one object file (blazesym style): resolve `n` ELF
 * virtual addresses of `path` (with debug info found the same way as for a
 * profile). Results are in input order; an address without symbols gets
 * n = 0. Fills *ret (release with sym_batch_release). 0, HP_ENOTFOUND,
 * HP_EELF/HP_EDWARF (unusable file) with a reason in err. On success err
 * may still receive a note on what is missing (no debug info, dwz's common
 * file not found). */
int sym_batch_resolve(struct symbolizer *s, const char *path, const uint64_t *vaddrs, size_t n,
                      struct sym_batch *ret, struct hp_buf *err);
void sym_batch_release(struct sym_batch *b);

/* jeprof's ShortFunctionName: drop argument lists, template arguments and a
 * leading return type ("std::vector<int>::push_back(int const&)" ->
 * "std::vector::push_back"). Writes into out (NUL-terminated, truncated to
 * outsz) and returns out. */
const char *sym_function_short(const char *name, char *out, size_t outsz);

/* Demangle a C++/Rust symbol as addr2line -C would (Rust hashes dropped).
 * Returns a malloc'ed string, or NULL when `name` is not mangled. */
char *sym_demangle(const char *name);

/* Is this (short) function name one jeprof treats as an allocator entry? */
bool sym_is_allocator_function(const char *short_name);

#endif
