/* symtool: a small driver over the symbolizer for the comparison tests and
 * the benchmark (tests/sym/compare.py, tests/bench/sym-bench.sh).
 *
 *   symtool heap [options] DUMP     parse, symbolize, print collapsed stacks
 *                                   (query_fold + query_render_collapsed)
 *       --binary F --symbols D --no-inline --debuginfod URLS --cache-dir D
 *       --no-system-debug --no-local-paths --threads N
 *       --addresses     print "object<TAB>vaddr<TAB>frame|frame..." per
 *                       address location instead (innermost first)
 *       --stats         per-object status and counts on stderr
 *       --repeat N      symbolize N fresh parses with one symbolizer (warm)
 *       --jeprof-compat innermost frame only where jeprof does not inline
 *   symtool addr [--no-inline] [--threads N] [-a] OBJ VADDR...   addr2line -f -i -C style
 *       output for ELF virtual addresses (hex); "-" reads them from stdin.
 *   symtool dwarf-agree OBJ VADDR...|-   the narrow DWARF readers against
 *       libdwarf alone on these addresses (tests/sym/narrow_agree.py)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ingest/ingest.h"
#include "collector/sym/sym-internal.h"
#include "collector/sym/sym.h"
#include "query/query.h"

static int usage(void)
{
    fprintf(stderr, "usage: symtool heap [--binary F] [--symbols D] [--no-inline] "
                    "[--debuginfod URLS] [--server URL [--server-token T] [--server-header-file F]] "
                    "[--cache-dir D] [--addresses] [--stats] DUMP\n"
                    "       symtool addr [--no-inline] [--threads N] [-a] OBJ VADDR...\n"
                    "       symtool dwarf-agree OBJ VADDR...\n"
                    "       symtool fetch --server URL [--server-token T] --cache-dir D "
                    "[--cache-max BYTES] [--threads N] ID KIND [ID KIND...]\n");
    return 2;
}

static void print_stats(const struct sym_stats *st, double ms)
{
    fprintf(stderr,
            "symtool: locations=%zu resolved=%zu unresolved=%zu no_binary=%zu anonymous=%zu "
            "cache_hits=%zu allocator=%zu time_ms=%.1f\n",
            st->locations, st->resolved, st->unresolved, st->no_binary, st->anonymous,
            st->cache_hits, st->allocator, ms);
    for (size_t i = 0; i < st->nobjects; i++) {
        const struct sym_object_status *o = &st->objects[i];
        fprintf(stderr, "symtool: object %s: %s [used=%s debug=%s build-id=%s %u/%u]\n",
                o->path, o->message, o->used ? o->used : "-", o->debug ? o->debug : "-",
                o->build_id[0] ? o->build_id : "-", o->resolved, o->addresses);
    }
}

static void print_addresses(const struct profile *p)
{
    /* vaddr through the same PT_LOAD arithmetic the symbolizer uses. */
    for (size_t i = 0; i < p->nlocs; i++) {
        const struct profile_location *l = &p->locs[i];
        if (!l->mapping || !l->nframes)
            continue;
        const struct profile_mapping *m = &p->mappings[l->mapping - 1];
        struct sym_elf *e = NULL;
        if (sym_elf_open(m->path, &e, NULL) < 0)
            continue;
        uint64_t v;
        if (sym_elf_offset_to_vaddr(e, l->address - m->start + m->offset, &v)) {
            printf("%s\t%llx\t", m->path, (unsigned long long)v);
            for (uint32_t k = 0; k < l->nframes; k++) {
                const struct profile_frame *f = &p->frames[l->frame_off + k];
                printf("%s%s@%s:%u", k ? "|" : "", f->function ? f->function : "??",
                       f->file ? f->file : "??", f->line);
            }
            printf("\n");
        }
        sym_elf_free(e);
    }
}

/* --jeprof-compat: reproduce jeprof's own quirks so that a like-for-like
 * comparison shows nothing but real differences. jeprof names addresses
 * with addr2line and nm (MapToSymbols, MapSymbolsWithNM):
 *  a) it runs `addr2line -i` only for objects where nm finds a `_fini`
 *     symbol, so stripped system libraries get the innermost frame only;
 *  b) when nm's symbol for the address starts with a frame's name, the
 *     frame takes nm's name, inlined frames included ("grow" inlined into
 *     "grow_buffers" shows as "grow_buffers");
 *  c) where addr2line knows nothing, nm's nearest symbol at or before the
 *     address names it, or the first symbol when none precedes it (the
 *     symbolizer leaves such addresses unnamed);
 *  d) allocator frames are trimmed by name only (RemoveUninterestingFrames),
 *     so a stripped jemalloc's internal frames can survive;
 *  e) inlined frames are names of their own, "f (inline)" (TranslateStack),
 *     so a function both inlined and not in one stack counts twice.
 * This is test-only emulation; the symbolizer itself does none of it. */
static const char *nm_name(const struct sym_elf *e, uint64_t v)
{
    if (!e->nsyms)
        return NULL;
    size_t lo = 0, hi = e->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->syms[mid].addr <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return e->syms[lo ? lo - 1 : 0].name;
}

static void jeprof_compat(struct profile *p)
{
    struct sym_elf **elfs = hp_xcalloc(p->nmappings + 1, sizeof(*elfs));
    int8_t *state = hp_xcalloc(p->nmappings + 1, 1); /* 0 unknown, -1 none, 1 fini, 2 no fini */
    char a[1024], b[1024];
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        l->flags &= ~(uint32_t)PROFILE_LOC_ALLOCATOR;
        if (!l->mapping)
            continue;
        uint32_t mi = l->mapping - 1;
        const struct profile_mapping *m = &p->mappings[mi];
        if (state[mi] == 0) {
            state[mi] = -1;
            if (m->path[0] == '/' && sym_elf_open(m->path, &elfs[mi], NULL) == 0) {
                state[mi] = 2;
                for (size_t k = 0; k < elfs[mi]->nsyms; k++)
                    if (strcmp(elfs[mi]->syms[k].name, "_fini") == 0)
                        state[mi] = 1;
            }
        }
        if (state[mi] < 0)
            continue;
        struct sym_elf *e = elfs[mi];
        uint64_t v;
        if (!sym_elf_offset_to_vaddr(e, l->address - m->start + m->offset, &v))
            continue;
        if (state[mi] == 2 && l->nframes > 1)
            l->nframes = 1; /* (a) */
        const char *raw = nm_name(e, v);
        char *dm = raw ? sym_demangle(raw) : NULL;
        const char *nm = dm ? dm : raw;
        if (nm && l->nframes == 0) {
            struct profile_frame f = { nm, NULL, 0 }; /* (c) */
            profile_location_set_frames(p, (uint32_t)i, &f, 1);
        } else if (nm) {
            for (uint32_t k = 0; k < l->nframes; k++) { /* (b) */
                struct profile_frame *f = &p->frames[l->frame_off + k];
                if (!f->function)
                    continue;
                sym_function_short(f->function, b, sizeof(b));
                if (b[0] && strncmp(nm, b, strlen(b)) == 0)
                    f->function = profile_intern(p, nm, strlen(nm));
            }
        }
        free(dm);
    }
    for (size_t si = 0; si < p->nstacks; si++) { /* (d) */
        const uint32_t *locs = profile_stack_locs(p, (uint32_t)si);
        int64_t cut = -1;
        for (uint32_t i = 0; i < p->stacks[si].n; i++) {
            const struct profile_location *l = &p->locs[locs[i]];
            if (l->nframes &&
                sym_is_allocator_function(sym_function_short(
                    p->frames[l->frame_off + l->nframes - 1].function
                        ? p->frames[l->frame_off + l->nframes - 1].function
                        : "",
                    a, sizeof(a))))
                cut = i;
        }
        for (int64_t i = 0; i <= cut; i++)
            p->locs[locs[i]].flags |= PROFILE_LOC_ALLOCATOR;
    }
    for (size_t i = 0; i < p->nlocs; i++) { /* (e) */
        const struct profile_location *l = &p->locs[i];
        for (uint32_t k = 0; k + 1 < l->nframes; k++) {
            struct profile_frame *f = &p->frames[l->frame_off + k];
            if (!f->function)
                continue;
            char *t = hp_xasprintf("%s (inline)", f->function);
            f->function = profile_intern(p, t, strlen(t));
            free(t);
        }
    }
    for (size_t i = 0; i <= p->nmappings; i++)
        sym_elf_free(elfs[i]);
    free(elfs);
    free(state);
}

static int cmd_heap(int argc, char **argv)
{
    struct sym_options so = { 0 };
    struct sym_server servers[4];
    size_t nservers = 0;
    bool addresses = false, stats = false, compat = false;
    int repeat = 1;
    const char *dump = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--binary") == 0 && i + 1 < argc)
            so.binary = argv[++i];
        else if (strcmp(a, "--symbols") == 0 && i + 1 < argc)
            so.symbols_dir = argv[++i];
        else if (strcmp(a, "--debuginfod") == 0 && i + 1 < argc)
            so.debuginfod_urls = argv[++i];
        else if (strcmp(a, "--server") == 0 && i + 1 < argc && nservers < 4)
            servers[nservers++] = (struct sym_server){ .url = argv[++i] };
        else if (strcmp(a, "--server-token") == 0 && i + 1 < argc && nservers)
            servers[nservers - 1].bearer = argv[++i];
        else if (strcmp(a, "--server-header-file") == 0 && i + 1 < argc && nservers)
            servers[nservers - 1].header_file = argv[++i];
        else if (strcmp(a, "--cache-dir") == 0 && i + 1 < argc)
            so.cache_dir = argv[++i];
        else if (strcmp(a, "--threads") == 0 && i + 1 < argc)
            so.threads = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(a, "--repeat") == 0 && i + 1 < argc)
            repeat = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(a, "--timeout-ms") == 0 && i + 1 < argc)
            so.debuginfod_timeout_ms = strtol(argv[++i], NULL, 10);
        else if (strcmp(a, "--no-inline") == 0)
            so.no_inline = true;
        else if (strcmp(a, "--no-system-debug") == 0)
            so.no_system_debug = true;
        else if (strcmp(a, "--no-local-paths") == 0)
            so.no_local_paths = true;
        else if (strcmp(a, "--addresses") == 0)
            addresses = true;
        else if (strcmp(a, "--stats") == 0)
            stats = true;
        else if (strcmp(a, "--jeprof-compat") == 0)
            compat = true;
        else if (a[0] == '-')
            return usage();
        else
            dump = a;
    }
    if (!dump)
        return usage();
    if (!so.debuginfod_urls)
        so.debuginfod_urls = "";
    so.servers = servers;
    so.nservers = nservers;
    struct symbolizer *s = sym_new(&so);
    int rc = 1;
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    for (int r = 0; r < (repeat > 0 ? repeat : 1); r++) {
        profile_free(p);
        p = NULL;
        if (ingest_parse_file(dump, NULL, &p, &err) < 0) {
            fprintf(stderr, "symtool: %s\n", err.data);
            goto out;
        }
        struct sym_stats st;
        hp_buf_reset(&err);
        uint64_t t0 = hp_now_ns();
        int e = sym_profile(s, p, &st, &err);
        double ms = (double)(hp_now_ns() - t0) / 1e6;
        if (e < 0) {
            fprintf(stderr, "symtool: %s: %s\n", hp_strerror(e), err.len ? err.data : "");
            goto out;
        }
        if (stats)
            print_stats(&st, ms);
    }
    if (compat)
        jeprof_compat(p);
    if (addresses) {
        print_addresses(p);
    } else {
        struct query_opts qo;
        query_opts_init(&qo);
        qo.no_inline = so.no_inline;
        struct query_folded *f = NULL;
        if (query_fold(p, &qo, &f, &err) < 0) {
            fprintf(stderr, "symtool: fold: %s\n", err.data);
            goto out;
        }
        struct hp_buf out = HP_BUF_INIT(0);
        query_render_collapsed(f, &qo, &out);
        fwrite(out.data, 1, out.len, stdout);
        hp_buf_release(&out);
        query_folded_free(f);
    }
    rc = 0;
out:
    hp_buf_release(&err);
    profile_free(p);
    sym_free(s);
    return rc;
}

/* The addresses of argv[i..] (hex, 0x optional), or of stdin when that is
 * "-": 0, or 2 (usage) after saying which one is bad. */
static int read_addrs(int argc, char **argv, int i, uint64_t **ret_va, size_t *ret_n)
{
    uint64_t *va = NULL;
    size_t n = 0, cap = 0;
    char line[128];
    bool from_stdin = i < argc && strcmp(argv[i], "-") == 0;
    for (;;) {
        const char *a;
        if (from_stdin) {
            if (!fgets(line, sizeof(line), stdin))
                break;
            line[strcspn(line, "\r\n")] = '\0';
            a = line;
        } else {
            if (i >= argc)
                break;
            a = argv[i++];
        }
        if (a[0] == '0' && (a[1] == 'x' || a[1] == 'X'))
            a += 2;
        uint64_t v;
        if (hp_parse_hex64(a, strlen(a), &v) < 0) {
            fprintf(stderr, "symtool: bad address %s\n", a);
            free(va);
            return 2;
        }
        va = hp_xgrow(va, &cap, n + 1, sizeof(*va));
        va[n++] = v;
    }
    *ret_va = va;
    *ret_n = n;
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* symtool dwarf-agree OBJ VADDR...|-: the narrow readers (dwraw.c) against
 * libdwarf alone, frame by frame, on the same addresses; the narrow side
 * loads its CUs on two threads. Fails on any difference, and when the
 * narrow readers read nothing (a test that could not fail). */
static int cmd_dwarf_agree(int argc, char **argv)
{
    if (argc < 1)
        return usage();
    uint64_t *va = NULL;
    size_t n = 0;
    if (read_addrs(argc, argv, 1, &va, &n) != 0)
        return 2;
    struct sym_dw *dn = NULL, *dl = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (sym_dw_open(argv[0], &dn, &err) < 0 || sym_dw_open(argv[0], &dl, &err) < 0) {
        fprintf(stderr, "symtool: %s\n", err.data ? err.data : argv[0]);
        hp_buf_release(&err);
        sym_dw_free(dn);
        free(va);
        return 1;
    }
    sym_dw_set_narrow(dn, true);
    sym_dw_set_narrow(dl, false);
    sym_dw_prepare(dn, va, n, 2);
    size_t diffs = 0, lines = 0, frames = 0;
    for (size_t k = 0; k < n; k++) {
        struct sym_dw_frame a[SYM_MAX_INLINE_DEPTH], b[SYM_MAX_INLINE_DEPTH];
        int na = sym_dw_lookup(dn, va[k], a, SYM_MAX_INLINE_DEPTH);
        int nb = sym_dw_lookup(dl, va[k], b, SYM_MAX_INLINE_DEPTH);
        bool same = na == nb;
        for (int f = 0; same && f < na; f++)
            same = same_str(a[f].name, b[f].name) && same_str(a[f].file, b[f].file) &&
                   a[f].line == b[f].line && a[f].linkage == b[f].linkage &&
                   same_str(a[f].qualified, b[f].qualified) && a[f].entry == b[f].entry;
        frames += (size_t)(na > 0 ? na : 0);
        lines += na > 0 && a[0].line != 0;
        if (!same && diffs++ < 20) {
            printf("0x%llx: narrow %d frames, libdwarf %d\n", (unsigned long long)va[k], na, nb);
            for (int f = 0; f < na || f < nb; f++)
                printf("  #%d %s:%u %s | %s:%u %s\n", f, f < na && a[f].file ? a[f].file : "-",
                       f < na ? a[f].line : 0, f < na && a[f].name ? a[f].name : "-",
                       f < nb && b[f].file ? b[f].file : "-", f < nb ? b[f].line : 0,
                       f < nb && b[f].name ? b[f].name : "-");
        }
    }
    size_t nl = 0, nt = 0, ll = 0, lt = 0;
    sym_dw_narrow_counts(dn, &nl, &nt);
    sym_dw_narrow_counts(dl, &ll, &lt);
    printf("%zu addresses, %zu with a line, %zu frames; narrow readers: %zu line tables, %zu "
           "inline trees; differences: %zu\n", n, lines, frames, nl, nt, diffs);
    int rc = 0;
    if (diffs || ll || lt) {
        rc = 1;
    } else if (nl == 0 || nt == 0) {
        printf("the narrow readers read nothing of %s\n", argv[0]);
        rc = 1;
    }
    sym_dw_free(dn);
    sym_dw_free(dl);
    free(va);
    return rc;
}

static int cmd_addr(int argc, char **argv)
{
    struct sym_options so = { .debuginfod_urls = "" };
    bool print_addr = false; /* -a: "0x<vaddr>" before each group, as addr2line -a */
    int i = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--no-inline") == 0)
            so.no_inline = true;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            so.threads = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-a") == 0)
            print_addr = true;
        else
            break;
    }
    if (i >= argc)
        return usage();
    const char *obj = argv[i++];
    uint64_t *va = NULL;
    size_t n = 0;
    if (read_addrs(argc, argv, i, &va, &n) != 0)
        return 2;
    struct symbolizer *s = sym_new(&so);
    struct sym_batch b;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = sym_batch_resolve(s, obj, va, n, &b, &err);
    if (r < 0) {
        fprintf(stderr, "symtool: %s\n", err.data ? err.data : hp_strerror(r));
        sym_free(s);
        free(va);
        return 1;
    }
    if (err.len)
        fprintf(stderr, "symtool: note: %s\n", err.data);
    for (size_t k = 0; k < n; k++) {
        const struct sym_batch_result *res = &b.results[k];
        if (print_addr)
            printf("0x%016llx\n", (unsigned long long)va[k]);
        if (res->n == 0) {
            printf("??\n??:0\n");
            continue;
        }
        for (uint32_t j = 0; j < res->n; j++) {
            const struct profile_frame *f = &b.frames[res->first + j];
            printf("%s\n%s:%u\n", f->function ? f->function : "??", f->file ? f->file : "??",
                   f->line);
        }
    }
    sym_batch_release(&b);
    sym_free(s);
    free(va);
    hp_buf_release(&err);
    return 0;
}

/* symtool fetch --server URL [--server-token T] --cache-dir D [--cache-max BYTES]
 *                [--threads N] BUILD_ID KIND [BUILD_ID KIND...]:
 * downloads through the symbolizer's fetcher, one pair after the other,
 * each by N threads at once (the cache tests: one download per build-id,
 * the size bound), printing each path (peak memory tests: one pair). */
struct fetch_job {
    const struct sym_dbgd_options *o;
    const char *bid, *kind;
    int r;
    char *path;
    struct hp_buf err;
};

static void *fetch_thread(void *arg)
{
    struct fetch_job *j = arg;
    j->r = sym_debuginfod_fetch(j->o, j->bid, j->kind, &j->path, &j->err);
    return NULL;
}

static int cmd_fetch(int argc, char **argv)
{
    struct sym_server sv = { 0 };
    const char *cache = NULL;
    const char *pairs[64];
    size_t npairs = 0;
    uint64_t cache_max = 0;
    long threads = 1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
            sv.url = argv[++i];
        else if (strcmp(argv[i], "--server-token") == 0 && i + 1 < argc)
            sv.bearer = argv[++i];
        else if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc)
            cache = argv[++i];
        else if (strcmp(argv[i], "--cache-max") == 0 && i + 1 < argc)
            cache_max = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = strtol(argv[++i], NULL, 10);
        else if (npairs < HP_ARRAY_SIZE(pairs))
            pairs[npairs++] = argv[i];
    }
    if (!sv.url || !cache || npairs == 0 || npairs % 2 || threads < 1 || threads > 16)
        return usage();
    struct sym_dbgd_options o = { .servers = &sv, .nservers = 1, .cache_dir = cache,
                                  .cache_max_bytes = cache_max };
    int rc = 0;
    for (size_t p = 0; p < npairs; p += 2) {
        struct fetch_job jobs[16];
        pthread_t tid[16];
        for (long t = 0; t < threads; t++) {
            jobs[t] = (struct fetch_job){ &o, pairs[p], pairs[p + 1], 0, NULL, HP_BUF_INIT(0) };
            if (pthread_create(&tid[t], NULL, fetch_thread, &jobs[t]) != 0)
                return 1;
        }
        for (long t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            struct fetch_job *j = &jobs[t];
            if (j->r < 0) {
                fprintf(stderr, "symtool: fetch: %s%s%s\n", hp_strerror(j->r),
                        j->err.len ? ": " : "", j->err.len ? j->err.data : "");
                rc = 1;
            } else if (t == 0) {
                printf("%s\n", j->path);
            }
            free(j->path);
            hp_buf_release(&j->err);
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "heap") == 0)
        return cmd_heap(argc - 2, argv + 2);
    if (strcmp(argv[1], "addr") == 0)
        return cmd_addr(argc - 2, argv + 2);
    if (strcmp(argv[1], "fetch") == 0)
        return cmd_fetch(argc - 2, argv + 2);
    if (strcmp(argv[1], "dwarf-agree") == 0)
        return cmd_dwarf_agree(argc - 2, argv + 2);
    return usage();
}
