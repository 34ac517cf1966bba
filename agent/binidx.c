/* Index of the binaries the agent may describe and serve (see
 * agent-internal.h for the rule of what is in it).
 *
 * Entries are keyed by path and remember the (dev, inode, size, mtime) their
 * identity was read at; an entry whose file changed is re-read before it is
 * used, and a file is served only if the descriptor opened for sending still
 * has those figures, so a binary replaced by an upgrade is never served under
 * the old build-id. Sizes are bounded: at most BINIDX_MAX entries, the newest
 * DUMPS_SCANNED dumps' maps, BINARIES_WALK_MAX files under --binaries. */
#include "agent/agent-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define BINIDX_MAX 4096
#define DUMPS_SCANNED 32
#define BINARIES_WALK_MAX 4096
#define BINARIES_DEPTH_MAX 6
#define REFRESH_EVERY_NS (2ull * 1000000000ull)

struct entry {
    char *path;
    bool from_config; /* --binaries: the operator vouches for it */
    bool valid;       /* identity read and still matches st_* */
    dev_t dev;
    ino_t ino;
    uint64_t size;
    int64_t mtime_ns;
    struct sym_elf_identity id;
};

struct seen_dump {
    size_t folder;
    char name[AGENT_NAME_MAX + 1];
    int64_t mtime_ns;
    uint64_t size;
};

struct agent_binidx {
    uv_mutex_t mu;
    const struct agent_folders *folders;
    struct entry *e;
    size_t n, cap;
    struct seen_dump *seen;
    size_t nseen, seen_cap;
    char **config_paths;
    size_t nconfig;
    uint64_t refreshed_ns;
};

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static struct entry *find(struct agent_binidx *x, const char *path)
{
    for (size_t i = 0; i < x->n; i++)
        if (strcmp(x->e[i].path, path) == 0)
            return &x->e[i];
    return NULL;
}

static void add_path(struct agent_binidx *x, const char *path, bool from_config)
{
    struct entry *e = find(x, path);
    if (e) {
        e->from_config |= from_config;
        return;
    }
    if (x->n == BINIDX_MAX)
        return;
    x->e = hp_xgrow(x->e, &x->cap, x->n + 1, sizeof(*x->e));
    e = &x->e[x->n++];
    memset(e, 0, sizeof(*e));
    e->path = hp_xstrdup(path);
    e->from_config = from_config;
}

/* Bring e's identity up to date. 0 usable, <0 not an ELF file or gone. */
static int entry_check(struct entry *e, struct hp_buf *err)
{
    struct stat st;
    if (stat(e->path, &st) != 0) {
        int r = HP_ERR(errno);
        hp_err_printf(err, "%s: %s", e->path, strerror(errno));
        e->valid = false;
        return r;
    }
    if (!S_ISREG(st.st_mode)) {
        hp_err_printf(err, "%s: not a regular file", e->path);
        e->valid = false;
        return HP_EELF;
    }
    if (e->valid && e->dev == st.st_dev && e->ino == st.st_ino &&
        e->size == (uint64_t)st.st_size && e->mtime_ns == mtime_ns(&st))
        return 0;
    e->valid = false;
    int r = sym_elf_identity_read(e->path, &e->id, err);
    if (r < 0)
        return r;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->size = (uint64_t)st.st_size;
    e->mtime_ns = mtime_ns(&st);
    e->valid = true;
    return 0;
}

static void walk(struct agent_binidx *x, int dfd, const char *path, int depth, size_t *budget)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL && *budget > 0) {
        if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
                                     (de->d_name[1] == '.' && de->d_name[2] == '\0')))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        char *child = hp_xasprintf("%s/%s", path, de->d_name);
        if (S_ISREG(st.st_mode)) {
            add_path(x, child, true);
            (*budget)--;
        } else if (S_ISDIR(st.st_mode) && depth < BINARIES_DEPTH_MAX) {
            int cfd = openat(dirfd(d), de->d_name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0)
                walk(x, cfd, child, depth + 1, budget);
        }
        free(child);
    }
    closedir(d);
}

struct maps_ctx {
    struct agent_binidx *x;
};

static int maps_path_cb(const char *path, void *arg)
{
    struct maps_ctx *c = arg;
    add_path(c->x, path, false);
    return c->x->n == BINIDX_MAX;
}

static bool dump_seen(struct agent_binidx *x, const struct agent_dump *d)
{
    for (size_t i = 0; i < x->nseen; i++) {
        const struct seen_dump *s = &x->seen[i];
        if (s->folder == d->folder && s->mtime_ns == d->mtime_ns && s->size == d->size &&
            strcmp(s->name, d->name) == 0)
            return true;
    }
    return false;
}

/* Called with the mutex held. */
static void refresh(struct agent_binidx *x)
{
    uint64_t now = hp_now_ns();
    if (x->refreshed_ns && now - x->refreshed_ns < REFRESH_EVERY_NS)
        return;
    x->refreshed_ns = now;

    size_t budget = BINARIES_WALK_MAX;
    for (size_t i = 0; i < x->nconfig; i++) {
        struct stat st;
        const char *p = x->config_paths[i];
        if (stat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0)
                walk(x, dfd, p, 0, &budget);
        } else {
            add_path(x, p, true);
        }
    }

    struct agent_dump *v = NULL;
    size_t nv = 0;
    if (agent_dumps_list(x->folders, &v, &nv, NULL) < 0)
        return;
    struct hp_buf maps = HP_BUF_INIT(8u << 20);
    for (size_t i = 0; i < nv && i < DUMPS_SCANNED; i++) {
        if (dump_seen(x, &v[i]))
            continue;
        int fd;
        struct agent_dump d;
        char *path = hp_xasprintf("%s/%s", x->folders->dir[v[i].folder].path, v[i].name);
        int r = agent_dump_open_path(x->folders, path, &fd, &d, NULL);
        free(path);
        if (r < 0)
            continue;
        if (agent_dump_read_maps(fd, d.size, &maps) == 0) {
            struct maps_ctx c = { .x = x };
            agent_maps_paths(maps.data, maps.len, maps_path_cb, &c);
            /* Only a complete dump is remembered as done; one still being
             * written is read again next time. */
            if (x->nseen < 4 * DUMPS_SCANNED) {
                x->seen = hp_xgrow(x->seen, &x->seen_cap, x->nseen + 1, sizeof(*x->seen));
                struct seen_dump *s = &x->seen[x->nseen++];
                s->folder = v[i].folder;
                memcpy(s->name, v[i].name, sizeof(s->name));
                s->mtime_ns = v[i].mtime_ns;
                s->size = v[i].size;
            } else {
                x->nseen = 0; /* forget and re-read: cheaper than a smarter cache */
            }
        }
        close(fd);
    }
    hp_buf_release(&maps);
    free(v);
}

struct agent_binidx *agent_binidx_new(const struct agent_folders *folders,
                                      const char *binaries_csv)
{
    struct agent_binidx *x = hp_xcalloc(1, sizeof(*x));
    if (uv_mutex_init(&x->mu) != 0)
        abort();
    x->folders = folders;
    const char *p = binaries_csv ? binaries_csv : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            x->config_paths = hp_xrealloc(x->config_paths, (x->nconfig + 1) * sizeof(char *));
            x->config_paths[x->nconfig++] = hp_xstrndup(p, n);
        }
        p += n + (comma ? 1 : 0);
    }
    return x;
}

void agent_binidx_free(struct agent_binidx *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++)
        free(x->e[i].path);
    for (size_t i = 0; i < x->nconfig; i++)
        free(x->config_paths[i]);
    free(x->config_paths);
    free(x->e);
    free(x->seen);
    uv_mutex_destroy(&x->mu);
    free(x);
}

int agent_binidx_identity(struct agent_binidx *x, const char *path,
                          struct sym_elf_identity *ret, struct hp_buf *err)
{
    int r;
    uv_mutex_lock(&x->mu);
    refresh(x);
    struct entry *e = find(x, path);
    if (!e) {
        r = 0;
        goto out;
    }
    r = entry_check(e, err);
    if (r == 0) {
        *ret = e->id;
        r = 1;
    }
out:
    uv_mutex_unlock(&x->mu);
    return r;
}

/* Open path and check it is still the file whose identity we read. */
static int open_checked(const char *path, dev_t dev, ino_t ino, uint64_t size, int64_t mt,
                        int *ret_fd, uint64_t *ret_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return HP_ERR(errno);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != dev || st.st_ino != ino ||
        (uint64_t)st.st_size != size || mtime_ns(&st) != mt) {
        close(fd);
        return HP_EMISMATCH;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *ret_fd = fd;
    *ret_size = size;
    return 0;
}

static bool looks_like_debug_file(const struct entry *e)
{
    size_t n = strlen(e->path);
    return (n > 6 && strcmp(e->path + n - 6, ".debug") == 0) || strstr(e->path, "/.build-id/");
}

int agent_binidx_open(struct agent_binidx *x, const char *hex, bool debuginfo, int *ret_fd,
                      uint64_t *ret_size, struct hp_buf *err)
{
    int r = 0;
    struct entry *exe = NULL, *dbg = NULL;
    uv_mutex_lock(&x->mu);
    refresh(x);
    for (size_t i = 0; i < x->n; i++) {
        struct entry *e = &x->e[i];
        if (entry_check(e, NULL) < 0 || strcmp(e->id.build_id, hex) != 0)
            continue;
        if (looks_like_debug_file(e)) {
            if (e->id.has_debug_info && !dbg)
                dbg = e;
        } else {
            if (!exe)
                exe = e;
            if (!dbg && e->id.has_debug_info)
                dbg = e;
        }
    }
    if (!exe && !dbg)
        goto out; /* not a build-id of ours: 0 */
    if (debuginfo && exe && (!dbg || dbg == exe) && strlen(hex) > 2) {
        /* Prefer a separate debug file from the distribution over the
         * binary's own DWARF only when the binary has none. */
        char *p = hp_xasprintf("/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
        if (!dbg) {
            add_path(x, p, false);
            struct entry *e = find(x, p);
            if (e && entry_check(e, NULL) == 0 && strcmp(e->id.build_id, hex) == 0 &&
                e->id.has_debug_info)
                dbg = e;
        }
        free(p);
    }
    struct entry *pick = debuginfo ? dbg : exe;
    if (!pick) {
        r = 0;
        goto out;
    }
    r = open_checked(pick->path, pick->dev, pick->ino, pick->size, pick->mtime_ns, ret_fd,
                     ret_size);
    if (r < 0)
        hp_err_printf(err, "%s: %s", pick->path, hp_strerror(r));
    else
        r = 1;
out:
    uv_mutex_unlock(&x->mu);
    return r;
}
