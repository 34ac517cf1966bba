/* symcache.c: the symbolizer's persistent cache, (build-id, address) ->
 * frames, so symbols resolved once survive restarts and are shared by every
 * node running the same binary. Frames are packed self-contained (strings
 * inline) so a cache row never depends on the profile tables. */
#include "store/store-internal.h"

#include <string.h>

int store_symcache_get(struct store *s, const char *build_id, uint64_t address,
                       struct hp_arena *arena, struct profile_frame **ret_frames,
                       uint32_t *ret_n, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SYMCACHE_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(st, 1, build_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)address);
    if ((r = store_step_row(s, st, "reading the symbol cache", err)) <= 0)
        return r;
    struct store_unpack u = store_unpack_column(st, 0);
    uint64_t n = store_unpack_u64(&u);
    if (u.bad || n > (uint64_t)(u.end - u.p) || n > UINT32_MAX) {
        sqlite3_reset(st);
        hp_err_printf(err, "%s: symbol cache entry %s+%llx does not decode", s->path, build_id,
                      (unsigned long long)address);
        return HP_ECORRUPT;
    }
    struct profile_frame *f = hp_arena_alloc(arena, (n ? n : 1) * sizeof(*f));
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        const char *fn = store_unpack_str(&u, &len);
        f[i].function = len ? hp_arena_strndup(arena, fn, len) : NULL;
        const char *file = store_unpack_str(&u, &len);
        f[i].file = len ? hp_arena_strndup(arena, file, len) : NULL;
        f[i].line = (uint32_t)store_unpack_u64(&u);
    }
    bool bad = u.bad || u.p != u.end;
    sqlite3_reset(st);
    if (bad) {
        hp_err_printf(err, "%s: symbol cache entry %s+%llx does not decode", s->path, build_id,
                      (unsigned long long)address);
        return HP_ECORRUPT;
    }
    *ret_frames = f;
    *ret_n = (uint32_t)n;
    return 1;
}

int store_symcache_put(struct store *s, const char *build_id, uint64_t address,
                       const struct profile_frame *frames, uint32_t n, struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "writing the symbol cache", err)) < 0)
        return r;
    if (!build_id || !*build_id) {
        hp_err_printf(err, "%s: symbol cache entries need a build-id", s->path);
        return HP_EUSAGE;
    }
    struct store_pack b = { 0 };
    store_pack_u64(&b, n);
    for (uint32_t i = 0; i < n; i++) {
        store_pack_str(&b, frames[i].function);
        store_pack_str(&b, frames[i].file);
        store_pack_u64(&b, frames[i].line);
    }
    sqlite3_stmt *st;
    if ((r = store_stmt(s, STMT_SYMCACHE_PUT, &st, err)) == 0) {
        sqlite3_bind_text(st, 1, build_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (int64_t)address);
        sqlite3_bind_blob(st, 3, b.data, (int)b.len, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, hp_wall_ms());
        r = store_step_done(s, st, "writing the symbol cache", err);
    }
    store_pack_release(&b);
    return r;
}
