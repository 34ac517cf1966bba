/* Fuzz target: the symbolizer's on-disk cache file (collector/sym/symcache.c),
 * which another process, a full disk or a person may have left truncated or
 * damaged. Nothing may crash or read outside the input; when the checker
 * accepts a file, every entry must read back inside it, in order. The
 * checksum makes random inputs fail early, so the first byte, when it is
 * '!', asks for the checksum to be fixed up first: mutations then reach the
 * structural checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sym/sym-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t n = size - 1;
    unsigned char *b = malloc(n ? n : 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, n);
    if (data[0] == '!' && n >= 48) {
        uint64_t h = hp_hash_bytes(b + 48, n - 48, UINT64_C(0x6866737963616368));
        for (int i = 0; i < 8; i++)
            b[32 + i] = (unsigned char)(h >> (8 * i));
    }
    struct sym_cache_image im;
    if (sym_cache_image_parse(b, n, NULL, &im, NULL) == 0) {
        struct profile_frame fr[SYM_MAX_INLINE_DEPTH];
        const char *lo = (const char *)b, *hi = lo + n;
        for (size_t i = 0; i < im.nentries; i++) {
            if (i && sym_cache_image_vaddr(&im, i) <= sym_cache_image_vaddr(&im, i - 1))
                abort();
            uint32_t k = sym_cache_image_get(&im, i, fr);
            if (k > SYM_MAX_INLINE_DEPTH)
                abort();
            for (uint32_t j = 0; j < k; j++) {
                const char *s[2] = { fr[j].function, fr[j].file };
                for (int q = 0; q < 2; q++)
                    if (s[q] && (s[q] < lo || s[q] + strlen(s[q]) >= hi))
                        abort();
            }
        }
    }
    free(b);
    return 0;
}
