/* Fuzz target: what a node may answer the symbolizer's remote lookups with:
 * a gperftools /pprof/symbol answer ("0xADDR name" lines) and an agent's
 * /identity JSON. The first byte picks the parser. Nothing may crash, hang
 * or leak; every name handed out must lie inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sym/sym-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct span {
    const char *lo, *hi;
    size_t n;
};

static void cb(void *ctx, uint64_t addr, const char *name, size_t len)
{
    struct span *s = ctx;
    (void)addr;
    if (name < s->lo || name + len > s->hi || len == 0 || len > 4096)
        abort();
    s->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *b = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        char id[2 * SYM_BUILD_ID_MAX + 1];
        int r = sym_agent_identity_parse(b, n, id);
        if (r == 0 && strlen(id) < 2)
            abort();
    } else {
        struct span s = { b, b + n, 0 };
        sym_pprof_symbol_parse(b, n, cb, &s);
    }
    return 0;
}
