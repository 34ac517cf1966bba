/* ELF objects for the symbolizer (libelf): the PT_LOAD headers that turn a
 * file offset from a maps line into an ELF virtual address, and the function
 * symbols of .symtab and .dynsym, sorted by address.
 *
 * Everything needed is copied out (strings into the object's arena) and the
 * file is closed again, so an open object costs its symbol table and nothing
 * else. sym_elf_open_lazy leaves the symbol table until it is first asked
 * for (then from the same file, checked by inode, size and mtime): a run
 * answered from the symbol cache never needs it, and reading and sorting
 * it was a tenth of a warm `query top`. Counts read from the file are bounded by libelf against the file size
 * and by SYM_MAX_SYMBOLS. */
#include "collector/sym/sym-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int sym_cmp(const void *a, const void *b)
{
    const struct sym_symbol *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return 0;
}

static int leading_underscores(const char *s)
{
    int n = 0;
    while (s[n] == '_')
        n++;
    return n;
}

/* Of two symbols at one address, which name to show: the sized one, then
 * fewer leading underscores (malloc over __libc_malloc, so allocator entry
 * points keep the names jeprof looks for), then the shorter. */
static bool sym_better(const struct sym_symbol *a, const struct sym_symbol *b)
{
    if ((a->size != 0) != (b->size != 0))
        return a->size != 0;
    int ua = leading_underscores(a->name), ub = leading_underscores(b->name);
    if (ua != ub)
        return ua < ub;
    return strlen(a->name) < strlen(b->name);
}

static bool section_is_code(Elf *e, size_t shndx)
{
    Elf_Scn *scn = elf_getscn(e, shndx);
    GElf_Shdr sh;
    return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

static void read_symbols(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct sym_elf *o,
                         size_t *cap)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || sh->sh_entsize == 0)
        return;
    size_t n = sh->sh_size / sh->sh_entsize;
    if (n > SYM_MAX_SYMBOLS)
        n = SYM_MAX_SYMBOLS;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        if (!gelf_getsym(data, (int)i, &s))
            break;
        int type = GELF_ST_TYPE(s.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
            continue;
        if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || s.st_value == 0)
            continue;
        const char *name = elf_strptr(e, sh->sh_link, s.st_name);
        if (!name || !*name || name[0] == '$' || strncmp(name, ".L", 2) == 0)
            continue;
        /* Untyped labels in code (assembly entry points such as
         * _dl_start_user) are what nm and addr2line name such code by. */
        if (type == STT_NOTYPE && !section_is_code(e, s.st_shndx))
            continue;
        if (o->nsyms >= SYM_MAX_SYMBOLS)
            return;
        o->syms = hp_xgrow(o->syms, cap, o->nsyms + 1, sizeof(*o->syms));
        /* Names from a version-annotated .dynsym come without "@@VER". */
        o->syms[o->nsyms++] = (struct sym_symbol){ s.st_value, s.st_size,
                                                   hp_arena_strdup(&o->arena, name) };
    }
}

/* The function symbols of e (.symtab, else .dynsym), sorted, one per
 * address, into o. */
static void load_symbols(Elf *e, struct sym_elf *o)
{
    size_t cap = 0;
    Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
    GElf_Shdr symsh, dynsh;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB && !symtab) {
            symtab = scn;
            symsh = sh;
        } else if (sh.sh_type == SHT_DYNSYM && !dynsym) {
            dynsym = scn;
            dynsh = sh;
        }
    }
    if (symtab) {
        read_symbols(e, symtab, &symsh, o, &cap);
        o->has_symtab = true;
    }
    /* .dynsym is a subset of .symtab when both exist; read it only when the
     * full table is gone (stripped libraries). */
    if (dynsym && !symtab)
        read_symbols(e, dynsym, &dynsh, o, &cap);
    if (o->nsyms > 1) {
        hp_qsort(o->syms, o->nsyms, sizeof(*o->syms), sym_cmp);
        size_t w = 0;
        for (size_t i = 0; i < o->nsyms; i++) {
            if (w > 0 && o->syms[w - 1].addr == o->syms[i].addr) {
                if (sym_better(&o->syms[i], &o->syms[w - 1]))
                    o->syms[w - 1] = o->syms[i];
                continue;
            }
            o->syms[w++] = o->syms[i];
        }
        o->nsyms = w;
    }
}

static int elf_open(const char *path, bool lazy, struct sym_elf **ret, struct hp_buf *err)
{
    int r = 0;
    Elf *e = NULL;
    struct sym_elf *o = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int en = errno;
        hp_err_printf(err, "%s: cannot open: %s", path, strerror(en));
        return HP_ERR(en);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        hp_err_printf(err, "%s: not a regular file", path);
        r = HP_EELF;
        goto out;
    }
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        hp_err_printf(err, "%s: not an ELF file", path);
        r = HP_EELF;
        goto out;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(e, &eh)) {
        hp_err_printf(err, "%s: corrupt ELF header: %s", path, elf_errmsg(-1));
        r = HP_EELF;
        goto out;
    }
    /* A truncated copy (an interrupted download or scp) keeps a valid
     * header; libelf would then just see fewer sections. Check that the
     * section table and every section with file data fit in the file.
     * (PT_LOADs are not checked: separate debug files keep the image's
     * program headers without its bytes.) */
    uint64_t need = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
    for (Elf_Scn *sc = NULL; (sc = elf_nextscn(e, sc)) != NULL;) {
        GElf_Shdr sh;
        if (gelf_getshdr(sc, &sh) && sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > need)
            need = sh.sh_offset + sh.sh_size;
    }
    if (eh.e_shoff == 0 || need > (uint64_t)st.st_size) {
        hp_err_printf(err, "%s: truncated or damaged ELF: %lld bytes, its headers describe %llu",
                      path, (long long)st.st_size, (unsigned long long)need);
        r = HP_EELF;
        goto out;
    }
    o = hp_xcalloc(1, sizeof(*o));
    hp_arena_init(&o->arena);
    o->path = hp_xstrdup(path);
    o->type = eh.e_type;
    r = sym_elf_identity_read(path, &o->id, err);
    if (r < 0)
        goto out;

    size_t nph = 0;
    if (elf_getphdrnum(e, &nph) == 0 && nph > 0 && nph < 65536) {
        o->loads = hp_xcalloc(nph, sizeof(*o->loads));
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
                continue;
            o->loads[o->nloads++] = (struct sym_load){ ph.p_vaddr, ph.p_memsz, ph.p_offset,
                                                       ph.p_filesz, ph.p_flags };
        }
    }

    o->st = st;
    o->syms_loaded = !lazy;
    if (!lazy)
        load_symbols(e, o);
out:
    if (e)
        elf_end(e);
    close(fd);
    if (r < 0) {
        sym_elf_free(o);
        return r;
    }
    *ret = o;
    return 0;
}

int sym_elf_open(const char *path, struct sym_elf **ret, struct hp_buf *err)
{
    return elf_open(path, false, ret, err);
}

int sym_elf_open_lazy(const char *path, struct sym_elf **ret, struct hp_buf *err)
{
    return elf_open(path, true, ret, err);
}

/* Read the symbols of a lazily opened file, once: from the same file (same
 * device, inode, size and mtime as at open), else none. */
static void ensure_symbols(struct sym_elf *o)
{
    if (o->syms_loaded)
        return;
    o->syms_loaded = true;
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    Elf *e = NULL;
    if (fstat(fd, &st) == 0 && st.st_dev == o->st.st_dev && st.st_ino == o->st.st_ino &&
        st.st_size == o->st.st_size && st.st_mtim.tv_sec == o->st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == o->st.st_mtim.tv_nsec) {
        e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (e && elf_kind(e) == ELF_K_ELF)
            load_symbols(e, o);
    } else {
        hp_log_warn("sym", "file=%s msg=\"changed since it was opened: no symbols read\"",
                    o->path);
    }
    if (e)
        elf_end(e);
    close(fd);
}

size_t sym_elf_nsyms(struct sym_elf *o)
{
    ensure_symbols(o);
    return o->nsyms;
}

void sym_elf_free(struct sym_elf *o)
{
    if (!o)
        return;
    free(o->loads);
    free(o->syms);
    free(o->path);
    hp_arena_release(&o->arena);
    free(o);
}

int sym_elf_offset_to_vaddr(const struct sym_elf *o, uint64_t off, uint64_t *ret_vaddr)
{
    /* Segments may share a file page (lld and rustc layouts), so first look
     * for the segment that holds the byte itself, then accept the page a
     * maps line starts at (a segment may start mid-page). */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < o->nloads; i++) {
            const struct sym_load *l = &o->loads[i];
            uint64_t start = pass == 0 ? l->offset : l->offset & ~(uint64_t)0xfff;
            if (off >= start && off < l->offset + l->filesz) {
                *ret_vaddr = off - l->offset + l->vaddr;
                return 1;
            }
        }
    }
    return 0;
}

static const struct sym_load *load_for_vaddr(const struct sym_elf *o, uint64_t v)
{
    for (size_t i = 0; i < o->nloads; i++)
        if (v >= o->loads[i].vaddr && v < o->loads[i].vaddr + o->loads[i].memsz)
            return &o->loads[i];
    return NULL;
}

const struct sym_symbol *sym_elf_symbol_at(struct sym_elf *o, uint64_t vaddr, bool *ret_exact)
{
    ensure_symbols(o);
    size_t lo = hp_search_le_u64(o->syms, o->nsyms, sizeof(*o->syms),
                                 offsetof(struct sym_symbol, addr), vaddr);
    if (lo == 0)
        return NULL;
    const struct sym_symbol *s = &o->syms[lo - 1];
    bool exact = vaddr < s->addr + s->size;
    if (!exact) {
        /* nm-based tools (jeprof, pprof) give code between symbols to the
         * symbol before it; do the same, but not across segments. */
        const struct sym_load *a = load_for_vaddr(o, vaddr), *b = load_for_vaddr(o, s->addr);
        if (!a || a != b)
            return NULL;
    }
    if (ret_exact)
        *ret_exact = exact;
    return s;
}

int sym_elf_check_mapping(const struct sym_elf *o, uint64_t offset, uint64_t len,
                          struct hp_buf *err)
{
    if (o->nloads == 0) {
        hp_err_printf(err, "%s has no loadable segments", o->path);
        return HP_EMISMATCH;
    }
    /* The kernel maps an executable segment page-rounded at both ends; a
     * file of another build usually has its code elsewhere or sized
     * differently. Segments may share pages, so any executable one fits. */
    bool in_any = false;
    for (size_t i = 0; i < o->nloads; i++) {
        const struct sym_load *l = &o->loads[i];
        uint64_t start = l->offset & ~(uint64_t)0xfff;
        uint64_t end = (l->offset + l->filesz + 0xfff) & ~(uint64_t)0xfff;
        if (offset < start || offset >= end)
            continue;
        in_any = true;
        if ((l->flags & PF_X) && offset + len <= end + 0x1000)
            return 0;
    }
    if (in_any)
        hp_err_printf(err,
                      "executable mapping at file offset 0x%llx (0x%llx bytes) does not match "
                      "an executable segment of %s",
                      (unsigned long long)offset, (unsigned long long)len, o->path);
    else
        hp_err_printf(err,
                      "executable mapping at file offset 0x%llx is outside every segment of %s",
                      (unsigned long long)offset, o->path);
    return HP_EMISMATCH;
}

/* ---- dwz alternate files --------------------------------------------------- */

static int alt_try(const char *cand, const char *want_id, char **ret, struct hp_buf *why)
{
    struct stat st;
    if (stat(cand, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    struct sym_elf_identity id;
    struct hp_buf tmp = HP_BUF_INIT(0);
    int r = sym_elf_identity_read(cand, &id, &tmp);
    if (r < 0) {
        hp_err_printf(why, "%s%s: unusable (%s)", why->len ? "; " : "", cand,
                      tmp.len ? tmp.data : hp_strerror(r));
        hp_buf_release(&tmp);
        return -1;
    }
    hp_buf_release(&tmp);
    if (strcmp(id.build_id, want_id) != 0) {
        hp_err_printf(why, "%s%s: build-id mismatch (file %s, expected %s)", why->len ? "; " : "",
                      cand, id.build_id[0] ? id.build_id : "none", want_id);
        return -1;
    }
    *ret = hp_xstrdup(cand);
    return 1;
}

int sym_alt_find(const struct sym_alt_where *w, char **ret_path, struct hp_buf *why)
{
    const char *link = w->altlink, *id = w->build_id;
    if (!link[0] || !id[0])
        return HP_ENOTFOUND;
    const char *base = strrchr(link, '/');
    base = base ? base + 1 : link;
    const char *slash = strrchr(w->debug_file, '/');
    int dirlen = slash ? (int)(slash - w->debug_file) : 1;
    const char *dir = slash ? w->debug_file : ".";
    /* dwz -M writes the path as given: absolute, or relative to the debug
     * file (Debian: ../../.dwz/<triplet>/<package>.debug). Files copied
     * together keep their names but not their folders, so the basename next
     * to the debug file and in --symbols counts too; then the build-id
     * layouts. */
    char *cands[6] = { NULL };
    size_t n = 0;
    if (link[0] == '/')
        cands[n++] = hp_xstrdup(link);
    else
        cands[n++] = hp_xasprintf("%.*s/%s", dirlen, dir, link);
    cands[n++] = hp_xasprintf("%.*s/%s", dirlen, dir, base);
    if (w->symbols_dir) {
        cands[n++] = hp_xasprintf("%s/%s", w->symbols_dir, base);
        cands[n++] = hp_xasprintf("%s/.build-id/%.2s/%s.debug", w->symbols_dir, id, id + 2);
    }
    if (w->system_debug)
        cands[n++] = hp_xasprintf("/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
    int r = 0;
    for (size_t i = 0; i < n && r != 1; i++) {
        bool dup = false;
        for (size_t j = 0; j < i; j++)
            dup = dup || strcmp(cands[i], cands[j]) == 0;
        if (!dup)
            r = alt_try(cands[i], id, ret_path, why);
    }
    for (size_t i = 0; i < n; i++)
        free(cands[i]);
    if (r == 1)
        return 0;
    if (w->dbgd) {
        char *got = NULL;
        if (sym_debuginfod_fetch(w->dbgd, id, "debuginfo", &got, why) == 0) {
            r = alt_try(got, id, ret_path, why);
            free(got);
            if (r == 1)
                return 0;
        }
    }
    return HP_ENOTFOUND;
}
