/* Fuzz target: the profile parsers through ingest (format detection,
 * streaming, every text reader, pprof). The first byte chooses where the
 * input is split into two feeds, so line assembly across chunks is covered;
 * FUZZ_FORMAT (set per target at build time) prepends a header that steers
 * the input into one reader. Parsed profiles are folded and rendered so the
 * query layer sees whatever the parsers accept. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"

#ifndef FUZZ_PREFIX
#define FUZZ_PREFIX ""
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = 1 << 20;
    lim.max_line = 1 << 16;
    lim.max_frames = 256;
    lim.max_stacks = 1 << 14;
    lim.max_mappings = 1024;
    lim.max_threads = 1024;
    size_t split = size ? data[0] % (size + 1) : 0;
    struct ingest_parser *ps = ingest_parser_new(&lim);
    struct hp_buf err = HP_BUF_INIT(0);
    int r = 0;
    const char *prefix = FUZZ_PREFIX;
    size_t plen = strlen(prefix);
    if (plen && !(size >= plen && memcmp(data, prefix, plen) == 0))
        r = ingest_parser_feed(ps, prefix, plen, &err);
    if (r == 0)
        r = ingest_parser_feed(ps, data, split, &err);
    if (r == 0)
        r = ingest_parser_feed(ps, data + split, size - split, &err);
    struct profile *p = NULL;
    if (r == 0)
        r = ingest_parser_finish(ps, &p, &err);
    ingest_parser_free(ps);
    if (r < 0 && (!err.data || !err.len))
        abort(); /* every failure must say why */
    if (p) {
        struct query_opts o;
        query_opts_init(&o);
        struct query_folded *f = NULL;
        struct query_top *t = NULL;
        if (query_fold(p, &o, &f, NULL) == 0 && query_top_build(f, o.sample, &t) == 0) {
            struct hp_buf out = HP_BUF_INIT(0);
            (void)query_render_collapsed(f, &o, &out);
            (void)query_render_json(p, f, t, &o, &out);
            hp_buf_release(&out);
        }
        query_top_free(t);
        query_folded_free(f);
        profile_free(p);
    }
    hp_buf_release(&err);
    return 0;
}
