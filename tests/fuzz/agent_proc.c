/* libFuzzer target: /proc/<pid>/status and smaps_rollup text
 * (agent_proc_parse), /proc/<pid>/stat with /proc/stat's btime
 * (agent_proc_start_time) and MAPPED_LIBRARIES sections (agent_maps_paths). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int path_cb(const char *path, void *arg)
{
    size_t *n = arg;
    assert(path[0] == '/');
    (*n)++;
    return *n > 10000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_proc_fields p;
    agent_proc_parse((const char *)data, size, &p);
    assert(p.n <= AGENT_PROC_FIELDS_MAX);
    for (size_t i = 0; i < p.n; i++)
        assert(strlen(p.f[i].key) > 0 && strlen(p.f[i].key) < sizeof(p.f[i].key));
    assert(strlen(p.name) < sizeof(p.name));
    double start;
    (void)agent_proc_start_time((const char *)data, size, (const char *)data, size, 100, &start);
    size_t n = 0;
    agent_maps_paths((const char *)data, size, path_cb, &n);
    return 0;
}
