/* libFuzzer target for the two text parsers of query/discrepancy.c: the
 * discrepancy rules format (query_rules_parse, on top of the built-in rules)
 * and node figures (query_figures_parse: Prometheus, bvar, "name value").
 * The first byte picks the parser (and, for rules, which kind's built-in
 * rules lie beneath); the rest is the input. With a parsed rule set, a
 * report is built over an empty folded profile and the figures and rendered
 * as text and JSON (the "why" sentences), so evaluation of whatever the
 * rules say runs too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct hp_buf err = HP_BUF_INIT(4096);
    struct hp_arena arena;
    hp_arena_init(&arena);
    if (data[0] & 1) {
        struct query_figure *figs = NULL;
        size_t n = 0;
        if (query_figures_parse(text, len, "fuzz", &arena, &figs, &n, &err) == 0) {
            double v;
            for (size_t i = 0; i < n; i++)
                (void)query_figure_find(figs, n, figs[i].name, &v);
        }
    } else {
        static const char *const kinds[] = { NULL, "doris", "starrocks", "databend",
                                             "risingwave" };
        struct query_rules *r = NULL;
        if (query_rules_for_kind(kinds[(data[0] >> 1) % 5], NULL, 0, &r, &err) == 0) {
            if (query_rules_parse(r, text, len, "fuzz", &err) == 0) {
                struct profile *p = profile_new(PROFILE_FORMAT_COLLAPSED);
                struct query_opts o;
                query_opts_init(&o);
                struct query_folded *f = NULL;
                struct query_figure fig[] = { { "memory_query_trackers_sum_bytes", 0 },
                                              { "process_rss_bytes", 1e9 } };
                if (query_fold(p, &o, &f, &err) == 0) {
                    struct query_discrepancy *d = NULL;
                    if (query_discrepancy_build(f, fig, 2, r, &d, &err) == 0) {
                        struct hp_buf out = HP_BUF_INIT(0);
                        (void)query_render_discrepancy_text(d, "fuzz", &out);
                        (void)query_render_discrepancy_json(d, "fuzz", &out);
                        hp_buf_release(&out);
                        query_discrepancy_free(d);
                    }
                    query_folded_free(f);
                }
                profile_free(p);
            }
            query_rules_free(r);
        }
    }
    hp_arena_release(&arena);
    hp_buf_release(&err);
    return 0;
}
