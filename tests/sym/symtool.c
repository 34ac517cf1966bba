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
 *   symtool addr [--no-inline] OBJ VADDR...   addr2line -f -i -C style
 *       output for ELF virtual addresses (hex); "-" reads them from stdin.
 */
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
                    "[--debuginfod URLS] [--cache-dir D] [--addresses] [--stats] DUMP\n"
                    "       symtool addr [--no-inline] OBJ VADDR...\n");
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

/* jeprof runs `addr2line -i` only for objects where nm finds a `_fini`
 * symbol (it uses _fini as a separator between addresses), so for stripped
 * system libraries it shows the innermost frame only. Reproduce that for
 * like-for-like comparisons. */
static void jeprof_compat(struct profile *p)
{
    struct sym_elf **elfs = hp_xcalloc(p->nmappings + 1, sizeof(*elfs));
    int8_t *has_fini = hp_xcalloc(p->nmappings + 1, 1);
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (!l->mapping || l->nframes < 2)
            continue;
        uint32_t mi = l->mapping - 1;
        if (has_fini[mi] == 0) {
            has_fini[mi] = -1;
            if (sym_elf_open(p->mappings[mi].path, &elfs[mi], NULL) == 0) {
                for (size_t k = 0; k < elfs[mi]->nsyms; k++)
                    if (strcmp(elfs[mi]->syms[k].name, "_fini") == 0)
                        has_fini[mi] = 1;
                sym_elf_free(elfs[mi]);
            }
        }
        if (has_fini[mi] < 0)
            l->nframes = 1;
    }
    free(elfs);
    free(has_fini);
}

static int cmd_heap(int argc, char **argv)
{
    struct sym_options so = { 0 };
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

static int cmd_addr(int argc, char **argv)
{
    struct sym_options so = { .debuginfod_urls = "" };
    int i = 0;
    if (i < argc && strcmp(argv[i], "--no-inline") == 0) {
        so.no_inline = true;
        i++;
    }
    if (i >= argc)
        return usage();
    const char *obj = argv[i++];
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
    for (size_t k = 0; k < n; k++) {
        const struct sym_batch_result *res = &b.results[k];
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

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "heap") == 0)
        return cmd_heap(argc - 2, argv + 2);
    if (strcmp(argv[1], "addr") == 0)
        return cmd_addr(argc - 2, argv + 2);
    return usage();
}
