/* Symbolizer unit and bad-input tests on real binaries: jefixture (built
 * with -g -O2 by meson) and copies of it damaged in a temp directory.
 * Profiles are built by hand from the binary's own PT_LOAD headers, as a
 * PIE mapped at a fixed base, so every expectation is known.
 *
 * Environment (set by meson): JEFIXTURE = the fixture executable,
 * SYMTOOL = another executable with DWARF (a "wrong binary"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <elf.h>

#include "collector/sym/sym-internal.h"
#include "collector/sym/sym.h"

#define BASE UINT64_C(0x555555554000)

static char tmpdir[256];
static const char *jefixture, *symtool;

static char *tmp_path(const char *name)
{
    return hp_xasprintf("%s/%s", tmpdir, name);
}

static void copy_file(const char *from, const char *to, size_t max_len)
{
    char *data;
    size_t len;
    assert_int_equal(hp_file_read(from, (size_t)1 << 30, &data, &len, NULL), 0);
    if (max_len && len > max_len)
        len = max_len;
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    chmod(to, 0755);
    free(data);
}

/* ELF virtual address of a function symbol of jefixture (by prefix, since
 * GCC may have cloned it: "leak_tablet_schema.constprop.0"). */
static uint64_t symbol_vaddr(const char *path, const char *prefix)
{
    struct sym_elf *e = NULL;
    assert_int_equal(sym_elf_open(path, &e, NULL), 0);
    uint64_t v = 0;
    for (size_t i = 0; i < e->nsyms && !v; i++)
        if (strncmp(e->syms[i].name, prefix, strlen(prefix)) == 0 && e->syms[i].size > 8)
            v = e->syms[i].addr;
    sym_elf_free(e);
    assert_true(v != 0);
    return v;
}

/* Mappings for `path` (which need not exist) laid out from `image`'s
 * PT_LOADs at BASE, like the kernel maps a PIE. */
static void add_mappings(struct profile *p, const char *image, const char *path,
                         const char *build_id)
{
    struct sym_elf *e = NULL;
    assert_int_equal(sym_elf_open(image, &e, NULL), 0);
    for (size_t i = 0; i < e->nloads; i++) {
        const struct sym_load *l = &e->loads[i];
        struct profile_mapping m = { 0 };
        m.start = BASE + (l->vaddr & ~UINT64_C(0xfff));
        m.limit = BASE + ((l->vaddr + l->memsz + 0xfff) & ~UINT64_C(0xfff));
        m.offset = l->offset & ~UINT64_C(0xfff);
        m.path = profile_intern(p, path, strlen(path));
        m.build_id = build_id;
        snprintf(m.perms, sizeof(m.perms), "r%c%cp", (l->flags & PF_W) ? 'w' : '-',
                 (l->flags & PF_X) ? 'x' : '-');
        if (l->flags & PF_X)
            m.flags |= PROFILE_MAP_EXEC;
        profile_mapping_add(p, &m);
    }
    sym_elf_free(e);
}

struct built {
    struct profile *p;
    uint32_t leaf, caller, anon, vdso;
};

/* One stack: tracked_alloc (leaf) <- main (caller, minus one as the
 * parser stores callers), plus a JIT-like anonymous and a [vdso] address. */
static struct built build_profile(const char *image, const char *path, const char *build_id)
{
    struct built b;
    b.p = profile_new(PROFILE_FORMAT_JEMALLOC);
    struct profile *p = b.p;
    add_mappings(p, image, path, build_id);
    struct profile_mapping anon = { .start = 0x7f0000000000, .limit = 0x7f0000100000,
                                    .path = "", .flags = PROFILE_MAP_ANON | PROFILE_MAP_EXEC };
    memcpy(anon.perms, "rwxp", 5);
    profile_mapping_add(p, &anon);
    struct profile_mapping vdso = { .start = 0x7fff00000000, .limit = 0x7fff00002000,
                                    .path = "[vdso]", .flags = PROFILE_MAP_SPECIAL };
    memcpy(vdso.perms, "r-xp", 5);
    profile_mapping_add(p, &vdso);
    uint64_t leaf = BASE + symbol_vaddr(jefixture, "tracked_alloc") + 4;
    uint64_t caller = BASE + symbol_vaddr(jefixture, "main") + 16;
    uint32_t locs[4];
    locs[0] = b.leaf = profile_location_for_address(p, leaf);
    locs[1] = b.caller = profile_location_for_address(p, caller);
    locs[2] = b.anon = profile_location_for_address(p, 0x7f0000000100);
    locs[3] = b.vdso = profile_location_for_address(p, 0x7fff00000100);
    uint32_t st = profile_stack_add(p, locs, 4);
    int64_t raw[PV_COUNT] = { 1, 4096, 0, 0 };
    profile_sample_add(p, st, 0, raw);
    profile_finish(p);
    return b;
}

static const struct profile_frame *frame(const struct profile *p, uint32_t loc, uint32_t i)
{
    assert_true(i < p->locs[loc].nframes);
    return &p->frames[p->locs[loc].frame_off + i];
}

static const struct sym_object_status *status_for(const struct sym_stats *st, const char *path)
{
    for (size_t i = 0; i < st->nobjects; i++)
        if (strcmp(st->objects[i].path, path) == 0)
            return &st->objects[i];
    fail_msg("no status for %s", path);
    return NULL;
}

static void test_sym_function_short_jeprof_rules(void **state)
{
    char b[256];
    assert_string_equal(sym_function_short("std::vector<int, std::allocator<int> >::push_back(int "
                                           "const&)",
                                           b, sizeof(b)),
                        "std::vector::push_back");
    assert_string_equal(sym_function_short("ns::Foo<int>::bar(int) const", b, sizeof(b)),
                        "ns::Foo::bar");
    assert_string_equal(sym_function_short("void* newImpl<false>(unsigned long)", b, sizeof(b)),
                        "void* newImpl");
    assert_string_equal(sym_function_short("void std::vector<int>::_M_realloc_insert<int "
                                           "const&>(int)",
                                           b, sizeof(b)),
                        "std::vector::_M_realloc_insert");
    assert_string_equal(sym_function_short("operator new(unsigned long)", b, sizeof(b)),
                        "operator new");
    assert_string_equal(sym_function_short("tracked_alloc", b, sizeof(b)), "tracked_alloc");
    /* truncation never overruns */
    char tiny[4];
    assert_string_equal(sym_function_short("abcdefgh", tiny, sizeof(tiny)), "abc");
}

static void test_sym_demangle_cpp_and_rust(void **state)
{
    char *d = sym_demangle("_ZN7storage6tablet4PoolIdE4makeEi");
    assert_non_null(d);
    assert_string_equal(d, "storage::tablet::Pool<double>::make(int)");
    free(d);
    d = sym_demangle("_ZN7fx_rust7storage5cache14build_segments17hb37c64d172f352f3E");
    assert_non_null(d);
    assert_string_equal(d, "fx_rust::storage::cache::build_segments");
    free(d);
    d = sym_demangle("_RNvNtNtCsba6WBKu2lgp_7fx_rust7storage5cache14build_segments");
    assert_non_null(d);
    assert_string_equal(d, "fx_rust::storage::cache::build_segments");
    free(d);
    assert_null(sym_demangle("tracked_alloc"));
    assert_null(sym_demangle("_Zgarbage"));
    assert_null(sym_demangle(NULL));
}

static void test_sym_allocator_names(void **state)
{
    assert_true(sym_is_allocator_function("malloc"));
    assert_true(sym_is_allocator_function("operator new"));
    assert_true(sym_is_allocator_function("operator new[]"));
    assert_true(sym_is_allocator_function("_calloc"));
    assert_true(sym_is_allocator_function("tcmalloc::allocate_full"));
    assert_false(sym_is_allocator_function("malloc_usable_size"));
    assert_false(sym_is_allocator_function("tracked_alloc"));
    assert_false(sym_is_allocator_function(NULL));
}

static void test_sym_batch_resolves_function_file_line(void **state)
{
    struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
    uint64_t va[3] = { symbol_vaddr(jefixture, "tracked_alloc") + 4,
                       symbol_vaddr(jefixture, "main") + 16, 0x10 };
    struct sym_batch b;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(sym_batch_resolve(s, jefixture, va, 3, &b, &err), 0);
    assert_true(b.results[0].n >= 1);
    const struct profile_frame *f = &b.frames[b.results[0].first + b.results[0].n - 1];
    assert_string_equal(f->function, "tracked_alloc");
    assert_non_null(f->file);
    assert_non_null(strstr(f->file, "jefixture.c"));
    assert_true(f->line > 0);
    f = &b.frames[b.results[1].first + b.results[1].n - 1];
    assert_string_equal(f->function, "main");
    assert_int_equal(b.results[2].n, 0); /* ELF header bytes: no symbol */
    assert_int_equal(strlen(b.build_id), 40);
    sym_batch_release(&b);
    /* A missing file is a clean error with the path in it. */
    assert_int_equal(sym_batch_resolve(s, "/nonexistent/x", va, 1, &b, &err), HP_ENOTFOUND);
    assert_non_null(strstr(err.data, "/nonexistent/x"));
    hp_buf_release(&err);
    sym_free(s);
}

static void test_sym_dwarf_is_lazy(void **state)
{
    /* symtool links the symbolizer, parsers and query library: many CUs. */
    struct sym_dw *d = NULL;
    assert_int_equal(sym_dw_open(symtool, &d, NULL), 0);
    uint64_t main_va = symbol_vaddr(symtool, "main");
    struct sym_dw_frame fr[8];
    int n = sym_dw_lookup(d, main_va + 8, fr, 8);
    assert_true(n >= 1);
    assert_string_equal(fr[n - 1].name, "main");
    size_t total = 0, loaded = sym_dw_cus_loaded(d, &total);
    assert_int_equal(loaded, 1);
    assert_true(total > 5);
    sym_dw_free(d);
}

static void test_sym_profile_symbolizes_and_counts(void **state)
{
    struct built b = build_profile(jefixture, jefixture, NULL);
    struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
    struct sym_stats st;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(sym_profile(s, b.p, &st, &err), 0);
    assert_int_equal(st.locations, 4);
    assert_int_equal(st.resolved, 2);
    assert_int_equal(st.anonymous, 2);
    assert_int_equal(st.no_binary, 0);
    struct profile *p = b.p;
    const struct profile_location *l = &p->locs[b.leaf];
    assert_true(l->flags & PROFILE_LOC_SYMBOLIZED);
    assert_false(l->flags & PROFILE_LOC_ALLOCATOR);
    assert_string_equal(frame(p, b.leaf, l->nframes - 1)->function, "tracked_alloc");
    assert_string_equal(frame(p, b.caller, p->locs[b.caller].nframes - 1)->function, "main");
    assert_int_equal(p->locs[b.anon].nframes, 0);
    assert_true(p->locs[b.anon].flags & PROFILE_LOC_SYMBOLIZED);
    /* unresolved locations print as "0x… object" */
    char buf[128];
    const char *lab = profile_frame_label(p, b.anon, 0, buf, sizeof(buf), true);
    assert_string_equal(lab, "0x00007f0000000100");
    const struct sym_object_status *os = status_for(&st, jefixture);
    assert_int_equal(os->status, 0);
    assert_int_equal(os->resolved, 2);
    assert_non_null(strstr(os->message, "ok"));

    /* Second profile of the same binary: all from the memory cache. */
    struct built b2 = build_profile(jefixture, jefixture, NULL);
    assert_int_equal(sym_profile(s, b2.p, &st, &err), 0);
    assert_int_equal(st.cache_hits, 2);
    assert_string_equal(frame(b2.p, b2.leaf, b2.p->locs[b2.leaf].nframes - 1)->function,
                        "tracked_alloc");
    profile_free(b.p);
    profile_free(b2.p);
    sym_free(s);
    hp_buf_release(&err);
}

static void test_sym_profile_deleted_file_said_so(void **state)
{
    /* "(deleted)" on the node: the file here may be a newer build. It is
     * used when its segments fit, and the status says it is unverified. */
    struct built b = build_profile(jefixture, jefixture, NULL);
    for (size_t i = 0; i < b.p->nmappings; i++)
        if (strcmp(b.p->mappings[i].path, jefixture) == 0)
            b.p->mappings[i].flags |= PROFILE_MAP_DELETED;
    struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
    struct sym_stats st;
    assert_int_equal(sym_profile(s, b.p, &st, NULL), 0);
    const struct sym_object_status *os = status_for(&st, jefixture);
    assert_int_equal(os->status, 0);
    assert_non_null(strstr(os->message, "replaced"));
    assert_int_equal(st.resolved, 2);
    profile_free(b.p);
    sym_free(s);
}

static void test_sym_profile_mismatched_binary_reported(void **state)
{
    /* The dump says /nonexistent/jefixture; --binary points at symtool. */
    struct built b = build_profile(jefixture, "/nonexistent/jefixture", NULL);
    struct symbolizer *s =
        sym_new(&(struct sym_options){ .binary = symtool, .debuginfod_urls = "" });
    struct sym_stats st;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(sym_profile(s, b.p, &st, &err), 0);
    const struct sym_object_status *os = status_for(&st, "/nonexistent/jefixture");
    assert_int_equal(os->status, HP_EMISMATCH);
    assert_non_null(strstr(os->message, "--binary"));
    assert_int_equal(st.resolved, 0);
    assert_int_equal(st.no_binary, 2);
    assert_int_equal(b.p->locs[b.leaf].nframes, 0);
    assert_true(b.p->locs[b.leaf].flags & PROFILE_LOC_SYMBOLIZED);
    assert_non_null(strstr(err.data, "/nonexistent/jefixture"));
    profile_free(b.p);
    sym_free(s);

    /* A build-id the dump records must match the file's. */
    const char *want = "00112233445566778899aabbccddeeff00112233";
    b = build_profile(jefixture, jefixture, want);
    s = sym_new(&(struct sym_options){ .binary = jefixture, .debuginfod_urls = "" });
    hp_buf_reset(&err);
    assert_int_equal(sym_profile(s, b.p, &st, &err), 0);
    os = status_for(&st, jefixture);
    assert_int_equal(os->status, HP_EMISMATCH);
    assert_non_null(strstr(os->message, "build-id mismatch"));
    assert_non_null(strstr(os->message, want));
    assert_int_equal(st.resolved, 0);
    profile_free(b.p);
    sym_free(s);
    hp_buf_release(&err);
}

static void test_sym_profile_missing_binary_reported(void **state)
{
    struct built b = build_profile(jefixture, "/nonexistent/doris_be", NULL);
    struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
    struct sym_stats st;
    assert_int_equal(sym_profile(s, b.p, &st, NULL), 0);
    const struct sym_object_status *os = status_for(&st, "/nonexistent/doris_be");
    assert_int_equal(os->status, HP_ENOTFOUND);
    assert_non_null(strstr(os->message, "no file found"));
    assert_int_equal(st.no_binary, 2);
    char buf[128];
    assert_string_equal(profile_frame_label(b.p, b.leaf, 0, buf, sizeof(buf), true) + 19,
                        "doris_be");
    profile_free(b.p);
    sym_free(s);
}

static void test_sym_profile_truncated_elf_is_clean_error(void **state)
{
    struct stat fst;
    assert_int_equal(stat(jefixture, &fst), 0);
    size_t size = (size_t)fst.st_size;
    size_t cuts[] = { 0, 10, 64, 3000, size / 2, size - 100, size - 1 };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cuts); i++) {
        char *path = tmp_path("truncated");
        copy_file(jefixture, path, cuts[i] ? cuts[i] : 1);
        if (cuts[i] == 0)
            truncate(path, 0);
        struct built b = build_profile(jefixture, path, NULL);
        struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
        struct sym_stats st;
        struct hp_buf err = HP_BUF_INIT(0);
        assert_int_equal(sym_profile(s, b.p, &st, &err), 0);
        const struct sym_object_status *os = status_for(&st, path);
        assert_int_not_equal(os->status, 0);
        assert_non_null(strstr(os->message, "unusable"));
        assert_int_equal(st.resolved, 0);
        hp_buf_release(&err);
        profile_free(b.p);
        sym_free(s);
        free(path);
    }
}

static void test_sym_profile_corrupt_dwarf_never_crashes(void **state)
{
    /* Overwrite the middle of the file (code and most debug sections) with
     * pseudo-random bytes, keeping the headers at both ends intact. */
    char *path = tmp_path("corrupt");
    for (unsigned seed = 1; seed <= 6; seed++) {
        copy_file(jefixture, path, 0);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        size_t from = (size_t)st.st_size * seed / 10, to = (size_t)st.st_size * 9 / 10;
        uint64_t x = seed * 0x9e3779b97f4a7c15ull;
        for (size_t off = from; off < to; off += 64) {
            x = hp_hash_u64(x);
            assert_int_equal(pwrite(fd, &x, sizeof(x), (off_t)off), (ssize_t)sizeof(x));
        }
        close(fd);
        struct built b = build_profile(jefixture, path, NULL);
        struct symbolizer *s = sym_new(&(struct sym_options){ .debuginfod_urls = "" });
        struct sym_stats sst;
        assert_int_equal(sym_profile(s, b.p, &sst, NULL), 0);
        for (size_t i = 0; i < b.p->nlocs; i++)
            assert_true(b.p->locs[i].flags & PROFILE_LOC_SYMBOLIZED);
        profile_free(b.p);
        sym_free(s);
    }
    free(path);
}

/* A persistent store stand-in: what the store module will do with SQLite. */
struct mini_store {
    struct {
        char build_id[81];
        uint64_t vaddr;
        struct profile_frame frames[SYM_MAX_INLINE_DEPTH];
        uint32_t n;
    } rows[64];
    size_t nrows, loads, saves, flushes;
    struct hp_arena arena;
};

static int store_load_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame **ret_frames, uint32_t *ret_n)
{
    struct mini_store *ms = ctx;
    ms->loads++;
    for (size_t i = 0; i < ms->nrows; i++) {
        if (ms->rows[i].vaddr == vaddr && strcmp(ms->rows[i].build_id, build_id) == 0) {
            *ret_frames = ms->rows[i].frames;
            *ret_n = ms->rows[i].n;
            return 1;
        }
    }
    return 0;
}

static int store_save_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame *frames, uint32_t n)
{
    struct mini_store *ms = ctx;
    ms->saves++;
    assert_true(ms->nrows < HP_ARRAY_SIZE(ms->rows));
    snprintf(ms->rows[ms->nrows].build_id, sizeof(ms->rows[0].build_id), "%s", build_id);
    ms->rows[ms->nrows].vaddr = vaddr;
    ms->rows[ms->nrows].n = n;
    for (uint32_t i = 0; i < n; i++) {
        struct profile_frame *f = &ms->rows[ms->nrows].frames[i];
        f->function = frames[i].function ? hp_arena_strdup(&ms->arena, frames[i].function) : NULL;
        f->file = frames[i].file ? hp_arena_strdup(&ms->arena, frames[i].file) : NULL;
        f->line = frames[i].line;
    }
    ms->nrows++;
    return 0;
}

static void store_flush_cb(void *ctx)
{
    ((struct mini_store *)ctx)->flushes++;
}

static void test_sym_cache_ops_persist_and_reload(void **state)
{
    struct mini_store ms = { 0 };
    hp_arena_init(&ms.arena);
    /* A store whose strings last only until its next call: stable_strings false. */
    struct sym_cache_ops ops = { &ms, store_load_cb, store_save_cb, store_flush_cb, false };
    struct sym_options so = { .debuginfod_urls = "", .cache_ops = &ops };
    struct built b = build_profile(jefixture, jefixture, NULL);
    struct symbolizer *s = sym_new(&so);
    struct sym_stats st;
    assert_int_equal(sym_profile(s, b.p, &st, NULL), 0);
    assert_int_equal(ms.saves, 2);
    assert_int_equal(ms.flushes, 1);
    assert_int_equal(st.cache_hits, 0);
    sym_free(s);

    /* A new process (new symbolizer): answers come from the store. */
    struct built b2 = build_profile(jefixture, jefixture, NULL);
    s = sym_new(&so);
    assert_int_equal(sym_profile(s, b2.p, &st, NULL), 0);
    assert_int_equal(st.cache_hits, 2);
    assert_int_equal(ms.saves, 2);
    for (uint32_t loc = 0; loc < 2; loc++) {
        assert_int_equal(b.p->locs[loc].nframes, b2.p->locs[loc].nframes);
        for (uint32_t k = 0; k < b.p->locs[loc].nframes; k++) {
            assert_string_equal(frame(b.p, loc, k)->function, frame(b2.p, loc, k)->function);
            assert_int_equal(frame(b.p, loc, k)->line, frame(b2.p, loc, k)->line);
        }
    }
    sym_free(s);
    profile_free(b.p);
    profile_free(b2.p);
    hp_arena_release(&ms.arena);
}

static void test_sym_no_inline_keeps_outermost(void **state)
{
    /* jefixture's worker_main inlines nothing we rely on; use the batch API
     * on every address of tracked_alloc and check no_inline gives one frame
     * named like the physical function. */
    uint64_t start = symbol_vaddr(jefixture, "tracked_alloc");
    uint64_t va[32];
    for (int i = 0; i < 32; i++)
        va[i] = start + (uint64_t)i;
    struct symbolizer *s =
        sym_new(&(struct sym_options){ .debuginfod_urls = "", .no_inline = true });
    struct sym_batch b;
    assert_int_equal(sym_batch_resolve(s, jefixture, va, 32, &b, NULL), 0);
    for (int i = 0; i < 32; i++) {
        assert_int_equal(b.results[i].n, 1);
        assert_string_equal(b.frames[b.results[i].first].function, "tracked_alloc");
    }
    sym_batch_release(&b);
    sym_free(s);
}

/* ---- the on-disk cache (symcache.c) ---------------------------------------- */

/* A profile of jefixture with one stack per address: `n` addresses from
 * symbol `sym` on, every `stride` bytes. */
static struct profile *profile_of_range(const char *sym, uint32_t n, uint32_t stride)
{
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    add_mappings(p, jefixture, jefixture, NULL);
    uint64_t start = BASE + symbol_vaddr(jefixture, sym);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t loc = profile_location_for_address(p, start + (uint64_t)i * stride);
        uint32_t st = profile_stack_add(p, &loc, 1);
        int64_t raw[PV_COUNT] = { 1, 64, 0, 0 };
        profile_sample_add(p, st, 0, raw);
    }
    profile_finish(p);
    return p;
}

/* Symbolize p with a file cache in `dir` (NULL: no cache); the cache's
 * figures into *ret_fs. */
static void sym_with_cache(struct profile *p, const char *dir, uint64_t max,
                           struct sym_stats *ret_st, struct sym_file_cache_stats *ret_fs)
{
    struct sym_file_cache *fc = dir ? sym_file_cache_new(dir, max) : NULL;
    struct sym_options so = { .debuginfod_urls = "",
                              .no_system_debug = true,
                              .cache_ops = fc ? sym_file_cache_ops(fc) : NULL };
    struct symbolizer *s = sym_new(&so);
    assert_int_equal(sym_profile(s, p, ret_st, NULL), 0);
    sym_free(s);
    if (fc && ret_fs)
        sym_file_cache_stats(fc, ret_fs);
    sym_file_cache_free(fc);
}

/* Every location's frames, in one comparable string. */
static char *frames_text(const struct profile *p)
{
    struct hp_buf b = HP_BUF_INIT(0);
    for (uint32_t l = 0; l < p->nlocs; l++) {
        (void)hp_buf_printf(&b, "%u:", l);
        for (uint32_t k = 0; k < p->locs[l].nframes; k++) {
            const struct profile_frame *f = frame(p, l, k);
            (void)hp_buf_printf(&b, " %s@%s:%u", f->function ? f->function : "-",
                                f->file ? f->file : "-", f->line);
        }
        (void)hp_buf_puts(&b, "\n");
    }
    return hp_buf_detach(&b, NULL);
}

static char *cache_file_of(const char *dir, const char *image)
{
    struct sym_elf *e = NULL;
    assert_int_equal(sym_elf_open(image, &e, NULL), 0);
    char *f = hp_xasprintf("%s/%s.hfsym", dir, e->id.build_id);
    sym_elf_free(e);
    return f;
}

/* 0 when `path` is a cache file the reader accepts; its entry count. */
static int cache_file_check(const char *path, const char *build_id, size_t *ret_n)
{
    char *data = NULL;
    size_t len = 0;
    struct sym_cache_image im;
    int r = hp_file_read(path, (size_t)1 << 30, &data, &len, NULL);
    if (r == 0)
        r = sym_cache_image_parse(data, len, build_id, &im, NULL);
    if (r == 0 && ret_n)
        *ret_n = im.nentries;
    free(data);
    return r;
}

static void test_sym_file_cache_warm_equals_cold(void **state)
{
    char *dir = tmp_path("cache-warm");
    struct sym_stats st;
    struct sym_file_cache_stats fs;
    struct profile *nocache = profile_of_range("tracked_alloc", 48, 3);
    sym_with_cache(nocache, NULL, 0, &st, NULL);
    struct profile *cold = profile_of_range("tracked_alloc", 48, 3);
    sym_with_cache(cold, dir, 0, &st, &fs);
    assert_int_equal(st.cache_hits, 0);
    assert_int_equal(fs.files_written, 1);
    assert_int_equal(fs.hits, 0);
    char *path = cache_file_of(dir, jefixture);
    size_t n = 0;
    assert_int_equal(cache_file_check(path, NULL, &n), 0);
    assert_int_equal(n, 48);
    /* A new process: every answer from the file, nothing written. */
    struct profile *warm = profile_of_range("tracked_alloc", 48, 3);
    sym_with_cache(warm, dir, 0, &st, &fs);
    assert_int_equal(st.cache_hits, 48);
    assert_int_equal(fs.files_loaded, 1);
    assert_int_equal(fs.files_written, 0);
    char *a = frames_text(nocache), *b = frames_text(cold), *c = frames_text(warm);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    /* More addresses of the same build: the file grows, old entries stay. */
    struct profile *more = profile_of_range("main", 16, 1);
    sym_with_cache(more, dir, 0, &st, &fs);
    assert_int_equal(fs.files_written, 1);
    assert_int_equal(cache_file_check(path, NULL, &n), 0);
    assert_int_equal(n, 48 + 16);
    free(a);
    free(b);
    free(c);
    free(path);
    free(dir);
    profile_free(nocache);
    profile_free(cold);
    profile_free(warm);
    profile_free(more);
}

static void test_sym_file_cache_damaged_file_ignored_and_replaced(void **state)
{
    char *dir = tmp_path("cache-damaged");
    struct sym_stats st;
    struct sym_file_cache_stats fs;
    struct profile *ref = profile_of_range("tracked_alloc", 32, 2);
    sym_with_cache(ref, dir, 0, &st, &fs);
    char *want = frames_text(ref);
    char *path = cache_file_of(dir, jefixture);
    char *good;
    size_t len;
    assert_int_equal(hp_file_read(path, 1 << 20, &good, &len, NULL), 0);
    /* Truncations at every kind of place, a flipped byte in the body and in
     * the header, trailing junk, an empty file and another file's bytes. */
    size_t cuts[] = { 0, 7, 47, 48, 60, len / 2, len - 1 };
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]) + 4; k++) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (k < sizeof(cuts) / sizeof(cuts[0])) {
            assert_int_equal(fwrite(good, 1, cuts[k], f), cuts[k]);
        } else if (k == sizeof(cuts) / sizeof(cuts[0])) {
            good[len - 3] ^= 0x40; /* in the string table */
            assert_int_equal(fwrite(good, 1, len, f), len);
            good[len - 3] ^= 0x40;
        } else if (k == sizeof(cuts) / sizeof(cuts[0]) + 1) {
            good[20] ^= 0x01; /* entry count */
            assert_int_equal(fwrite(good, 1, len, f), len);
            good[20] ^= 0x01;
        } else if (k == sizeof(cuts) / sizeof(cuts[0]) + 2) {
            assert_int_equal(fwrite(good, 1, len, f), len);
            assert_int_equal(fwrite("junk", 1, 4, f), 4);
        } else {
            char junk[4096];
            for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (char)(i * 131 + 7);
            memcpy(junk, good, 48); /* a valid-looking header */
            assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
        }
        fclose(f);
        struct profile *p = profile_of_range("tracked_alloc", 32, 2);
        sym_with_cache(p, dir, 0, &st, &fs);
        char *got = frames_text(p);
        assert_string_equal(got, want);
        assert_int_equal(st.cache_hits, 0);
        if (k != 0 || cuts[0] != 0)
            assert_int_equal(fs.rejected, 1);
        assert_int_equal(fs.files_written, 1);
        /* Replaced by a good file. */
        size_t n = 0;
        assert_int_equal(cache_file_check(path, NULL, &n), 0);
        assert_int_equal(n, 32);
        free(got);
        profile_free(p);
    }
    free(good);
    free(want);
    free(path);
    free(dir);
    profile_free(ref);
}

static void test_sym_file_cache_two_writers(void **state)
{
    /* Two processes symbolize different addresses of one build, over and
     * over, each starting from whatever the other left (write temp +
     * rename), while this process reads the file: every read must see a
     * whole file, and once both have run a last time it holds both sets. */
    char *dir = tmp_path("cache-writers");
    char *path = cache_file_of(dir, jefixture);
    const char *syms[2] = { "tracked_alloc", "main" };
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        assert_true(pid[w] >= 0);
        if (pid[w] == 0) {
            for (int i = 0; i < 25; i++) {
                /* A different slice each round, so every round writes. */
                struct profile *p = profile_of_range(syms[w], 4, (uint32_t)(1 + i % 5));
                struct sym_stats st;
                sym_with_cache(p, dir, 0, &st, NULL);
                profile_free(p);
            }
            _exit(0);
        }
    }
    size_t reads = 0;
    for (;;) {
        int status, done = 0;
        for (int w = 0; w < 2; w++)
            if (pid[w] && waitpid(pid[w], &status, WNOHANG) == pid[w]) {
                assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                pid[w] = 0;
            }
        for (int w = 0; w < 2; w++)
            done += pid[w] == 0;
        struct stat sb;
        if (stat(path, &sb) == 0) {
            assert_int_equal(cache_file_check(path, NULL, NULL), 0);
            reads++;
        }
        if (done == 2)
            break;
    }
    assert_true(reads > 0);
    struct sym_stats st;
    struct profile *a = profile_of_range(syms[0], 4, 1), *b = profile_of_range(syms[1], 4, 1);
    sym_with_cache(a, dir, 0, &st, NULL);
    sym_with_cache(b, dir, 0, &st, NULL);
    struct profile *both[2] = { profile_of_range(syms[0], 4, 1), profile_of_range(syms[1], 4, 1) };
    for (int w = 0; w < 2; w++) {
        sym_with_cache(both[w], dir, 0, &st, NULL);
        assert_int_equal(st.cache_hits, 4);
        profile_free(both[w]);
    }
    /* No temporary file is left behind. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    profile_free(a);
    profile_free(b);
    free(path);
    free(dir);
}

static void test_sym_file_cache_bounded_evicts_oldest(void **state)
{
    char *dir = tmp_path("cache-bounded");
    assert_int_equal(hp_mkdir_p(dir), 0);
    char *old[3];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < 3; i++) {
        old[i] = hp_xasprintf("%s/%040x.hfsym", dir, i + 1);
        FILE *f = fopen(old[i], "wb");
        assert_non_null(f);
        char z[1000] = { 0 };
        assert_int_equal(fwrite(z, 1, sizeof(z), f), sizeof(z));
        fclose(f);
        struct timespec t[2] = { { now.tv_sec - 300 + 100 * i, 0 },
                                 { now.tv_sec - 300 + 100 * i, 0 } };
        assert_int_equal(utimensat(AT_FDCWD, old[i], t, 0), 0);
    }
    /* The size of this build's file, measured in another folder. */
    char *probe = tmp_path("cache-probe");
    struct sym_stats st;
    struct profile *p = profile_of_range("tracked_alloc", 32, 2);
    sym_with_cache(p, probe, 0, &st, NULL);
    char *pf = cache_file_of(probe, jefixture);
    struct stat sb;
    assert_int_equal(stat(pf, &sb), 0);
    profile_free(p);
    /* Room for this build's file and one and a half old ones. */
    struct sym_file_cache_stats fs;
    p = profile_of_range("tracked_alloc", 32, 2);
    sym_with_cache(p, dir, (uint64_t)sb.st_size + 1500, &st, &fs);
    assert_int_equal(fs.evicted, 2);
    assert_int_equal(access(old[0], F_OK), -1);
    assert_int_equal(access(old[1], F_OK), -1);
    assert_int_equal(access(old[2], F_OK), 0);
    char *mine = cache_file_of(dir, jefixture);
    assert_int_equal(cache_file_check(mine, NULL, NULL), 0);
    /* A bound smaller than one file: nothing is written, nothing breaks. */
    char *tiny = tmp_path("cache-tiny");
    struct profile *q = profile_of_range("tracked_alloc", 32, 2);
    sym_with_cache(q, tiny, 100, &st, &fs);
    assert_int_equal(fs.files_written, 0);
    char *want = frames_text(p), *got = frames_text(q);
    assert_string_equal(want, got);
    free(want);
    free(got);
    for (int i = 0; i < 3; i++)
        free(old[i]);
    free(probe);
    free(pf);
    free(mine);
    free(tiny);
    free(dir);
    profile_free(p);
    profile_free(q);
}

static void test_sym_file_cache_needs_debug_info(void **state)
{
    /* A stripped copy of jefixture names functions from .dynsym at best:
     * such answers must not be stored for a later run that has the DWARF. */
    char *stripped = tmp_path("jefixture-stripped");
    char *cmd = hp_xasprintf("strip -o '%s' '%s'", stripped, jefixture);
    assert_int_equal(system(cmd), 0);
    char *dir = tmp_path("cache-stripped");
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    add_mappings(p, stripped, stripped, NULL);
    uint32_t loc = profile_location_for_address(p, BASE + symbol_vaddr(jefixture, "main") + 4);
    uint32_t stk = profile_stack_add(p, &loc, 1);
    int64_t raw[PV_COUNT] = { 1, 64, 0, 0 };
    profile_sample_add(p, stk, 0, raw);
    profile_finish(p);
    struct sym_stats st;
    struct sym_file_cache_stats fs;
    sym_with_cache(p, dir, 0, &st, &fs);
    assert_int_equal(fs.files_written, 0);
    profile_free(p);
    free(cmd);
    free(dir);
    free(stripped);
}

static int setup(void **state)
{
    jefixture = getenv("JEFIXTURE");
    symtool = getenv("SYMTOOL");
    if (!jefixture || !symtool) {
        fprintf(stderr, "JEFIXTURE and SYMTOOL must be set\n");
        return -1;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/hf-test-sym-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char *cmd = hp_xasprintf("rm -rf '%s'", tmpdir);
    int rc = system(cmd);
    free(cmd);
    return rc == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sym_function_short_jeprof_rules),
        cmocka_unit_test(test_sym_demangle_cpp_and_rust),
        cmocka_unit_test(test_sym_allocator_names),
        cmocka_unit_test(test_sym_batch_resolves_function_file_line),
        cmocka_unit_test(test_sym_dwarf_is_lazy),
        cmocka_unit_test(test_sym_profile_symbolizes_and_counts),
        cmocka_unit_test(test_sym_profile_deleted_file_said_so),
        cmocka_unit_test(test_sym_profile_mismatched_binary_reported),
        cmocka_unit_test(test_sym_profile_missing_binary_reported),
        cmocka_unit_test(test_sym_profile_truncated_elf_is_clean_error),
        cmocka_unit_test(test_sym_profile_corrupt_dwarf_never_crashes),
        cmocka_unit_test(test_sym_cache_ops_persist_and_reload),
        cmocka_unit_test(test_sym_no_inline_keeps_outermost),
        cmocka_unit_test(test_sym_file_cache_warm_equals_cold),
        cmocka_unit_test(test_sym_file_cache_damaged_file_ignored_and_replaced),
        cmocka_unit_test(test_sym_file_cache_two_writers),
        cmocka_unit_test(test_sym_file_cache_bounded_evicts_oldest),
        cmocka_unit_test(test_sym_file_cache_needs_debug_info),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
