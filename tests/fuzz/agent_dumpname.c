/* libFuzzer target: ingest_dumpname_parse() on arbitrary file names. Checks
 * the parser's promises: a prefix inside the name, pid/seq either -1 or
 * non-negative, and nothing but single path components accepted. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ingest_dumpname d;
    const char *name = (const char *)data;
    if (ingest_dumpname_parse(name, size, &d) == 1) {
        assert(size > 0 && size <= AGENT_NAME_MAX);
        assert(d.prefix_len <= size);
        assert(!memchr(name, '/', size) && !memchr(name, '\0', size));
        assert(name[0] != '.');
        for (size_t i = 0; i < size; i++)
            assert(data[i] >= 0x20 && data[i] <= 0x7e);
        assert(d.pid >= -1 && d.seq >= -1 && d.trigger_seq >= -1);
        (void)ingest_dump_kind_name(d.kind);
        (void)ingest_dump_trigger_name(d.trigger);
    }
    return 0;
}
