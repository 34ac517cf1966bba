/* symfiles.c: files uploaded by `query symbols add` (store.h, "uploaded
 * symbol files"), compiled once per engine like symcache.c.
 *
 * Invariants:
 *   - A file is a row of symbol_files plus nchunks rows of
 *     symbol_file_chunks (seq 0 .. nchunks-1), each at most SYMFILE_CHUNK
 *     bytes before zstd. The row is inserted only after the last chunk: a
 *     listed file is whole; chunks of an upload that died unlisted are
 *     deleted by the next upload of that build-id.
 *   - Reads go chunk by chunk (one statement per chunk): on PostgreSQL a
 *     statement's whole result is held in memory (pg-shim.h), so a query
 *     over every chunk of a 2 GB file would hold 2 GB. */
#include "store/store-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SYMFILE_CHUNK (4u << 20)

static int put_chunks(struct store *s, const struct store_symfile *f, int fd,
                      const char *path, int64_t *ret_size, int64_t *ret_nchunks,
                      struct hp_buf *err)
{
    unsigned char *buf = hp_xmalloc(SYMFILE_CHUNK);
    int64_t size = 0, seq = 0;
    int r = 0;
    for (;;) {
        size_t got = 0;
        while (got < SYMFILE_CHUNK) {
            ssize_t n = read(fd, buf + got, SYMFILE_CHUNK - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                hp_err_printf(err, "%s: reading at byte %lld: %s", path,
                              (long long)(size + (int64_t)got), strerror(errno));
                r = HP_ERR(errno);
                goto out;
            }
            if (n == 0)
                break;
            got += (size_t)n;
        }
        if (got == 0)
            break;
        void *z = NULL;
        size_t zlen = 0;
        if ((r = store_zstd_compress(s, buf, got, NULL, 0, false, &z, &zlen, err)) < 0)
            goto out;
        sqlite3_stmt *st;
        if ((r = store_stmt(s, STMT_SYMFILE_CHUNK_PUT, &st, err)) == 0) {
            sqlite3_bind_text(st, 1, f->build_id, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 2, seq);
            sqlite3_bind_int64(st, 3, (int64_t)got);
            sqlite3_bind_blob(st, 4, z, (int)zlen, SQLITE_STATIC);
            r = store_step_done(s, st, "storing a symbol file", err);
        }
        free(z);
        if (r < 0)
            goto out;
        size += (int64_t)got;
        seq++;
        if (got < SYMFILE_CHUNK)
            break;
    }
    *ret_size = size;
    *ret_nchunks = seq;
out:
    free(buf);
    return r;
}

int store_symfile_put(struct store *s, const struct store_symfile *f, const char *path,
                      struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "storing a symbol file", err)) < 0)
        return r;
    if (!f->build_id || !*f->build_id || !f->name || !*f->name) {
        hp_err_printf(err, "%s: a symbol file needs a build-id and a name", s->path);
        return HP_EUSAGE;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hp_err_printf(err, "%s: %s", path, strerror(errno));
        return HP_ERR(errno);
    }
    /* Unlist first: readers never see the old row over new chunks. */
    static const enum store_stmt_id clear[] = { STMT_SYMFILE_UNLIST,
                                                STMT_SYMFILE_CHUNKS_DELETE };
    for (size_t i = 0; i < HP_ARRAY_SIZE(clear) && r == 0; i++) {
        sqlite3_stmt *st;
        if ((r = store_stmt(s, clear[i], &st, err)) == 0) {
            sqlite3_bind_text(st, 1, f->build_id, -1, SQLITE_STATIC);
            r = store_step_done(s, st, "replacing a symbol file", err);
        }
    }
    int64_t size = 0, nchunks = 0;
    if (r == 0)
        r = put_chunks(s, f, fd, path, &size, &nchunks, err);
    close(fd);
    sqlite3_stmt *st;
    if (r == 0 && (r = store_stmt(s, STMT_SYMFILE_LIST_PUT, &st, err)) == 0) {
        sqlite3_bind_text(st, 1, f->build_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, f->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, size);
        sqlite3_bind_int64(st, 4, f->has_debug ? 1 : 0);
        sqlite3_bind_int64(st, 5, nchunks);
        sqlite3_bind_int64(st, 6, f->added_at ? f->added_at : hp_wall_ms());
        r = store_step_done(s, st, "listing a symbol file", err);
    }
    return r;
}

int store_symfiles_list(struct store *s, int (*cb)(const struct store_symfile *f, void *ctx),
                        void *ctx, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SYMFILE_LIST, &st, err);
    while (r == 0 && (r = store_step_row(s, st, "listing symbol files", err)) == 1) {
        char bid[2 * 64 + 1], name[256];
        store_col_text(st, 0, bid, sizeof(bid));
        store_col_text(st, 1, name, sizeof(name));
        struct store_symfile f = {
            .build_id = bid,
            .name = name,
            .size = sqlite3_column_int64(st, 2),
            .has_debug = sqlite3_column_int64(st, 3) != 0,
            .added_at = sqlite3_column_int64(st, 5),
        };
        r = cb(&f, ctx) != 0 ? 1 : 0;
    }
    if (r == 1) /* stopped by cb */
        r = 0;
    sqlite3_reset(st);
    return r;
}

static int write_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return HP_ERR(errno);
        p = (const char *)p + w;
        n -= (size_t)w;
    }
    return 0;
}

int store_symfile_export(struct store *s, const struct store_symfile *f, int fd,
                         struct hp_buf *err)
{
    int64_t done = 0;
    int r = 0;
    for (int64_t seq = 0; done < f->size && r == 0; seq++) {
        sqlite3_stmt *st;
        if ((r = store_stmt(s, STMT_SYMFILE_CHUNK_GET, &st, err)) < 0)
            break;
        sqlite3_bind_text(st, 1, f->build_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, seq);
        if ((r = store_step_row(s, st, "reading a symbol file", err)) < 0)
            break;
        if (r == 0) {
            hp_err_printf(err, "%s: symbol file %s (%s): chunk %lld is missing (%lld of %lld "
                               "bytes stored); upload it again with query symbols add",
                          s->path, f->build_id, f->name, (long long)seq, (long long)done,
                          (long long)f->size);
            r = HP_ECORRUPT;
            break;
        }
        int64_t size = sqlite3_column_int64(st, 0);
        const void *z = sqlite3_column_blob(st, 1);
        size_t zlen = (size_t)sqlite3_column_bytes(st, 1);
        void *out = NULL;
        r = 0;
        if (size <= 0 || size > SYMFILE_CHUNK || done + size > f->size) {
            hp_err_printf(err, "%s: symbol file %s (%s): chunk %lld says %lld bytes, expected "
                               "at most %lld", s->path, f->build_id, f->name, (long long)seq,
                          (long long)size, (long long)HP_MIN(f->size - done, SYMFILE_CHUNK));
            r = HP_ECORRUPT;
        } else if ((r = store_zstd_decompress(s, z, zlen, NULL, 0, (size_t)size, &out, err)) ==
                   0) {
            if ((r = write_all(fd, out, (size_t)size)) < 0)
                hp_err_printf(err, "writing symbol file %s: %s", f->build_id, hp_strerror(r));
            done += size;
        }
        free(out);
        sqlite3_reset(st);
    }
    return r;
}
