/* Index of the binaries the agent may describe and serve (see
 * agent-internal.h for the rule of what is in it): the files mapped by the
 * live processes it watches, read from /proc/PID/maps at most every 2 s
 * (never from a dump's MAPPED_LIBRARIES, which anyone who can write into a
 * dump folder controls), and what --binaries names.
 *
 * Entries are keyed by path and remember the (dev, inode, size, mtime) their
 * identity was read at; an entry whose file changed is re-read before it is
 * used, and a file is served only if the descriptor opened for sending still
 * has those figures, so a binary replaced by an upgrade is never served under
 * the old build-id. Sizes are bounded: at most BINIDX_MAX entries, the
 * processes of the newest DUMPS_SCANNED dumps, BINARIES_WALK_MAX files under
 * --binaries. */
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
    bool live;        /* mapped by a watched process at the last refresh */
    bool valid;       /* identity read and still matches st_* */
    dev_t dev;
    ino_t ino;
    uint64_t size;
    int64_t mtime_ns;
    struct sym_elf_identity id;
};

struct agent_binidx {
    uv_mutex_t mu;
    const struct agent_folders *folders;
    struct entry *e;
    size_t n, cap;
    char **config_paths;
    size_t nconfig;
    const char *pid_file;
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

static bool served(const struct entry *e)
{
    return e->from_config || e->live;
}

static struct entry *add_path(struct agent_binidx *x, const char *path, bool from_config)
{
    struct entry *e = find(x, path);
    if (e) {
        e->from_config |= from_config;
        e->live |= !from_config;
        return e;
    }
    if (x->n == BINIDX_MAX)
        return NULL;
    x->e = hp_xgrow(x->e, &x->cap, x->n + 1, sizeof(*x->e));
    e = &x->e[x->n++];
    memset(e, 0, sizeof(*e));
    e->path = hp_xstrdup(path);
    e->from_config = from_config;
    e->live = !from_config;
    return e;
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

static int maps_path_cb(const char *path, void *arg)
{
    struct agent_binidx *x = arg;
    (void)add_path(x, path, false);
    return x->n == BINIDX_MAX;
}

int agent_pid_file_read(const char *path, int64_t *ret_pid, struct hp_buf *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, 64, &data, &len, err);
    if (r < 0)
        return r;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' ' || data[len - 1] == '\r'))
        len--;
    uint64_t v;
    r = hp_parse_u64(data, len, &v);
    free(data);
    if (r < 0 || v == 0 || v > INT32_MAX) {
        hp_err_printf(err, "%s: not a pid", path);
        return HP_EPARSE;
    }
    *ret_pid = (int64_t)v;
    return 0;
}

static void add_pid(int64_t *pids, size_t *n, size_t cap, int64_t pid)
{
    if (pid <= 0 || pid > INT32_MAX || *n == cap)
        return;
    for (size_t i = 0; i < *n; i++)
        if (pids[i] == pid)
            return;
    pids[(*n)++] = pid;
}

/* Called with the mutex held. The watched processes are the --pid-file's,
 * else those the newest dumps' names give; each one still running has its
 * /proc/PID/maps read now, and only what it maps is served. */
static void refresh(struct agent_binidx *x)
{
    uint64_t now = hp_now_ns();
    if (x->refreshed_ns && now - x->refreshed_ns < REFRESH_EVERY_NS)
        return;
    x->refreshed_ns = now;

    /* Start from nothing served; what --binaries still holds and what a
     * watched process still maps is marked again below, the rest dropped
     * (identities read before are kept for the files that stay). */
    for (size_t i = 0; i < x->n; i++)
        x->e[i].from_config = x->e[i].live = false;

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
            (void)add_path(x, p, true);
        }
    }
    int64_t pids[DUMPS_SCANNED + 1];
    size_t npids = 0;
    if (x->pid_file) {
        int64_t pid;
        if (agent_pid_file_read(x->pid_file, &pid, NULL) == 0)
            add_pid(pids, &npids, HP_ARRAY_SIZE(pids), pid);
    } else {
        struct agent_dump *v = NULL;
        size_t nv = 0;
        if (agent_dumps_list(x->folders, &v, &nv, NULL) == 0)
            for (size_t i = 0; i < nv && i < DUMPS_SCANNED; i++)
                add_pid(pids, &npids, HP_ARRAY_SIZE(pids), v[i].parsed.pid);
        free(v);
    }
    for (size_t i = 0; i < npids; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%lld/maps", (long long)pids[i]);
        char *maps = NULL;
        size_t len = 0;
        if (hp_file_read(path, 8u << 20, &maps, &len, NULL) == 0)
            agent_maps_paths(maps, len, maps_path_cb, x);
        free(maps);
    }
    size_t keep = 0;
    for (size_t i = 0; i < x->n; i++) {
        if (served(&x->e[i]))
            x->e[keep++] = x->e[i];
        else
            free(x->e[i].path);
    }
    x->n = keep;
}

struct agent_binidx *agent_binidx_new(const struct agent_folders *folders,
                                      const char *binaries_csv, const char *pid_file)
{
    struct agent_binidx *x = hp_xcalloc(1, sizeof(*x));
    if (uv_mutex_init(&x->mu) != 0)
        abort();
    x->folders = folders;
    x->pid_file = pid_file;
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
    if (!e || !served(e)) {
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
        if (!served(e) || entry_check(e, NULL) < 0 || strcmp(e->id.build_id, hex) != 0)
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
            /* Served as the debug file of a binary that is: live too. */
            struct entry *e = add_path(x, p, false);
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
