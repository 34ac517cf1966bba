/* The symbolizer's on-disk cache for one-shot processes (`query top FILE
 * --binary B`): one file per build-id, `<dir>/<build-id>.hfsym`, holding
 * every address resolved so far with its frames. It plugs into the
 * symbolizer as a struct sym_cache_ops; the collector keeps using the
 * store's cache instead.
 *
 * Invariants:
 *   - A cache file is never trusted: every size, count, offset and string is
 *     checked against the file's length, and a checksum covers the body, so
 *     a truncated, corrupted or foreign file is ignored (as if absent) and
 *     replaced at the next flush.
 *   - Files are written whole to a private temporary file in the same folder
 *     and renamed over the old one, so a reader sees the old file or the new
 *     one, never a mix. Two writers for the same build-id each merge what is
 *     on disk at their flush with what they resolved; the last rename wins
 *     and holds at least its own entries and everything that was on disk
 *     when it started writing.
 *   - The folder is bounded (max_bytes over all *.hfsym files): after each
 *     write the least recently used files (by mtime; a load touches it) are
 *     removed until the rest fit. Temporary files older than an hour (a
 *     writer that died) are removed too.
 *   - The file records SYM_CACHE_RULES: answers made by other naming rules
 *     are ignored.
 *
 * File format (little-endian):
 *   header (48 bytes)
 *     magic      8  "HFSYMC\0\1"
 *     version    u32  SYM_CACHE_VERSION
 *     rules      u32  SYM_CACHE_RULES
 *     bid_len    u32  bytes of the build-id (hex) that follow the header
 *     nentries   u32
 *     nframes    u32
 *     strlen     u32  bytes of the string table
 *     checksum   u64  hp_hash_bytes(body, seed SYM_CACHE_SEED)
 *     reserved   u64  0
 *   body
 *     build-id   bid_len bytes, lowercase hex, equal to the file's name
 *     entries    nentries x { u64 vaddr; u32 first; u32 n }, vaddr strictly
 *                ascending, frames[first .. first+n) within nframes,
 *                n <= SYM_MAX_INLINE_DEPTH (0: known unresolvable)
 *     frames     nframes x { u32 function; u32 file; u32 line }, string
 *                offsets into the table or UINT32_MAX for none
 *     strings    strlen bytes of NUL-terminated strings (ends in NUL)
 *   and nothing after. */
#include "collector/sym/sym-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SYM_CACHE_VERSION 1u
#define SYM_CACHE_SEED UINT64_C(0x6866737963616368)
#define SYM_CACHE_HEADER 48u
#define SYM_CACHE_ENTRY 16u
#define SYM_CACHE_FRAME 12u
#define SYM_CACHE_NONE UINT32_MAX
#define SYM_CACHE_DEFAULT_MAX (UINT64_C(1) << 30)
#define SYM_CACHE_STALE_TMP_S 3600

static const unsigned char magic[8] = { 'H', 'F', 'S', 'Y', 'M', 'C', 0, 1 };

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

int sym_cache_image_parse(const void *data, size_t len, const char *build_id,
                          struct sym_cache_image *ret, struct hp_buf *err)
{
    const unsigned char *d = data;
    memset(ret, 0, sizeof(*ret));
    if (len < SYM_CACHE_HEADER || memcmp(d, magic, sizeof(magic)) != 0) {
        hp_err_printf(err, "not a heapfleet symbol cache file (%zu bytes, bad magic)", len);
        return HP_ECORRUPT;
    }
    uint32_t version = rd32(d + 8), rules = rd32(d + 12), bid_len = rd32(d + 16);
    uint32_t ne = rd32(d + 20), nf = rd32(d + 24), sl = rd32(d + 28);
    uint64_t sum = rd64(d + 32);
    if (version != SYM_CACHE_VERSION || rules != SYM_CACHE_RULES) {
        hp_err_printf(err, "format %u rules %u (expected %u, %u)", version, rules,
                      SYM_CACHE_VERSION, SYM_CACHE_RULES);
        return HP_EVERSION;
    }
    uint64_t need = (uint64_t)SYM_CACHE_HEADER + bid_len + (uint64_t)ne * SYM_CACHE_ENTRY +
                    (uint64_t)nf * SYM_CACHE_FRAME + sl;
    if (need != len) {
        hp_err_printf(err, "length %zu, header says %llu (truncated or extended)", len,
                      (unsigned long long)need);
        return HP_ECORRUPT;
    }
    const unsigned char *body = d + SYM_CACHE_HEADER;
    if (hp_hash_bytes(body, len - SYM_CACHE_HEADER, SYM_CACHE_SEED) != sum) {
        hp_err_printf(err, "checksum mismatch");
        return HP_ECORRUPT;
    }
    if (bid_len == 0 || bid_len > 2 * SYM_BUILD_ID_MAX ||
        (build_id && (strlen(build_id) != bid_len || memcmp(body, build_id, bid_len) != 0))) {
        hp_err_printf(err, "build-id in the file does not match its name");
        return HP_ECORRUPT;
    }
    const unsigned char *ents = body + bid_len;
    const unsigned char *frames = ents + (size_t)ne * SYM_CACHE_ENTRY;
    const unsigned char *strs = frames + (size_t)nf * SYM_CACHE_FRAME;
    if (sl && strs[sl - 1] != '\0') {
        hp_err_printf(err, "string table not terminated");
        return HP_ECORRUPT;
    }
    for (uint32_t i = 0; i < ne; i++) {
        const unsigned char *e = ents + (size_t)i * SYM_CACHE_ENTRY;
        uint64_t va = rd64(e);
        uint32_t first = rd32(e + 8), n = rd32(e + 12);
        if (i > 0 && va <= rd64(e - SYM_CACHE_ENTRY)) {
            hp_err_printf(err, "entry %u: address 0x%llx out of order", i,
                          (unsigned long long)va);
            return HP_ECORRUPT;
        }
        if (n > SYM_MAX_INLINE_DEPTH || first > nf || n > nf - first) {
            hp_err_printf(err, "entry %u: frames %u+%u outside %u", i, first, n, nf);
            return HP_ECORRUPT;
        }
    }
    for (uint32_t i = 0; i < nf; i++) {
        const unsigned char *f = frames + (size_t)i * SYM_CACHE_FRAME;
        uint32_t fn = rd32(f), file = rd32(f + 4);
        if ((fn != SYM_CACHE_NONE && fn >= sl) || (file != SYM_CACHE_NONE && file >= sl)) {
            hp_err_printf(err, "frame %u: string offset outside the table (%u bytes)", i, sl);
            return HP_ECORRUPT;
        }
    }
    ret->entries = ents;
    ret->frames = frames;
    ret->strings = (const char *)strs;
    ret->nentries = ne;
    ret->nframes = nf;
    return 0;
}

uint64_t sym_cache_image_vaddr(const struct sym_cache_image *im, size_t i)
{
    return rd64(im->entries + i * SYM_CACHE_ENTRY);
}

uint32_t sym_cache_image_get(const struct sym_cache_image *im, size_t i,
                             struct profile_frame *out)
{
    const unsigned char *e = im->entries + i * SYM_CACHE_ENTRY;
    uint32_t first = rd32(e + 8), n = rd32(e + 12);
    for (uint32_t k = 0; k < n; k++) {
        const unsigned char *f = im->frames + (size_t)(first + k) * SYM_CACHE_FRAME;
        uint32_t fn = rd32(f), file = rd32(f + 4);
        out[k] = (struct profile_frame){ fn == SYM_CACHE_NONE ? NULL : im->strings + fn,
                                         file == SYM_CACHE_NONE ? NULL : im->strings + file,
                                         rd32(f + 8) };
    }
    return n;
}

/* Index of vaddr in the image, or SIZE_MAX. *hint: where the last lookup
 * ended; the symbolizer asks in ascending order, so the answer is usually
 * just after it and the binary search is left for the rest. */
static size_t image_find(const struct sym_cache_image *im, uint64_t vaddr, size_t *hint)
{
    size_t h = *hint;
    if (h < im->nentries && sym_cache_image_vaddr(im, h) <= vaddr) {
        for (size_t k = h; k < im->nentries && k < h + 4; k++) {
            uint64_t v = sym_cache_image_vaddr(im, k);
            if (v == vaddr) {
                *hint = k + 1;
                return k;
            }
            if (v > vaddr)
                return SIZE_MAX;
        }
    }
    size_t lo = 0, hi = im->nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v = sym_cache_image_vaddr(im, mid);
        if (v == vaddr) {
            *hint = mid + 1;
            return mid;
        }
        if (v < vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

/* ---- the cache ----------------------------------------------------------- */

struct pending {
    uint64_t vaddr;
    uint32_t first, n;
};

/* One build-id: what its file held when first asked, what this process
 * resolved since. */
struct cobj {
    char build_id[2 * SYM_BUILD_ID_MAX + 1];
    char *data; /* the file's bytes, or NULL */
    struct sym_cache_image im;
    size_t hint; /* image_find's */
    struct pending *pend;
    size_t npend, pend_cap;
    struct profile_frame *pframes; /* strings interned in the cache's strtab */
    size_t npframes, pframes_cap;
};

struct sym_file_cache {
    char *dir; /* NULL: disabled (no folder) */
    uint64_t max_bytes;
    struct sym_cache_ops ops;
    struct cobj **objs;
    size_t nobjs, objs_cap;
    struct cobj *last; /* the last one asked about */
    struct profile_frame scratch[SYM_MAX_INLINE_DEPTH];
    struct hp_arena arena;
    struct hp_strtab strings;
    unsigned tmp_seq;
    struct sym_file_cache_stats stats;
};

static char *file_path(const struct sym_file_cache *c, const char *build_id)
{
    return hp_xasprintf("%s/%s.hfsym", c->dir, build_id);
}

/* A build-id is a file name only when it is plain lowercase hex. */
static bool bid_ok(const char *b)
{
    size_t n = strlen(b);
    if (n < 2 || n > 2 * SYM_BUILD_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')))
            return false;
    return true;
}

/* Read and check a build-id's file; *ret_data NULL when absent or unusable
 * (a bad file is logged at debug level and counted when `first`: the read
 * at flush time sees the same file again). `first` also touches the file,
 * since it is being used. */
static void file_load(struct sym_file_cache *c, const char *build_id, char **ret_data,
                      struct sym_cache_image *ret_im, bool first)
{
    *ret_data = NULL;
    memset(ret_im, 0, sizeof(*ret_im));
    char *path = file_path(c, build_id);
    char *data = NULL;
    size_t len = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = hp_file_read(path, (size_t)c->max_bytes, &data, &len, &err);
    if (r == 0) {
        hp_buf_reset(&err);
        r = sym_cache_image_parse(data, len, build_id, ret_im, &err);
        if (r < 0) {
            c->stats.rejected += first;
            hp_log_debug("sym", "file=%s err=\"%s\" msg=\"cache file ignored, to be replaced\"",
                         path, err.data ? err.data : "?");
            free(data);
            data = NULL;
        } else if (first) {
            /* Least recently used goes first when the folder is full. */
            (void)utimensat(AT_FDCWD, path, NULL, 0);
        }
    } else if (r != HP_ERR(ENOENT)) {
        c->stats.rejected += first;
    }
    *ret_data = data;
    hp_buf_release(&err);
    free(path);
}

static struct cobj *cobj_get(struct sym_file_cache *c, const char *build_id)
{
    if (c->last && strcmp(c->last->build_id, build_id) == 0)
        return c->last;
    for (size_t i = 0; i < c->nobjs; i++)
        if (strcmp(c->objs[i]->build_id, build_id) == 0)
            return c->last = c->objs[i];
    struct cobj *o = hp_xcalloc(1, sizeof(*o));
    snprintf(o->build_id, sizeof(o->build_id), "%s", build_id);
    if (c->dir && bid_ok(build_id)) {
        file_load(c, build_id, &o->data, &o->im, true);
        if (o->data)
            c->stats.files_loaded++;
    }
    c->objs = hp_xgrow(c->objs, &c->objs_cap, c->nobjs + 1, sizeof(*c->objs));
    c->objs[c->nobjs++] = o;
    return c->last = o;
}

static int load_cb(void *ctx, const char *build_id, uint64_t vaddr,
                   const struct profile_frame **ret_frames, uint32_t *ret_n)
{
    struct sym_file_cache *c = ctx;
    struct cobj *o = cobj_get(c, build_id);
    if (!o->data)
        return 0;
    size_t i = image_find(&o->im, vaddr, &o->hint);
    if (i == SIZE_MAX)
        return 0;
    *ret_n = sym_cache_image_get(&o->im, i, c->scratch);
    *ret_frames = c->scratch;
    c->stats.hits++;
    return 1;
}

static const char *intern(struct sym_file_cache *c, const char *s)
{
    return s ? hp_strtab_intern(&c->strings, s, strlen(s)) : NULL;
}

static int save_cb(void *ctx, const char *build_id, uint64_t vaddr,
                   const struct profile_frame *frames, uint32_t n)
{
    struct sym_file_cache *c = ctx;
    if (!c->dir || !bid_ok(build_id) || n > SYM_MAX_INLINE_DEPTH)
        return 0;
    struct cobj *o = cobj_get(c, build_id);
    o->pframes = hp_xgrow(o->pframes, &o->pframes_cap, o->npframes + n, sizeof(*o->pframes));
    for (uint32_t k = 0; k < n; k++)
        o->pframes[o->npframes + k] = (struct profile_frame){ intern(c, frames[k].function),
                                                              intern(c, frames[k].file),
                                                              frames[k].line };
    o->pend = hp_xgrow(o->pend, &o->pend_cap, o->npend + 1, sizeof(*o->pend));
    o->pend[o->npend++] = (struct pending){ vaddr, (uint32_t)o->npframes, n };
    o->npframes += n;
    return 0;
}

static int pending_cmp(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The file image being written: string offsets by interned pointer. */
struct writer {
    struct hp_buf ents, frames, strs;
    struct hp_map64 stroff; /* (uintptr_t)interned string -> offset */
    struct hp_strtab *tab;
    uint32_t ne, nf;
};

static uint32_t writer_str(struct writer *w, const char *s)
{
    if (!s)
        return SYM_CACHE_NONE;
    s = hp_strtab_intern(w->tab, s, strlen(s));
    uint32_t off = (uint32_t)w->strs.len, got;
    if (hp_map64_put(&w->stroff, (uint64_t)(uintptr_t)s, off, &got) == 1)
        return got;
    (void)hp_buf_append(&w->strs, s, strlen(s) + 1);
    return off;
}

static void writer_add(struct writer *w, uint64_t vaddr, const struct profile_frame *f,
                       uint32_t n)
{
    unsigned char e[SYM_CACHE_ENTRY], fr[SYM_CACHE_FRAME];
    wr64(e, vaddr);
    wr32(e + 8, w->nf);
    wr32(e + 12, n);
    (void)hp_buf_append(&w->ents, e, sizeof(e));
    for (uint32_t k = 0; k < n; k++) {
        wr32(fr, writer_str(w, f[k].function));
        wr32(fr + 4, writer_str(w, f[k].file));
        wr32(fr + 8, f[k].line);
        (void)hp_buf_append(&w->frames, fr, sizeof(fr));
    }
    w->ne++;
    w->nf += n;
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

struct fentry {
    char *name;
    uint64_t size;
    struct timespec mtime;
};

static int fentry_cmp(const void *a, const void *b)
{
    const struct fentry *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* Remove the least recently used files until the rest fit in max_bytes;
 * `keep` (just written) goes last. Dead writers' temporary files go too. */
static void evict(struct sym_file_cache *c, const char *keep)
{
    DIR *d = hp_opendir(c->dir);
    if (!d)
        return;
    struct fentry *fs = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        bool tmp = strstr(de->d_name, ".hfsym.tmp.") != NULL;
        if (!tmp && !ends_with(de->d_name, ".hfsym"))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (tmp) {
            if (now - st.st_mtime > SYM_CACHE_STALE_TMP_S)
                (void)unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        fs = hp_xgrow(fs, &cap, n + 1, sizeof(*fs));
        fs[n++] = (struct fentry){ hp_xstrdup(de->d_name), (uint64_t)st.st_size, st.st_mtim };
        total += (uint64_t)st.st_size;
    }
    qsort(fs, n, sizeof(*fs), fentry_cmp);
    for (int pass = 0; pass < 2 && total > c->max_bytes; pass++)
        for (size_t i = 0; i < n && total > c->max_bytes; i++) {
            if (!fs[i].name || ((pass == 0) == (strcmp(fs[i].name, keep) == 0)))
                continue;
            if (unlinkat(dirfd(d), fs[i].name, 0) == 0) {
                total -= fs[i].size;
                c->stats.evicted++;
            }
            free(fs[i].name);
            fs[i].name = NULL;
        }
    for (size_t i = 0; i < n; i++)
        free(fs[i].name);
    free(fs);
    closedir(d);
}

/* Write one build-id's file: what is on disk now (another process may have
 * added to it since we read it), merged with what we resolved. */
static void cobj_flush(struct sym_file_cache *c, struct cobj *o)
{
    qsort(o->pend, o->npend, sizeof(*o->pend), pending_cmp);
    char *disk = NULL;
    struct sym_cache_image im;
    file_load(c, o->build_id, &disk, &im, false);
    struct hp_arena arena;
    struct hp_strtab tab;
    hp_arena_init(&arena);
    hp_strtab_init(&tab, &arena);
    struct writer w = { HP_BUF_INIT(0), HP_BUF_INIT(0), HP_BUF_INIT(0), { 0 }, &tab, 0, 0 };
    hp_map64_init(&w.stroff);
    struct profile_frame fr[SYM_MAX_INLINE_DEPTH];
    size_t i = 0, j = 0;
    while (i < o->npend || j < im.nentries) {
        uint64_t pv = i < o->npend ? o->pend[i].vaddr : UINT64_MAX;
        uint64_t dv = j < im.nentries ? sym_cache_image_vaddr(&im, j) : UINT64_MAX;
        if (i < o->npend && (j >= im.nentries || pv <= dv)) {
            writer_add(&w, pv, o->pframes + o->pend[i].first, o->pend[i].n);
            if (j < im.nentries && dv == pv)
                j++;
            do
                i++;
            while (i < o->npend && o->pend[i].vaddr == pv);
        } else {
            uint32_t n = sym_cache_image_get(&im, j, fr);
            writer_add(&w, dv, fr, n);
            j++;
        }
    }
    size_t bid_len = strlen(o->build_id);
    uint64_t body_len = bid_len + w.ents.len + w.frames.len + w.strs.len;
    char *path = NULL, *tmp = NULL;
    int fd = -1;
    if (SYM_CACHE_HEADER + body_len > c->max_bytes || w.strs.len >= UINT32_MAX ||
        w.nf >= UINT32_MAX) {
        c->stats.write_errors++;
        goto out;
    }
    struct hp_buf body = HP_BUF_INIT(0);
    (void)hp_buf_append(&body, o->build_id, bid_len);
    (void)hp_buf_append(&body, w.ents.data, w.ents.len);
    (void)hp_buf_append(&body, w.frames.data, w.frames.len);
    (void)hp_buf_append(&body, w.strs.data, w.strs.len);
    unsigned char h[SYM_CACHE_HEADER] = { 0 };
    memcpy(h, magic, sizeof(magic));
    wr32(h + 8, SYM_CACHE_VERSION);
    wr32(h + 12, SYM_CACHE_RULES);
    wr32(h + 16, (uint32_t)bid_len);
    wr32(h + 20, w.ne);
    wr32(h + 24, w.nf);
    wr32(h + 28, (uint32_t)w.strs.len);
    wr64(h + 32, hp_hash_bytes(body.data, body.len, SYM_CACHE_SEED));
    path = file_path(c, o->build_id);
    tmp = hp_xasprintf("%s/%s.hfsym.tmp.%ld.%u", c->dir, o->build_id, (long)getpid(),
                       c->tmp_seq++);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write_all(fd, h, sizeof(h)) && write_all(fd, body.data, body.len);
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    fd = -1;
    if (ok && rename(tmp, path) == 0) {
        c->stats.files_written++;
        char *base = hp_xasprintf("%s.hfsym", o->build_id);
        evict(c, base);
        free(base);
    } else {
        c->stats.write_errors++;
        (void)unlink(tmp);
    }
    hp_buf_release(&body);
out:
    free(path);
    free(tmp);
    hp_buf_release(&w.ents);
    hp_buf_release(&w.frames);
    hp_buf_release(&w.strs);
    hp_map64_release(&w.stroff);
    hp_strtab_release(&tab);
    hp_arena_release(&arena);
    free(disk);
    /* Pending entries are on disk now; keep answering from memory. */
    o->npend = 0;
    o->npframes = 0;
}

static void flush_cb(void *ctx)
{
    struct sym_file_cache *c = ctx;
    if (!c->dir)
        return;
    if (hp_mkdir_p(c->dir) < 0) {
        c->stats.write_errors++;
        return;
    }
    for (size_t i = 0; i < c->nobjs; i++)
        if (c->objs[i]->npend)
            cobj_flush(c, c->objs[i]);
}

char *sym_file_cache_default_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        return hp_xasprintf("%s/heapfleet/sym", xdg);
    if (home && *home)
        return hp_xasprintf("%s/.cache/heapfleet/sym", home);
    return NULL;
}

struct sym_file_cache *sym_file_cache_new(const char *dir, uint64_t max_bytes)
{
    struct sym_file_cache *c = hp_xcalloc(1, sizeof(*c));
    c->dir = dir ? hp_xstrdup(dir) : sym_file_cache_default_dir();
    c->max_bytes = max_bytes ? max_bytes : SYM_CACHE_DEFAULT_MAX;
    /* load_cb hands out pointers into the file image, kept until the cache is
     * freed (after sym_free). */
    c->ops = (struct sym_cache_ops){ c, load_cb, save_cb, flush_cb, true };
    hp_arena_init(&c->arena);
    hp_strtab_init(&c->strings, &c->arena);
    return c;
}

const struct sym_cache_ops *sym_file_cache_ops(struct sym_file_cache *c)
{
    return &c->ops;
}

void sym_file_cache_stats(const struct sym_file_cache *c, struct sym_file_cache_stats *ret)
{
    *ret = c->stats;
}

void sym_file_cache_free(struct sym_file_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nobjs; i++) {
        struct cobj *o = c->objs[i];
        free(o->data);
        free(o->pend);
        free(o->pframes);
        free(o);
    }
    free(c->objs);
    hp_strtab_release(&c->strings);
    hp_arena_release(&c->arena);
    free(c->dir);
    free(c);
}
