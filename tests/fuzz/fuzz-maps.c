/* Fuzz target: one /proc/<pid>/maps line (ingest_maps_line). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ingest/ingest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = malloc(size + 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    struct profile_mapping m;
    if (ingest_maps_line(line, size, &m) == 1) {
        if (m.limit < m.start || strlen(m.path) > size)
            abort();
    }
    free(line);
    return 0;
}
