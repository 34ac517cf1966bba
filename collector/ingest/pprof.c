/* pprof profile.proto reader: placeholder until the protobuf-c reader lands. */
#include "collector/ingest/ingest-internal.h"

int ingest__pprof_parse(struct ingest_parser *ps, const uint8_t *data, size_t len,
                        struct hp_buf *err)
{
    return ingest__error(ps, err, HP_EFORMAT, "pprof protobuf input is not supported yet");
}
