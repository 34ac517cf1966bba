/* Fuzz target for the raw dumps' line deltas (store/ldelta.c). Byte 0
 * picks the mode, bytes 1-2 (little-endian, modulo what is left) the length
 * of the base, which comes next; the rest is:
 *   even mode: text, encoded against the base as the writer does, then
 *     decoded: it must read back byte for byte; the lines the encoding
 *     gives (store_ldelta_encode) must be the text's as store_lines_of
 *     splits it, and with the base's lines as an encoding of the base
 *     gave them the text must encode to the same bytes;
 *   odd mode: a line delta's payload, zstd-compressed here as the writer
 *     does, decoded against the base to the size bytes 3-4 give (a stored
 *     row from a corrupted or hostile database): an error or exactly that
 *     many bytes, never a crash or a read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct store st = { .path = "fuzz.db" };
static ZSTD_CCtx *cctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    if (!cctx)
        cctx = ZSTD_createCCtx();
    int mode = data[0] & 1;
    size_t rest = size - 5;
    size_t blen = ((size_t)data[1] | (size_t)data[2] << 8) % (rest + 1);
    size_t want = (size_t)data[3] | (size_t)data[4] << 8;
    const uint8_t *base = data + 5, *tail = base + blen;
    size_t tlen = rest - blen;
    void *z = NULL, *out = NULL;
    size_t zlen = 0;
    if (mode == 0) {
        if (blen == 0)
            return 0;
        struct store_lines got, whole, carried = { 0 };
        if (store_text_compress_with(cctx, st.path, tail, tlen, base, blen, NULL, &got, NULL, &z,
                                     &zlen, NULL) < 0)
            abort();
        if (store_zstd_decompress(&st, z, zlen, base, blen, tlen, &out, NULL) < 0 ||
            (tlen && memcmp(out, tail, tlen) != 0))
            abort();
        bool split = store_lines_of(tail, tlen, &whole);
        if (got.known && (!split || got.n != whole.n || got.len != tlen ||
                          memcmp(got.off, whole.off, ((size_t)got.n + 1) * sizeof(*got.off)) ||
                          (got.n && memcmp(got.hash, whole.hash, got.n * sizeof(*got.hash)))))
            abort();
        void *zb = NULL, *z2 = NULL;
        size_t zblen, z2len;
        if (store_ldelta_is(z, zlen) &&
            store_ldelta_encode(cctx, st.path, base, blen, tail, tlen, NULL, &carried, NULL, &zb,
                                &zblen, NULL) == 1 &&
            carried.known) {
            if (store_ldelta_encode(cctx, st.path, tail, tlen, base, blen, &carried, NULL, NULL,
                                    &z2, &z2len, NULL) != 1 ||
                z2len != zlen || memcmp(z2, z, zlen) != 0)
                abort();
        }
        free(zb);
        free(z2);
        store_lines_release(&got);
        store_lines_release(&whole);
        store_lines_release(&carried);
    } else {
        size_t bound = 4 + ZSTD_compressBound(tlen);
        unsigned char *d = malloc(bound);
        memcpy(d, "HFL\x01", 4);
        size_t zr = ZSTD_compressCCtx(cctx, d + 4, bound - 4, tail, tlen, 1);
        if (ZSTD_isError(zr))
            abort();
        if (store_ldelta_decode(&st, d, 4 + zr, blen ? base : NULL, blen, want, &out, NULL) == 0 &&
            want)
            ((volatile unsigned char *)out)[want - 1]; /* all of it is there */
        free(d);
    }
    free(z);
    free(out);
    return 0;
}
