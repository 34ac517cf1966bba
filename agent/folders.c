/* The served folders: the only place the agent reads dumps from and the only
 * place --keep deletes in.
 *
 * Invariant: a dump is reached only as openat(folder fd, NAME, O_NOFOLLOW)
 * where NAME is a single path component that parses as a dump file name, and
 * the result is a regular file. Folders are resolved once at start (realpath)
 * and held open, so renaming or replacing a folder's path later cannot point
 * the agent elsewhere; a path given by a client is accepted only when its
 * directory part resolves to one of those folders. Symlinks to dumps are not
 * served at all, even when they point inside a folder: the rule is easier to
 * trust than one with exceptions. Files with several hard links are refused
 * too (the other way to bring an outside file into a folder).
 *
 * Everything here does blocking file system calls: worker threads only. */
#include "agent/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int agent_folders_open(struct agent_folders *f, const char *csv, struct hp_buf *err)
{
    int r = 0;
    memset(f, 0, sizeof(*f));
    const char *p = csv;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            if (f->n == AGENT_FOLDERS_MAX) {
                hp_err_printf(err, "--dumps: more than %d folders", AGENT_FOLDERS_MAX);
                r = HP_EUSAGE;
                goto out;
            }
            char *given = hp_xstrndup(p, n);
            char *real = realpath(given, NULL);
            if (!real) {
                r = HP_ERR(errno);
                hp_err_printf(err, "--dumps: %s: %s", given, strerror(errno));
                free(given);
                goto out;
            }
            free(given);
            int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                r = HP_ERR(errno);
                hp_err_printf(err, "--dumps: %s: %s", real, strerror(errno));
                free(real);
                goto out;
            }
            f->dir[f->n].path = real;
            f->dir[f->n].fd = fd;
            f->n++;
        }
        p += n + (comma ? 1 : 0);
    }
    if (f->n == 0) {
        hp_err_printf(err, "--dumps: no folder given");
        r = HP_EUSAGE;
    }
out:
    if (r < 0)
        agent_folders_close(f);
    return r;
}

void agent_folders_close(struct agent_folders *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->dir[i].path);
        close(f->dir[i].fd);
    }
    f->n = 0;
}

static int64_t st_mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int dump_newer_first(const void *a, const void *b)
{
    const struct agent_dump *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns > y->mtime_ns ? -1 : 1;
    /* Same mtime (coarse clocks, several dumps in one tick): jemalloc's
     * sequence number orders them; then the name, for a stable answer. */
    if (x->parsed.seq != y->parsed.seq)
        return x->parsed.seq > y->parsed.seq ? -1 : 1;
    return -strcmp(x->name, y->name);
}

int agent_dumps_list(const struct agent_folders *f, struct agent_dump **ret, size_t *ret_n,
                     struct hp_buf *err)
{
    int r = 0;
    struct agent_dump *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < f->n; i++) {
        /* A fresh descriptor per listing: readdir needs its own offset, and
         * workers list concurrently. */
        int dfd = openat(f->dir[i].fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            r = HP_ERR(errno);
            hp_err_printf(err, "%s: %s", f->dir[i].path, strerror(errno));
            goto out;
        }
        DIR *d = fdopendir(dfd);
        if (!d) {
            r = HP_ERR(errno);
            close(dfd);
            goto out;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            struct ingest_dumpname dn;
            size_t nl = strlen(de->d_name);
            if (!ingest_dumpname_parse(de->d_name, nl, &dn))
                continue;
            struct stat st;
            if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(st.st_mode) || st.st_nlink > 1)
                continue; /* what open_in_folder() would refuse is not listed */
            if (n == AGENT_LIST_MAX)
                break;
            v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
            memcpy(v[n].name, de->d_name, nl + 1);
            v[n].folder = i;
            v[n].size = (uint64_t)st.st_size;
            v[n].mtime_ns = st_mtime_ns(&st);
            v[n].parsed = dn;
            n++;
        }
        closedir(d);
    }
    if (n > 1)
        hp_qsort(v, n, sizeof(*v), dump_newer_first);
    *ret = v;
    *ret_n = n;
    v = NULL;
out:
    free(v);
    return r;
}

/* Open NAME in folder i under the invariant in the file comment. */
static int open_in_folder(const struct agent_folders *f, size_t i, const char *name,
                          int *ret_fd, struct agent_dump *ret, struct hp_buf *err)
{
    struct ingest_dumpname dn;
    size_t nl = strlen(name);
    if (!ingest_dumpname_parse(name, nl, &dn)) {
        hp_err_printf(err, "%s: not a heap dump file name", name);
        return HP_ERR(EACCES);
    }
    int fd = openat(f->dir[i].fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return HP_ENOTFOUND;
        /* O_NOFOLLOW on a symlink fails with ELOOP. */
        hp_err_printf(err, "%s: %s", name, e == ELOOP ? "is a symlink" : strerror(e));
        return e == ELOOP ? HP_ERR(EACCES) : HP_ERR(e);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        hp_err_printf(err, "%s: not a regular file", name);
        return HP_ERR(EACCES);
    }
    /* A hard link is the one way to put a file from elsewhere into a folder
     * without a symlink; jemalloc and the databases never make them. */
    if (st.st_nlink > 1) {
        close(fd);
        hp_err_printf(err, "%s: has several hard links", name);
        return HP_ERR(EACCES);
    }
    /* O_NONBLOCK only kept a FIFO from blocking the open; reads of a regular
     * file ignore it, but clear it anyway. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    memset(ret, 0, sizeof(*ret));
    memcpy(ret->name, name, nl + 1);
    ret->folder = i;
    ret->size = (uint64_t)st.st_size;
    ret->mtime_ns = st_mtime_ns(&st);
    ret->parsed = dn;
    *ret_fd = fd;
    return 0;
}

int agent_dump_open_name(const struct agent_folders *f, const char *name, int *ret_fd,
                         struct agent_dump *ret, struct hp_buf *err)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > AGENT_NAME_MAX || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0) {
        hp_err_printf(err, "name must be a single file name");
        return HP_ERR(EACCES);
    }
    int r = HP_ENOTFOUND;
    for (size_t i = 0; i < f->n; i++) {
        r = open_in_folder(f, i, name, ret_fd, ret, err);
        if (r != HP_ENOTFOUND)
            return r;
    }
    return r;
}

int agent_dump_open_path(const struct agent_folders *f, const char *path, int *ret_fd,
                         struct agent_dump *ret, struct hp_buf *err)
{
    int r;
    size_t pl = strlen(path);
    if (pl == 0 || path[0] != '/' || pl >= PATH_MAX) {
        hp_err_printf(err, "path must be absolute");
        return HP_ERR(EACCES);
    }
    /* Refuse "." and ".." components and empty ones outright rather than
     * normalizing them: a client with a legitimate path never sends them. */
    for (const char *c = path + 1; *c;) {
        const char *slash = strchr(c, '/');
        size_t cl = slash ? (size_t)(slash - c) : strlen(c);
        if (cl == 0 || (cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.')) {
            hp_err_printf(err, "path has an empty, \".\" or \"..\" component");
            return HP_ERR(EACCES);
        }
        c += cl + (slash ? 1 : 0);
    }
    const char *base = strrchr(path, '/') + 1;
    if (*base == '\0') {
        hp_err_printf(err, "path names a folder");
        return HP_ERR(EACCES);
    }
    char *dir = hp_xstrndup(path, (size_t)(base - path - 1));
    if (dir[0] == '\0') {
        free(dir);
        dir = hp_xstrdup("/");
    }
    /* The directory part may go through symlinks (Doris reports
     * ${DORIS_HOME}/log as configured); what matters is where it ends up. */
    char *real = realpath(dir, NULL);
    r = HP_ERR(EACCES);
    if (real) {
        for (size_t i = 0; i < f->n; i++)
            if (strcmp(real, f->dir[i].path) == 0) {
                r = open_in_folder(f, i, base, ret_fd, ret, err);
                goto out;
            }
    }
    hp_err_printf(err, "%s is not in a served folder", dir);
out:
    free(real);
    free(dir);
    return r;
}

int agent_dump_delete_path(const struct agent_folders *f, const char *path, struct hp_buf *err)
{
    int fd;
    struct agent_dump d;
    int r = agent_dump_open_path(f, path, &fd, &d, err);
    if (r < 0)
        return r;
    close(fd);
    /* unlinkat in the folder's own descriptor: the name was checked there,
     * and a rename of the folder path since cannot redirect it. */
    const struct agent_folder *dir = &f->dir[d.folder];
    struct stat st;
    if (fstatat(dir->fd, d.name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_nlink > 1) {
        hp_err_printf(err, "%s: changed before it could be deleted", d.name);
        return HP_ERR(EACCES);
    }
    if (unlinkat(dir->fd, d.name, 0) != 0) {
        int e = errno;
        hp_err_printf(err, "%s: %s", d.name, strerror(e));
        return e == ENOENT ? HP_ENOTFOUND : HP_ERR(e);
    }
    return 0;
}

/* Search the last `want` bytes of fd for needle; 1 found (offset of its first
 * byte in *ret_off), 0 not, <0 error. */
static int tail_find(int fd, uint64_t size, size_t want, const char *needle, char **ret_buf,
                     size_t *ret_len, uint64_t *ret_off)
{
    size_t n = (size_t)HP_MIN((uint64_t)want, size);
    uint64_t start = size - n;
    char *buf = hp_xmalloc(n + 1);
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, n - got, (off_t)(start + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            return HP_ERR(e);
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    size_t nl = strlen(needle);
    const char *hit = NULL;
    /* The last occurrence: the trailer follows every stack. */
    for (const char *p = buf; (p = memmem(p, got - (size_t)(p - buf), needle, nl)) != NULL; p++)
        hit = p;
    if (!hit) {
        free(buf);
        return 0;
    }
    *ret_off = (uint64_t)(hit - buf);
    *ret_buf = buf;
    *ret_len = got;
    return 1;
}

int agent_dump_complete(int fd, uint64_t size, const struct ingest_dumpname *dn)
{
    char *buf = NULL;
    size_t len;
    uint64_t off;
    if (dn->kind != INGEST_DUMP_JEMALLOC && dn->kind != INGEST_DUMP_DORIS &&
        dn->kind != INGEST_DUMP_RISINGWAVE && dn->kind != INGEST_DUMP_STARROCKS)
        return 1;
    int r = tail_find(fd, size, 1u << 20, "\nMAPPED_LIBRARIES:\n", &buf, &len, &off);
    free(buf);
    return r;
}

/* The group a dump belongs to for --keep: same folder, kind and prefix.
 * RisingWave names have no prefix; its manual dumps (someone asked for them)
 * are kept apart from the automatic ones so a burst of auto dumps near the
 * memory limit cannot push them out. */
static bool same_group(const struct agent_dump *a, const struct agent_dump *b)
{
    if (a->parsed.kind == INGEST_DUMP_RISINGWAVE && a->parsed.trigger != b->parsed.trigger)
        return false;
    return a->folder == b->folder && a->parsed.kind == b->parsed.kind &&
           a->parsed.prefix_len == b->parsed.prefix_len &&
           memcmp(a->name, b->name, a->parsed.prefix_len) == 0;
}

int agent_dumps_prune(const struct agent_folders *f, unsigned keep, struct hp_buf *err)
{
    struct agent_dump *v = NULL;
    size_t n = 0;
    int deleted = 0;
    int r = agent_dumps_list(f, &v, &n, err);
    if (r < 0)
        return r;
    /* v is newest first, so counting each group's members in order finds the
     * ones past the newest `keep`. O(n^2) over at most AGENT_LIST_MAX. */
    for (size_t i = 0; i < n; i++) {
        unsigned newer = 0;
        for (size_t j = 0; j < i; j++)
            if (same_group(&v[j], &v[i]))
                newer++;
        if (newer < keep)
            continue;
        const struct agent_folder *d = &f->dir[v[i].folder];
        /* Re-check right before deleting: still a regular file, not a
         * symlink someone swapped in since the listing. */
        struct stat st;
        if (fstatat(d->fd, v[i].name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        struct hp_buf kv = HP_BUF_INIT(0);
        (void)hp_buf_puts(&kv, "folder=");
        (void)hp_logfmt_value(&kv, d->path);
        (void)hp_buf_puts(&kv, " file=");
        (void)hp_logfmt_value(&kv, v[i].name);
        if (unlinkat(d->fd, v[i].name, 0) != 0) {
            hp_log_warn("agent", "%s err=\"%s\" msg=\"could not delete old dump\"", kv.data,
                        strerror(errno));
        } else {
            hp_log_info("agent", "%s keep=%u msg=\"deleted old dump\"", kv.data, keep);
            deleted++;
        }
        hp_buf_release(&kv);
    }
    free(v);
    return deleted;
}
