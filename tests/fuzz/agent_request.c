/* libFuzzer target: the agent's request-line pieces. The input is split at
 * the first '?' into a raw path (agent_route_match) and a query string
 * (agent_query_get for every key the agent reads). Checks that a decoded
 * value never holds a NUL byte and always fits the output buffer. The
 * whole input is also read as a Range header (agent_range_parse) for a few
 * file sizes: a range it accepts lies inside the file and is not empty. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    static const uint64_t sizes[] = { 0, 1, 4096, UINT64_MAX };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t first, end;
        if (agent_range_parse(s, size, sizes[k], &first, &end) == 1)
            assert(first < end && end <= sizes[k]);
    }
    const char *q = memchr(s, '?', size);
    size_t plen = q ? (size_t)(q - s) : size;
    char id[AGENT_BUILD_ID_HEX_MAX + 1];
    enum agent_route r = agent_route_match(s, plen, id);
    if (r == AGENT_ROUTE_BUILDID_EXEC || r == AGENT_ROUTE_BUILDID_DEBUG)
        assert(strlen(id) >= 4 && strlen(id) <= AGENT_BUILD_ID_HEX_MAX);
    if (!q)
        return 0;
    static const char *const keys[] = { "name", "path", "prefix" };
    char out[AGENT_QUERY_MAX + 1];
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        size_t n = 0;
        int rc = agent_query_get(q + 1, size - plen - 1, keys[k], out, sizeof(out), &n);
        if (rc == 1) {
            assert(n < sizeof(out));
            assert(strlen(out) == n);
        }
    }
    /* A tiny output buffer exercises the HP_ETOOBIG path. */
    char small[4];
    size_t n;
    if (agent_query_get(q + 1, size - plen - 1, "name", small, sizeof(small), &n) == 1)
        assert(n < sizeof(small));
    return 0;
}
