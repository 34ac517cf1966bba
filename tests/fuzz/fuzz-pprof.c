/* Fuzz target: the pprof profile.proto reader through ingest_parse, gzipped
 * or not (the driver detects both), with small limits so a run stays fast.
 * Whatever parses is folded and rendered by every renderer that reads a
 * profile (top, collapsed, pprof, SVG, dot), so the query layer sees what
 * the reader accepts: names that are not UTF-8, odd mappings, empty stacks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = 1 << 20;
    lim.max_frames = 256;
    lim.max_stacks = 1 << 14;
    lim.max_mappings = 1024;
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = ingest_parse(data, size, &lim, &p, &err);
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
            hp_buf_reset(&out);
            (void)query_render_svg(f, &o, &out);
            hp_buf_reset(&out);
            (void)query_render_dot(f, t, &o, &out);
            hp_buf_reset(&out);
            if (query_render_pprof(p, &o, &out, NULL) == 0) {
                /* Our own output must read back. */
                struct profile *q = NULL;
                struct hp_buf e2 = HP_BUF_INIT(0);
                if (ingest_parse(out.data, out.len, NULL, &q, &e2) < 0 && p->nsamples)
                    abort();
                profile_free(q);
                hp_buf_release(&e2);
            }
            hp_buf_release(&out);
        }
        query_top_free(t);
        query_folded_free(f);
        profile_free(p);
    }
    hp_buf_release(&err);
    return 0;
}
