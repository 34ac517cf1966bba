/* symdir.c: the local mirror of the store's uploaded symbol files
 * (store_symfiles_sync, store_symfiles_dir_default), for both engines.
 *
 * The symbolizer opens files (libelf maps them), so each process that
 * symbolizes writes the store's files into a folder of its own host, in the
 * layout of --symbols DIR, and points its symbolizer there. A file is
 * written under a temporary name and renamed, so a symbolizer in another
 * thread or process never opens half a file; a file already there with the
 * listed size is not written again. */
#include "store/store-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *store_symfiles_dir_default(const char *db)
{
    if (!store_is_postgres(db))
        return hp_xasprintf("%s.symbols", db);
    /* The URI may carry a password: the folder is named by its hash. */
    uint64_t h = hp_hash_bytes(db, strlen(db), 0);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        return hp_xasprintf("%s/heapfleet/symbols/%016llx", xdg, (unsigned long long)h);
    if (home && *home)
        return hp_xasprintf("%s/.cache/heapfleet/symbols/%016llx", home, (unsigned long long)h);
    return NULL;
}

struct list_ctx {
    struct store_symfile *v;
    size_t n, cap;
};

static int collect_cb(const struct store_symfile *f, void *ctx)
{
    struct list_ctx *c = ctx;
    c->v = hp_xgrow(c->v, &c->cap, c->n + 1, sizeof(*c->v));
    c->v[c->n] = *f;
    c->v[c->n].build_id = hp_xstrdup(f->build_id);
    c->v[c->n].name = hp_xstrdup(f->name);
    c->n++;
    return 0;
}

int store_symfiles_all(struct store *s, struct store_symfile **ret, size_t *ret_n,
                       struct hp_buf *err)
{
    struct list_ctx c = { 0 };
    int r = store_symfiles_list(s, collect_cb, &c, err);
    if (r < 0) {
        store_symfiles_free(c.v, c.n);
        return r;
    }
    *ret = c.v;
    *ret_n = c.n;
    return 0;
}

void store_symfiles_free(struct store_symfile *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)v[i].build_id);
        free((char *)v[i].name);
    }
    free(v);
}

/* Only hex build-ids and plain names make paths: the rows come from a
 * database other processes write. */
static bool safe_row(const struct store_symfile *f)
{
    size_t n = strlen(f->build_id);
    if (n < 4 || strspn(f->build_id, "0123456789abcdef") != n)
        return false;
    return *f->name && !strchr(f->name, '/') && strcmp(f->name, ".") != 0 &&
           strcmp(f->name, "..") != 0 && strncmp(f->name, ".build-id", 9) != 0;
}

static int export_one(struct store *s, const struct store_symfile *f, const char *dest,
                      struct hp_buf *err)
{
    char *tmp = hp_xasprintf("%s.tmp.%ld", dest, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r = 0;
    if (fd < 0) {
        hp_err_printf(err, "%s: %s", tmp, strerror(errno));
        r = HP_ERR(errno);
        goto out;
    }
    r = store_symfile_export(s, f, fd, err);
    if (close(fd) != 0 && r == 0) {
        hp_err_printf(err, "%s: %s", tmp, strerror(errno));
        r = HP_ERR(EIO);
    }
    if (r == 0 && rename(tmp, dest) != 0) {
        hp_err_printf(err, "%s: %s", dest, strerror(errno));
        r = HP_ERR(errno);
    }
out:
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

/* DIR/<name> -> .build-id/xx/rest.debug, unless it already points there. */
static int link_name(const char *dir, const struct store_symfile *f, struct hp_buf *err)
{
    char *link = hp_xasprintf("%s/%s", dir, f->name);
    char *target = hp_xasprintf(".build-id/%.2s/%s.debug", f->build_id, f->build_id + 2);
    char *tmp = hp_xasprintf("%s.tmp.%ld", link, (long)getpid());
    char buf[512];
    ssize_t n = readlink(link, buf, sizeof(buf) - 1);
    int r = 0;
    if (n > 0 && (size_t)n == strlen(target) && memcmp(buf, target, (size_t)n) == 0)
        goto out;
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
        hp_err_printf(err, "%s: %s", link, strerror(errno));
        r = HP_ERR(errno);
        unlink(tmp);
    }
out:
    free(link);
    free(target);
    free(tmp);
    return r;
}

static int added_first(const void *a, const void *b)
{
    const struct store_symfile *x = a, *y = b;
    return (x->added_at > y->added_at) - (x->added_at < y->added_at);
}

int store_symfiles_sync(struct store *s, const char *dir, size_t *ret_added, struct hp_buf *err)
{
    struct store_symfile *v = NULL;
    size_t n = 0, added = 0;
    int r = store_symfiles_all(s, &v, &n, err);
    /* Oldest first, so the newest file of a name takes the name. */
    if (r == 0 && n > 1)
        hp_qsort(v, n, sizeof(*v), added_first);
    for (size_t i = 0; i < n && r == 0; i++) {
        const struct store_symfile *f = &v[i];
        if (!safe_row(f))
            continue;
        char *sub = hp_xasprintf("%s/.build-id/%.2s", dir, f->build_id);
        char *dest = hp_xasprintf("%s/%s.debug", sub, f->build_id + 2);
        struct stat st;
        if (stat(dest, &st) != 0 || st.st_size != f->size) {
            if ((r = hp_mkdir_p(sub)) < 0)
                hp_err_printf(err, "%s: %s", sub, hp_strerror(r));
            else if ((r = export_one(s, f, dest, err)) == 0)
                added++;
        }
        if (r == 0)
            r = link_name(dir, f, err);
        free(sub);
        free(dest);
    }
    store_symfiles_free(v, n);
    if (r == 0 && ret_added)
        *ret_added = added;
    return r;
}
