/* pack.c: the store's compact encodings. Varints (LEB128, signed values
 * zigzagged) for the packed columns, zstd for blobs, optionally compressed
 * against a base (packed blobs: the base is a zstd prefix; raw dumps: a line
 * delta of the base, ldelta.c, so a dump that differs little from its
 * node's previous one costs a few kilobytes), and the content hash that
 * addresses raw dumps.
 *
 * Decoders never trust stored bytes: a read past the end sets `bad`, and
 * decompression must produce exactly the recorded size. */
/* For ZSTD_c_literalCompressionMode (store_zstd_compress_hot): zstd.h
 * shows its experimental parameters only so. They are set through the
 * stable ZSTD_CCtx_setParameter, which refuses one a library does not know
 * (then the blob is compressed as any other). */
#define ZSTD_STATIC_LINKING_ONLY
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

/* Large enough for any base + dump we delta-compress (see write.c); the
 * decoder is allowed the same window. */
#define STORE_ZSTD_WINDOW_LOG_MAX 27
/* From this much base + data on, deltas use the fast level (below). */
#define STORE_ZSTD_FAST_BYTES ((size_t)1 << 20)

void store_pack_release(struct store_pack *b)
{
    free(b->data);
    *b = (struct store_pack){ 0 };
}

void store_pack_reserve(struct store_pack *b, size_t n)
{
    if (b->len + n > b->cap)
        b->data = hp_xgrow(b->data, &b->cap, b->len + n, 1);
}

void store_pack_bytes(struct store_pack *b, const void *data, size_t n)
{
    store_pack_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
}

void store_pack_str(struct store_pack *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    store_pack_u64(b, n);
    store_pack_bytes(b, s, n);
}

struct store_unpack store_unpack_column(sqlite3_stmt *st, int col)
{
    static const unsigned char none[1];
    const unsigned char *p = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);
    if (!p || n <= 0)
        return (struct store_unpack){ none, none, false };
    return (struct store_unpack){ p, p + n, false };
}

const char *store_unpack_str(struct store_unpack *u, size_t *ret_len)
{
    uint64_t n = store_unpack_u64(u);
    if (u->bad || n > (uint64_t)(u->end - u->p)) {
        u->bad = true;
        *ret_len = 0;
        return "";
    }
    const char *s = (const char *)u->p;
    u->p += n;
    *ret_len = (size_t)n;
    return s;
}

static unsigned window_log_for(size_t n)
{
    unsigned lg = 10; /* ZSTD_WINDOWLOG_MIN, which zstd.h keeps for static linking */
    while (lg < STORE_ZSTD_WINDOW_LOG_MAX && ((size_t)1 << lg) < n)
        lg++;
    return lg;
}

static int compress_ctx(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                        const void *base, size_t base_len, bool text, bool plain_literals,
                        int level,
                        const struct store_lines *base_lines, struct store_lines *ret_lines,
                        struct store_zbuf *reuse, void **ret, size_t *ret_len,
                        struct hp_buf *err);

static ZSTD_CCtx *cctx_of(struct store *s)
{
    if (!s->cctx)
        s->cctx = ZSTD_createCCtx();
    if (!s->cctx)
        abort();
    return s->cctx;
}

int store_zstd_compress(struct store *s, const void *src, size_t len, const void *base,
                        size_t base_len, bool text, void **ret, size_t *ret_len,
                        struct hp_buf *err)
{
    return compress_ctx(cctx_of(s), s->path, src, len, base, base_len, text, false, 0, NULL, NULL,
                        NULL, ret, ret_len, err);
}

int store_zstd_compress_hot(struct store *s, const void *src, size_t len, void **ret,
                            size_t *ret_len, struct hp_buf *err)
{
    return compress_ctx(cctx_of(s), s->path, src, len, NULL, 0, false, true, 0, NULL, NULL, NULL,
                        ret, ret_len, err);
}

void *store_zbuf_reserve(struct store_zbuf *b, size_t n)
{
    if (b->cap < n) {
        free(b->data);
        b->data = hp_xmalloc(n ? n : 1);
        b->cap = n;
    }
    return b->data;
}

int store_zstd_compress_with(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                             const void *base, size_t base_len, bool text, int level,
                             struct store_zbuf *reuse, void **ret, size_t *ret_len,
                             struct hp_buf *err)
{
    return compress_ctx(c, path, src, len, base, base_len, text, false, level, NULL, NULL, reuse,
                        ret, ret_len, err);
}

int store_text_compress_with(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                             const void *base, size_t base_len,
                             const struct store_lines *base_lines, struct store_lines *ret_lines,
                             struct store_zbuf *reuse, void **ret, size_t *ret_len,
                             struct hp_buf *err)
{
    return compress_ctx(c, path, src, len, base, base_len, true, false, 0, base_lines, ret_lines,
                        reuse, ret, ret_len, err);
}

static int compress_ctx(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                        const void *base, size_t base_len, bool text, bool plain_literals,
                        int level,
                        const struct store_lines *base_lines, struct store_lines *ret_lines,
                        struct store_zbuf *reuse, void **ret, size_t *ret_len,
                        struct hp_buf *err)
{
    /* Text against a base: a line delta (ldelta.c), unless its lines are
     * too many and short for one. */
    if (text && base && base_len) {
        int r = store_ldelta_encode(c, path, src, len, base, base_len, base_lines, ret_lines,
                                    reuse, ret, ret_len, err);
        if (r != 0)
            return r < 0 ? r : 0;
    }
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    /* Here: packed blobs, and text whose lines are too short for a line
     * delta. Against a base of megabytes: level 1 with long-distance matching (a
     * dump mostly repeats its base megabytes back; measured on 4.4 MB dumps,
     * level 3 gives the same size 25% slower). Smaller blobs (packed
     * function totals, ~65 KB of varints where most values move a little
     * each hour) and standalone keyframes: level 3 (a 65 KB rest against
     * the previous one: 30.8 KB at level 1, 25.2 KB at level 3). */
    bool big = base && base_len && base_len + len >= STORE_ZSTD_FAST_BYTES;
    size_t zr = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level ? level : big ? 1 : 3);
    /* Blobs read on hot paths (store_zstd_compress_hot): literals stored
     * as they are, not Huffman-coded, about a tenth more bytes for the
     * leaks bench's stack series (13.9 -> 15.6 MB) and views (18.6 -> 20.5
     * MB), decoded about a sixth faster (decompressing them was 13% of
     * `query leaks --db`). An unknown parameter is no error. */
    if (!ZSTD_isError(zr) && plain_literals)
        (void)ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    if (base && base_len) {
        unsigned wlog = window_log_for(base_len + len);
        if (!ZSTD_isError(zr))
            zr = ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, (int)wlog);
        /* Long-distance matching finds a dump's lines in its base although
         * they moved by the bytes a number gained or lost (a raw dump of
         * 111 KB: 463 bytes against 1,475 without). Packed blobs under a
         * megabyte do not need it: level 3 finds their matches itself, and
         * LDM's hashing of base and data doubled their time (a 131 KB sample
         * set: 0.41 ms with it, 0.19 ms and 2% smaller without). Its table
         * at half zstd's default size (2^(windowLog - 8) buckets) makes a
         * 4.4 MB dump's delta 10% faster (7.2 -> 6.5 ms) and 4% bigger
         * (22.9 -> 23.9 KB); smaller tables cost more than they save. */
        if (text || big) {
            if (!ZSTD_isError(zr))
                zr = ZSTD_CCtx_setParameter(c, ZSTD_c_enableLongDistanceMatching, 1);
            if (!ZSTD_isError(zr) && wlog >= 14)
                zr = ZSTD_CCtx_setParameter(c, ZSTD_c_ldmHashLog, (int)wlog - 8);
        }
        if (!ZSTD_isError(zr))
            zr = ZSTD_CCtx_refPrefix(c, base, base_len);
    }
    size_t bound = ZSTD_compressBound(len);
    void *out;
    if (reuse) {
        out = store_zbuf_reserve(reuse, bound);
    } else {
        out = hp_xmalloc(bound ? bound : 1);
    }
    if (!ZSTD_isError(zr))
        zr = ZSTD_compress2(c, out, bound, src, len);
    if (ZSTD_isError(zr)) {
        hp_err_printf(err, "%s: compressing %zu bytes: %s", path, len, ZSTD_getErrorName(zr));
        if (!reuse)
            free(out);
        return HP_ESTORE;
    }
    *ret = out;
    *ret_len = zr;
    return 0;
}

/* The store's decompression context, reset, with the window our blobs may
 * use; *ret_zr: setting it (an error code, if it failed). */
static ZSTD_DCtx *dctx_ready(struct store *s, size_t *ret_zr)
{
    if (!s->dctx)
        s->dctx = ZSTD_createDCtx();
    if (!s->dctx)
        abort();
    ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_and_parameters);
    *ret_zr = ZSTD_DCtx_setParameter(s->dctx, ZSTD_d_windowLogMax, STORE_ZSTD_WINDOW_LOG_MAX);
    return s->dctx;
}

int store_zstd_decompress(struct store *s, const void *src, size_t len, const void *base,
                          size_t base_len, size_t size, void **ret, struct hp_buf *err)
{
    if (base && base_len && store_ldelta_is(src, len))
        return store_ldelta_decode(s, src, len, base, base_len, size, ret, err);
    size_t zr;
    ZSTD_DCtx *d = dctx_ready(s, &zr);
    if (!ZSTD_isError(zr) && base && base_len)
        zr = ZSTD_DCtx_refPrefix(d, base, base_len);
    unsigned long long content = ZSTD_getFrameContentSize(src, len);
    if (content != size) {
        hp_err_printf(err, "%s: stored blob says %llu bytes, expected %zu", s->path, content,
                      size);
        return HP_ECORRUPT;
    }
    void *out = hp_xmalloc(size ? size : 1);
    if (!ZSTD_isError(zr))
        zr = ZSTD_decompressDCtx(d, out, size, src, len);
    if (ZSTD_isError(zr) || zr != size) {
        hp_err_printf(err, "%s: decompressing a stored blob: %s", s->path,
                      ZSTD_isError(zr) ? ZSTD_getErrorName(zr) : "short output");
        free(out);
        return HP_ECORRUPT;
    }
    *ret = out;
    return 0;
}

int store_zstd_decompress_prefix(struct store *s, const void *src, size_t len, void *out,
                                 size_t cap, size_t *ret_n)
{
    size_t zr;
    ZSTD_DCtx *d = dctx_ready(s, &zr);
    ZSTD_outBuffer o = { out, cap, 0 };
    ZSTD_inBuffer in = { src, len, 0 };
    /* Block by block until the output is full or the frame ends. */
    while (!ZSTD_isError(zr) && o.pos < o.size) {
        size_t before = in.pos, made = o.pos;
        zr = ZSTD_decompressStream(d, &o, &in);
        if (!ZSTD_isError(zr) && (zr == 0 || (in.pos == before && o.pos == made)))
            break; /* the frame's end, or its bytes' (a cut frame makes no progress) */
    }
    ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
    *ret_n = o.pos;
    return ZSTD_isError(zr) ? HP_ECORRUPT : 0;
}

/* A match of either key is confirmed byte by byte before a row is shared
 * (write.c), so a collision costs a comparison, never a wrong dump, and one
 * pass over megabytes is what we pay: hp_hash_bytes_wide's four chains
 * take 0.44 ms on a 4.4 MB dump where hp_hash_bytes' one took 1.24 (a
 * twentieth of a steady 20k-stack snapshot's ingest). */
static void content_key(uint64_t h, uint64_t len, unsigned char ret[16])
{
    for (int i = 0; i < 8; i++) {
        ret[i] = (unsigned char)(h >> (8 * i));
        ret[8 + i] = (unsigned char)(len >> (8 * i));
    }
}

void store_content_hash(const void *data, size_t len, unsigned char ret[16])
{
    content_key(hp_hash_bytes_wide(data, len, UINT64_C(0x9e3779b97f4a7c15)),
                (uint64_t)len | STORE_RAW_KEY_V2, ret);
}

void store_content_hash_v1(const void *data, size_t len, unsigned char ret[16])
{
    content_key(hp_hash_bytes(data, len, UINT64_C(0x9e3779b97f4a7c15)), (uint64_t)len, ret);
}
