/* query discrepancy: tracker figures built from a real dump's own paths,
 * with one path deliberately left out, must be reported as an under-count
 * naming that path; the ladder names its gaps; rules and figures parse with
 * clear errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/query/qtest.h"

struct fx {
    char *dir;
    struct profile *p;
    struct query_folded *f;
    double query, cache, leak; /* heap bytes of the fixture's paths */
};

static double bytes_through(const struct query_folded *f, const char *name)
{
    double sum = 0;
    for (size_t i = 0; i < f->nentries; i++) {
        const char *const *names = query_fold_frames(f, &f->entries[i]);
        for (uint32_t k = 0; k < f->entries[i].n; k++)
            if (strcmp(names[k], name) == 0) {
                sum += f->entries[i].value[PV_INUSE_SPACE];
                break;
            }
    }
    return sum;
}

static int setup(void **state)
{
    struct fx *s = hp_xcalloc(1, sizeof(*s));
    s->dir = qt_tmpdir();
    const char *dumps[] = { "d.heap" };
    const char *args[] = { "--threads", "6", "--scale", "32", NULL };
    assert_int_equal(qt_jefixture_run(s->dir, 0, args, dumps, 1), 0);
    char *path = qt_path(s->dir, "d.heap");
    s->p = qt_parse(path);
    free(path);
    assert_true(qt_symbolize(s->p, qt_jefixture()) > 0);
    s->f = qt_fold(s->p);
    /* scan_operator_next is a tail call of query_execute: its stacks skip
     * query_execute's frame. */
    s->query = bytes_through(s->f, "agg_hash_table_resize") +
               bytes_through(s->f, "scan_operator_next");
    s->cache = bytes_through(s->f, "segment_cache_insert");
    s->leak = bytes_through(s->f, "leak_tablet_schema");
    assert_true(s->query > 0 && s->cache > 0 && s->leak > 1e6);
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    struct fx *s = *state;
    query_folded_free(s->f);
    profile_free(s->p);
    qt_tmpdir_remove(s->dir);
    free(s);
    return 0;
}

static struct query_discrepancy *report(struct fx *s, const struct query_figure *figs, size_t n,
                                        const char *rules_text)
{
    struct query_rules *rules = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_rules_builtin(&rules, &err), 0);
    if (rules_text && query_rules_parse(rules, rules_text, strlen(rules_text), "test.rules",
                                        &err) < 0)
        fail_msg("rules: %.*s", (int)err.len, err.data);
    struct query_discrepancy *d = NULL;
    assert_int_equal(query_discrepancy_build(s->f, figs, n, rules, &d, &err), 0);
    query_rules_free(rules);
    hp_buf_release(&err);
    return d;
}

static struct query_discrepancy *report_kind(struct fx *s, const char *kind,
                                             const struct query_figure *figs, size_t n,
                                             const char *rules_text)
{
    struct query_rules *rules = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_rules_for_kind(kind, figs, n, &rules, &err), 0);
    if (rules_text && query_rules_parse(rules, rules_text, strlen(rules_text), "test.rules",
                                        &err) < 0)
        fail_msg("rules: %.*s", (int)err.len, err.data);
    struct query_discrepancy *d = NULL;
    assert_int_equal(query_discrepancy_build(s->f, figs, n, rules, &d, &err), 0);
    query_rules_free(rules);
    hp_buf_release(&err);
    return d;
}

/* Each kind's categories come from its own trackers: StarRocks' metadata
 * figure may be the sum of its four metadata trackers, Databend's one query
 * figure judges its pipelines' hash tables, RisingWave's
 * stream_memory_usage its executors; a kind that does not say (agent,
 * url) is told from its figures. A rules file overrides the kind's. */
static void test_discrepancy_rules_per_kind(void **state)
{
    struct fx *s = *state;
    assert_string_equal(query_rules_kind_detect("doris", NULL, 0), "doris");
    assert_null(query_rules_kind_detect("agent", NULL, 0));
    struct query_figure rw[] = { { "stream_memory_usage", s->query } };
    assert_string_equal(query_rules_kind_detect("agent", rw, 1), "risingwave");

    /* StarRocks: the metadata figure summed from its parts. */
    struct query_figure sr[] = {
        { "starrocks_be_tablet_metadata_mem_bytes", s->leak / 2 },
        { "starrocks_be_rowset_metadata_mem_bytes", s->leak / 4 },
        { "starrocks_be_segment_metadata_mem_bytes", s->leak / 8 },
        { "starrocks_be_column_metadata_mem_bytes", s->leak / 8 },
        { "starrocks_be_query_mem_bytes", s->query },
    };
    struct query_discrepancy *d = report_kind(s, NULL, sr, HP_ARRAY_SIZE(sr), NULL);
    assert_string_equal(d->rules_kind, "starrocks");
    const struct query_discrepancy_row *m = query_discrepancy_find(d, "metadata");
    assert_non_null(m);
    assert_true(fabs(m->tracker - s->leak) < 1);
    assert_true(fabs(m->heap - s->leak) < 1);
    assert_int_equal(m->verdict, QUERY_VERDICT_CONSISTENT);
    assert_non_null(query_discrepancy_find(d, "update")); /* StarRocks' own tracker */
    assert_null(query_discrepancy_find(d, "stream"));
    query_discrepancy_free(d);

    /* Databend: one query figure against the hash tables; no metadata
     * category, its caches have no tracker. */
    struct query_figure db[] = { { "databend_query_memory_usage_bytes", s->query * 0.25 } };
    d = report_kind(s, "databend", db, HP_ARRAY_SIZE(db), NULL);
    assert_string_equal(d->rules_kind, "databend");
    assert_null(query_discrepancy_find(d, "metadata"));
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    assert_true(fabs(q->heap - s->query) < 1);
    assert_int_equal(q->verdict, QUERY_VERDICT_UNDER);
    assert_int_equal(query_discrepancy_find(d, "cache")->verdict, QUERY_VERDICT_NO_TRACKER);
    query_discrepancy_free(d);

    /* RisingWave, told from its figures: the stream category. */
    d = report_kind(s, "agent", rw, 1, NULL);
    assert_string_equal(d->rules_kind, "risingwave");
    const struct query_discrepancy_row *st = query_discrepancy_find(d, "stream");
    assert_non_null(st);
    assert_true(fabs(st->heap - bytes_through(s->f, "agg_hash_table_resize")) < 1);
    query_discrepancy_free(d);

    /* A rules file on top of a kind's rules replaces its category. */
    d = report_kind(s, "starrocks", sr, HP_ARRAY_SIZE(sr),
                    "[query]\nmatch = scan_operator_next\ntracker = starrocks_be_query_mem_bytes\n");
    q = query_discrepancy_find(d, "query");
    assert_true(fabs(q->heap - bytes_through(s->f, "scan_operator_next")) < 1);
    query_discrepancy_free(d);
}

static void test_discrepancy_names_the_missed_path(void **state)
{
    struct fx *s = *state;
    /* Doris bvar names; the metadata tracker misses leak_tablet_schema. */
    struct query_figure figs[] = {
        { "memory_query_trackers_sum_bytes", s->query },
        { "memory_cache_trackers_sum_bytes", s->cache },
        { "memory_metadata_trackers_sum_bytes", 0 },
        { "memory_load_trackers_sum_bytes", 0 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    const struct query_discrepancy_row *c = query_discrepancy_find(d, "cache");
    const struct query_discrepancy_row *m = query_discrepancy_find(d, "metadata");
    assert_non_null(q);
    assert_non_null(c);
    assert_non_null(m);
    if (getenv("QT_VERBOSE")) {
        struct hp_buf dbg = HP_BUF_INIT(0);
        assert_int_equal(query_render_discrepancy_text(d, "be-1", &dbg), 0);
        print_message("%.*s", (int)dbg.len, dbg.data);
        hp_buf_release(&dbg);
    }
    assert_true(fabs(q->heap - s->query) < 1);
    assert_int_equal(q->verdict, QUERY_VERDICT_CONSISTENT);
    assert_int_equal(c->verdict, QUERY_VERDICT_CONSISTENT);
    assert_int_equal(m->verdict, QUERY_VERDICT_UNDER);
    assert_true(fabs(m->gap - s->leak) < 1);
    assert_string_equal(m->top_frames[0], "leak_tablet_schema");
    /* Tracked total = sum of the category trackers (no overall figure). */
    assert_true(fabs(d->tracked_total - (s->query + s->cache)) < 1);

    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_discrepancy_text(d, "be-1", &out), 0);
    hp_buf_append(&out, "", 1);
    char *line = strstr(out.data, "\nmetadata");
    assert_non_null(line);
    assert_non_null(strstr(line, "tracker under-counts"));
    assert_non_null(strstr(line, "held in: leak_tablet_schema"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_discrepancy_json(d, "be-1", &out), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    json_t *cats = json_object_get(root, "categories");
    bool named = false;
    for (size_t i = 0; i < json_array_size(cats); i++) {
        json_t *cj = json_array_get(cats, i);
        if (strcmp(json_string_value(json_object_get(cj, "category")), "metadata") == 0) {
            json_t *held = json_array_get(json_object_get(cj, "held_in"), 0);
            named = strcmp(json_string_value(json_object_get(held, "frame")),
                           "leak_tablet_schema") == 0 &&
                    strcmp(json_string_value(json_object_get(cj, "verdict")),
                           "tracker under-counts") == 0;
        }
    }
    assert_true(named);
    json_decref(root);
    hp_buf_release(&out);
    query_discrepancy_free(d);
}

/* Every verdict comes with one sentence saying why, with its figures (the
 * API's "why", which the UI shows), and the report names its snapshot. */
static void test_discrepancy_verdicts_say_why(void **state)
{
    struct fx *s = *state;
    struct query_figure figs[] = {
        { "doris_be_memory_query_trackers_sum_bytes", s->query * 0.3 },
        { "doris_be_memory_cache_trackers_sum_bytes", s->cache },
        { "doris_be_memory_metadata_trackers_sum_bytes", s->leak * 4 },
        { "doris_be_memory_load_trackers_sum_bytes", 0 },
        { "process_rss_bytes", 1 },
        { "doris_be_memory_jemalloc_resident_bytes", 1 << 30 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    d->snap = (struct query_snapref){ .id = 32, .time_ms = 1763888400000 };
    snprintf(d->snap.node, sizeof(d->snap.node), "be-1");
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_discrepancy_text(d, "be-1", &out), 0);
    hp_buf_append(&out, "", 1);
    assert_true(strncmp(out.data, "#32 be-1 at 2025-11-23T09:00:00Z\n", 33) == 0);
    hp_buf_reset(&out);
    assert_int_equal(query_render_discrepancy_json(d, "be-1", &out), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    json_t *snap = json_object_get(root, "snapshot");
    assert_int_equal(json_integer_value(json_object_get(snap, "id")), 32);
    assert_string_equal(json_string_value(json_object_get(snap, "node")), "be-1");
    assert_string_equal(json_string_value(json_object_get(snap, "time")), "2025-11-23T09:00:00Z");
    const struct {
        const char *verdict, *words;
    } want[] = {
        { "tracker under-counts", "more than it says" },
        { "consistent", "so they agree" },
        { "tracker over-counts", "more than the heap shows" },
        { "no tracker figure", "cannot be compared" },
    };
    size_t seen[HP_ARRAY_SIZE(want)] = { 0 };
    json_t *cats = json_object_get(root, "categories");
    for (size_t i = 0; i < json_array_size(cats); i++) {
        json_t *cj = json_array_get(cats, i);
        const char *v = json_string_value(json_object_get(cj, "verdict"));
        const char *why = json_string_value(json_object_get(cj, "why"));
        assert_non_null(why);
        if (strcmp(json_string_value(json_object_get(cj, "category")), "uncategorized") == 0) {
            assert_non_null(strstr(why, "no category"));
            continue;
        }
        for (size_t k = 0; k < HP_ARRAY_SIZE(want); k++)
            if (strcmp(v, want[k].verdict) == 0) {
                assert_non_null(strstr(why, want[k].words));
                seen[k]++;
            }
    }
    for (size_t k = 0; k < HP_ARRAY_SIZE(want); k++)
        assert_true(seen[k] > 0);
    /* The finding and the inconsistent ladder step say why too. */
    json_t *f = json_array_get(json_object_get(root, "findings"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(f, "why")),
                           "query tracker is inaccurate"));
    json_t *lad = json_object_get(root, "ladder");
    bool incons = false;
    for (size_t i = 0; i < json_array_size(lad); i++) {
        json_t *st = json_array_get(lad, i);
        if (json_is_true(json_object_get(st, "inconsistent")))
            incons = strstr(json_string_value(json_object_get(st, "why")),
                            "cannot both be right") != NULL;
    }
    assert_true(incons);
    json_decref(root);
    hp_buf_release(&out);
    query_discrepancy_free(d);
}

static void test_discrepancy_idle_tracker_is_a_possible_leak(void **state)
{
    struct fx *s = *state;
    /* StarRocks names: the query pool says idle while the heap holds the
     * aggregation's blocks. */
    struct query_figure figs[] = {
        { "starrocks_be_query_mem_bytes", 0 },
        { "starrocks_be_metadata_mem_bytes", s->leak },
        { "starrocks_be_process_mem_bytes", s->leak + s->cache },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    assert_int_equal(q->verdict, QUERY_VERDICT_IDLE_LEAK);
    assert_string_equal(q->tracker_name, "starrocks_be_query_mem_bytes");
    const struct query_discrepancy_row *m = query_discrepancy_find(d, "metadata");
    assert_int_equal(m->verdict, QUERY_VERDICT_CONSISTENT);
    assert_true(fabs(m->tracker_share - s->leak / (s->leak + s->cache)) < 1e-9);
    assert_true(fabs(d->tracked_total - (s->leak + s->cache)) < 1);
    query_discrepancy_free(d);
}

/* Doris memory-tracker rows under the names the collector stores them by. */
static void test_discrepancy_reads_collector_tracker_rows(void **state)
{
    struct fx *s = *state;
    struct query_figure figs[] = {
        { "mem_tracker_current_bytes{type=\"overview\",label=\"query\"}", s->query },
        { "mem_tracker_current_bytes{type=\"overview\",label=\"sum of all trackers\"}",
          4 * s->query },
        { "mem_tracker_current_bytes{type=\"overview\",label=\"process resident memory\"}",
          8 * s->query },
        { "proc_jemalloc_allocated", 6 * s->query },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    assert_int_equal(q->verdict, QUERY_VERDICT_CONSISTENT);
    assert_true(fabs(q->tracker_share - 0.25) < 1e-9);
    assert_true(fabs(d->tracked_total - 4 * s->query) < 1);
    assert_true(fabs(d->ladder[0].value - 8 * s->query) < 1); /* rss */
    assert_true(fabs(d->ladder[3].value - 6 * s->query) < 1); /* jemalloc_allocated */
    query_discrepancy_free(d);
}

static void test_discrepancy_ladder_names_gaps(void **state)
{
    struct fx *s = *state;
    double heap = s->f->total[PV_INUSE_SPACE];
    struct query_figure figs[] = {
        { "doris_be_memory_allocated_bytes", heap * 3 }, /* Doris: this one is VmRSS */
        { "doris_be_memory_jemalloc_resident_bytes", heap * 2 },
        { "doris_be_memory_jemalloc_allocated_bytes", heap * 1.25 },
        { "doris_be_memory_jemalloc_metadata_bytes", heap * 0.1 },
        { "memory_all_tracked_sum_bytes", heap * 0.5 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_ladder_step *st = NULL;
    for (size_t i = 0; i < d->nladder; i++)
        if (strcmp(d->ladder[i].name, "heap_profile") == 0)
            st = &d->ladder[i];
    assert_non_null(st);
    assert_true(fabs(st->gap - heap * 0.25) < 1);
    /* This profile records every allocation: no sampling error, only
     * allocations made before profiling was active. */
    assert_true(d->heap_sigma == 0);
    assert_non_null(strstr(st->gap_name, "before profiling was active"));
    assert_non_null(strstr(st->gap_name, "no sampling error"));
    assert_false(st->inconsistent);
    /* jemalloc_active has no figure: resident -> allocated names both gaps. */
    const struct query_ladder_step *al = NULL, *tr = NULL, *rs = NULL;
    for (size_t i = 0; i < d->nladder; i++) {
        if (strcmp(d->ladder[i].name, "jemalloc_allocated") == 0)
            al = &d->ladder[i];
        if (strcmp(d->ladder[i].name, "tracked") == 0)
            tr = &d->ladder[i];
        if (strcmp(d->ladder[i].name, "jemalloc_resident") == 0)
            rs = &d->ladder[i];
    }
    assert_true(fabs(al->gap - heap * 0.75) < 1);
    assert_non_null(strstr(al->gap_name, "dirty pages"));
    assert_non_null(strstr(al->gap_name, "fragmentation"));
    assert_true(fabs(rs->gap - heap) < 1);
    assert_non_null(strstr(rs->gap_name, "outside jemalloc"));
    assert_true(fabs(tr->gap - heap * 0.5) < 1);
    assert_non_null(strstr(tr->gap_name, "untracked"));
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_discrepancy_text(d, "be-1", &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "Ladder"));
    assert_non_null(strstr(out.data, "untracked allocations"));
    hp_buf_release(&out);
    query_discrepancy_free(d);
}

/* A load tracker of 768 KiB against no load memory at all in a profile
 * that records every allocation was "consistent" under a fixed 1 MiB
 * floor. The gap is compared with the heap's noise (none) and the
 * process's size; the floor scales with the process. */
static void test_discrepancy_small_gap_on_exact_profile(void **state)
{
    struct fx *s = *state;
    struct query_figure figs[] = {
        { "memory_load_trackers_sum_bytes", 768.0 * 1024 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_discrepancy_row *r = query_discrepancy_find(d, "load");
    assert_non_null(r);
    assert_true(r->heap == 0);
    assert_int_equal(r->verdict, QUERY_VERDICT_OVER);
    query_discrepancy_free(d);
    /* On a 64 GiB process the same 768 KiB is within the floor. */
    struct query_figure big[] = {
        { "memory_load_trackers_sum_bytes", 768.0 * 1024 },
        { "process_rss_bytes", 64.0 * 1024 * 1024 * 1024 },
    };
    d = report(s, big, HP_ARRAY_SIZE(big), NULL);
    r = query_discrepancy_find(d, "load");
    assert_int_equal(r->verdict, QUERY_VERDICT_CONSISTENT);
    query_discrepancy_free(d);
}

/* Figures that cannot all be right (RSS below jemalloc's resident, a
 * tracked total above the heap) are flagged with both figures and their
 * sources instead of being subtracted into negative gaps. */
static void test_discrepancy_flags_inconsistent_figures(void **state)
{
    struct fx *s = *state;
    double heap = s->f->total[PV_INUSE_SPACE];
    struct query_figure figs[] = {
        { "process_rss_bytes", heap * 1.5 },
        { "doris_be_memory_jemalloc_resident_bytes", heap * 2 },
        { "doris_be_memory_jemalloc_allocated_bytes", heap * 1.25 },
        { "memory_all_tracked_sum_bytes", heap * 1.3 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), NULL);
    size_t flagged = 0;
    for (size_t i = 0; i < d->nladder; i++) {
        const struct query_ladder_step *st = &d->ladder[i];
        if (strcmp(st->name, "jemalloc_resident") == 0 || strcmp(st->name, "tracked") == 0)
            assert_true(st->inconsistent);
        else
            assert_false(st->inconsistent);
        flagged += st->inconsistent;
    }
    assert_int_equal(flagged, 2);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_discrepancy_text(d, "be-1", &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "INCONSISTENT: jemalloc_resident"));
    assert_non_null(strstr(out.data, "(doris_be_memory_jemalloc_resident_bytes) is above rss"));
    assert_non_null(strstr(out.data, "(process_rss_bytes)"));
    assert_null(strstr(out.data, "-740"));
    hp_buf_release(&out);
    query_discrepancy_free(d);
}

/* tablet_schema_cache_grow names both a TabletSchema and a cache: it is
 * metadata (what Doris' and StarRocks' metadata trackers count), so
 * StarRocks' metadata tracker is judged against those bytes, not 0 B. */
/* The Doris guide's test: a query tracker below what the stacks with
 * query-operator frames hold is named as a finding, with both figures. */
static void test_discrepancy_query_tracker_inaccurate(void **state)
{
    struct fx *s = *state;
    struct query_figure low[] = { { "doris_be_memory_query_trackers_sum_bytes", s->query * 0.3 } };
    struct query_discrepancy *d = report(s, low, HP_ARRAY_SIZE(low), NULL);
    assert_non_null(d->query_tracker_inaccurate);
    assert_true(fabs(d->query_tracker_inaccurate->heap - s->query) < 1);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_discrepancy_text(d, "be-1", &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "Finding: the query tracker is inaccurate"));
    assert_non_null(strstr(out.data, "(doris_be_memory_query_trackers_sum_bytes)"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_discrepancy_json(d, "be-1", &out), 0);
    assert_non_null(memmem(out.data, out.len, "query_tracker_inaccurate", 24));
    hp_buf_release(&out);
    query_discrepancy_free(d);
    /* A tracker that agrees: no finding. */
    struct query_figure ok[] = { { "doris_be_memory_query_trackers_sum_bytes", s->query } };
    d = report(s, ok, HP_ARRAY_SIZE(ok), NULL);
    assert_null(d->query_tracker_inaccurate);
    query_discrepancy_free(d);
}

static void test_discrepancy_metadata_before_cache(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *dumps[] = { "m.heap" };
    const char *args[] = { "--threads", "3", "--direct", "32", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, 1), 0);
    char *path = qt_path(dir, "m.heap");
    struct fx fx = { 0 };
    fx.p = qt_parse(path);
    free(path);
    assert_true(qt_symbolize(fx.p, qt_jefixture()) > 0);
    fx.f = qt_fold(fx.p);
    double grow = bytes_through(fx.f, "tablet_schema_cache_grow");
    assert_true(grow >= 32 * 8192);
    struct query_figure figs[] = { { "starrocks_be_metadata_mem_bytes", 992.0 * 1024 } };
    struct query_discrepancy *d = report(&fx, figs, HP_ARRAY_SIZE(figs), NULL);
    const struct query_discrepancy_row *meta = query_discrepancy_find(d, "metadata");
    const struct query_discrepancy_row *cache = query_discrepancy_find(d, "cache");
    assert_true(meta->heap >= grow + bytes_through(fx.f, "leak_tablet_schema") - 1);
    assert_true(fabs(cache->heap - bytes_through(fx.f, "segment_cache_insert")) < 1);
    assert_true(meta->tracker == 992.0 * 1024);
    query_discrepancy_free(d);
    query_folded_free(fx.f);
    profile_free(fx.p);
    qt_tmpdir_remove(dir);
}

static void test_discrepancy_rules_file_extends_and_overrides(void **state)
{
    struct fx *s = *state;
    const char *rules = "# fixture rules\n"
                        "[settings]\n"
                        "floor_bytes = 0\n"
                        "[schema_leak]\n"
                        "description = the fixture's schema objects\n"
                        "match = ^leak_tablet_schema$\n"
                        "tracker = fixture_schema_bytes + fixture_schema_extra\n"
                        "[query]\n"
                        "match = ^agg_hash_table_resize$\n"
                        "tracker = q\n";
    struct query_figure figs[] = {
        { "fixture_schema_bytes", s->leak / 2 },
        { "fixture_schema_extra", s->leak / 2 },
        { "q", 0 },
    };
    struct query_discrepancy *d = report(s, figs, HP_ARRAY_SIZE(figs), rules);
    const struct query_discrepancy_row *r = query_discrepancy_find(d, "schema_leak");
    assert_non_null(r);
    assert_int_equal(r->verdict, QUERY_VERDICT_CONSISTENT);
    assert_true(fabs(r->tracker - s->leak) < 1);
    assert_true(fabs(r->heap - s->leak) < 1);
    /* The file's category comes before the built-ins, so it wins the frame
     * that built-in metadata also matches. */
    assert_string_equal(d->rows[0].category, "schema_leak");
    const struct query_discrepancy_row *m = query_discrepancy_find(d, "metadata");
    assert_true(m->heap == 0);
    assert_int_equal(m->verdict, QUERY_VERDICT_NO_TRACKER);
    /* The replaced [query] no longer matches scan_operator_next nor is idle. */
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    assert_true(q->heap < s->query);
    assert_int_equal(q->verdict, QUERY_VERDICT_UNDER);
    query_discrepancy_free(d);

    /* builtin = none leaves only the file's categories. */
    const char *only = "builtin = none\n[mine]\nmatch = leak\ntracker = fixture_schema_bytes\n";
    d = report(s, figs, HP_ARRAY_SIZE(figs), only);
    assert_int_equal(d->nrows, 2);
    assert_string_equal(d->rows[0].category, "mine");
    assert_true(fabs(d->rows[0].heap - s->leak) < 1);
    query_discrepancy_free(d);
}

static void expect_error(const char *text, const char *needle)
{
    struct query_rules *r = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_rules_builtin(&r, &err), 0);
    int rc = query_rules_parse(r, text, strlen(text), "my.rules", &err);
    assert_true(rc < 0);
    hp_buf_append(&err, "", 1);
    if (!strstr(err.data, needle))
        fail_msg("error \"%s\" lacks \"%s\"", err.data, needle);
    query_rules_free(r);
    hp_buf_release(&err);
}

static void test_discrepancy_rules_errors_say_where(void **state)
{
    (void)state;
    expect_error("[query]\nmatch = a\ntracer = x\n", "my.rules:3: unknown key \"tracer\"");
    expect_error("\n[bad\n", "my.rules:2: malformed section header");
    expect_error("[x]\nmatch = (unclosed\n", "my.rules:1: [x] match: invalid regular expression");
    expect_error("tolerance = 1\n", "my.rules:1: \"tolerance\" outside a section");
    expect_error("[settings]\ntolerance = lots\n", "my.rules:2: tolerance expects");
    expect_error("[ladder]\nrss = a + \n", "my.rules:2: empty figure name");
    expect_error("[ladder]\nswap = a\n", "my.rules:2: unknown ladder step \"swap\"");
    expect_error("[q]\nidle = maybe\n", "my.rules:2: idle expects yes or no");
}

static void test_discrepancy_figures_parse(void **state)
{
    (void)state;
    const char *text = "# HELP doris_be_memory_jemalloc_allocated_bytes ...\n"
                       "# TYPE doris_be_memory_jemalloc_allocated_bytes gauge\n"
                       "doris_be_memory_jemalloc_allocated_bytes 1347353144\n"
                       "starrocks_be_query_mem_bytes{instance=\"be-1\"} 2.5e9 1700000000000\n"
                       "memory_query_trackers_sum_bytes : 83320000\n"
                       "brpc_version : \"1.4\"\n"
                       "x NaN\n"
                       "doris_be_memory_jemalloc_allocated_bytes 5\n";
    struct hp_arena a;
    hp_arena_init(&a);
    struct query_figure *figs = NULL;
    size_t n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_figures_parse(text, strlen(text), "m.txt", &a, &figs, &n, &err), 0);
    /* The labelled series is kept as written (as the collector stores it)
     * and under its bare name. */
    assert_int_equal(n, 4);
    double v;
    assert_int_equal(
        query_figure_find(figs, n, "starrocks_be_query_mem_bytes{instance=\"be-1\"}", &v), 1);
    assert_int_equal(query_figure_find(figs, n, "doris_be_memory_jemalloc_allocated_bytes", &v), 1);
    assert_true(v == 5); /* later duplicates win */
    assert_int_equal(query_figure_find(figs, n, "starrocks_be_query_mem_bytes", &v), 1);
    assert_true(v == 2.5e9);
    assert_int_equal(query_figure_find(figs, n, "memory_query_trackers_sum_bytes", &v), 1);
    assert_true(v == 83320000);
    const char *bad = "ok 1\nbroken{a=\"b\" 3\n";
    assert_true(query_figures_parse(bad, strlen(bad), "m.txt", &a, &figs, &n, &err) < 0);
    hp_buf_append(&err, "", 1);
    assert_non_null(strstr(err.data, "m.txt:2: unterminated label set"));
    hp_buf_release(&err);
    hp_arena_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discrepancy_names_the_missed_path),
        cmocka_unit_test(test_discrepancy_idle_tracker_is_a_possible_leak),
        cmocka_unit_test(test_discrepancy_verdicts_say_why),
        cmocka_unit_test(test_discrepancy_rules_per_kind),
        cmocka_unit_test(test_discrepancy_reads_collector_tracker_rows),
        cmocka_unit_test(test_discrepancy_ladder_names_gaps),
        cmocka_unit_test(test_discrepancy_small_gap_on_exact_profile),
        cmocka_unit_test(test_discrepancy_metadata_before_cache),
        cmocka_unit_test(test_discrepancy_query_tracker_inaccurate),
        cmocka_unit_test(test_discrepancy_flags_inconsistent_figures),
        cmocka_unit_test(test_discrepancy_rules_file_extends_and_overrides),
        cmocka_unit_test(test_discrepancy_rules_errors_say_where),
        cmocka_unit_test(test_discrepancy_figures_parse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
