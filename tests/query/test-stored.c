/* The series commands on stored data: a real SQLite store in a temporary
 * folder, filled through store/ with real jefixture dumps and the figures a
 * node reports; the `query` executable then reads it with --db. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <sqlite3.h>

#include "query/query.h"
#include "query/stored.h"
#include "store/store.h"
#include "tests/query/qtest.h"
#include "tests/store/gen.h"

struct fx {
    char *dir, *db;
};

static void insert_node(struct store *st, const char *name, const char *labels, const char *dir,
                        const char *const *dumps, size_t n, int64_t t0_ms, bool idle)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t node_id;
    struct store_node_info ni = { .name = name, .kind = "doris", .labels = labels };
    assert_int_equal(store_node_upsert(st, &ni, &node_id, &err), 0);
    for (size_t i = 0; i < n; i++) {
        char *path = qt_path(dir, dumps[i]);
        struct profile *p = qt_parse(path);
        free(path);
        assert_true(qt_symbolize(p, qt_jefixture()) > 0);
        double totals[PV_COUNT];
        profile_totals(p, totals);
        struct store_stat stats[] = {
            { "memory_query_trackers_sum_bytes", "bytes", idle ? 0 : 8e9 },
            { "memory_load_trackers_sum_bytes", "bytes", 0 },
            { "memory_metadata_trackers_sum_bytes", "bytes", 0 },
            { "doris_be_memory_jemalloc_allocated_bytes", "bytes",
              totals[PV_INUSE_SPACE] * 1.5 },
        };
        int64_t id;
        if (store_snapshot_insert(st, node_id, t0_ms + (int64_t)i * 3600000, p, NULL, 0, NULL,
                                  stats, HP_ARRAY_SIZE(stats), &id, &err) < 0)
            fail_msg("insert: %.*s", (int)err.len, err.data);
        profile_free(p);
    }
    hp_buf_release(&err);
}

static int setup(void **state)
{
    struct fx *f = hp_xcalloc(1, sizeof(*f));
    f->dir = qt_tmpdir();
    f->db = qt_path(f->dir, "hf.db");
    const char *series[] = { "a1.heap", "a2.heap", "a3.heap", "a4.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(f->dir, 0, args, series, 4), 0);
    const char *big[] = { "big.heap" };
    const char *bigargs[] = { "--threads", "3", "--scale", "8", NULL };
    assert_int_equal(qt_jefixture_run(f->dir, 0, bigargs, big, 1), 0);
    struct store *st = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (store_open(f->db, STORE_OPEN_WRITE, &st, &err) < 0)
        fail_msg("open: %.*s", (int)err.len, err.data);
    int64_t now = hp_wall_ms();
    insert_node(st, "be-1", "rack=a", f->dir, series, 4, now - 4 * 3600000, true);
    const char *last[] = { "a4.heap" };
    insert_node(st, "be-2", "rack=a", f->dir, last, 1, now - 3600000, false);
    insert_node(st, "be-3", "rack=b", f->dir, last, 1, now - 3600000, false);
    insert_node(st, "be-17", "rack=a", f->dir, big, 1, now - 3600000, false);
    /* A URL node that never answered: attempts, no snapshots. */
    int64_t url_id, att_id;
    struct store_node_info ui = {
        .name = "url-proxy", .kind = "url",
        .address = "http://metrics-proxy.internal.example.net:9090/debug/pprof/heap"
    };
    assert_int_equal(store_node_upsert(st, &ui, &url_id, &err), 0);
    assert_int_equal(store_snapshot_attempt_record(st, url_id, now - 60000, STORE_STATUS_FETCH_FAILED,
                                                   "HTTP 503", NULL, 0, NULL, NULL, 0, &att_id,
                                                   &err),
                     0);
    store_close(st);
    hp_buf_release(&err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    unlink(f->db);
    free(f->db);
    qt_tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static json_t *run_json(struct fx *f, const char *const *args)
{
    char *argv[32];
    size_t n = 0;
    argv[n++] = getenv("QUERY_EXE");
    assert_non_null(argv[0]);
    for (size_t i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n++] = "--db";
    argv[n++] = f->db;
    argv[n++] = "--format";
    argv[n++] = "json";
    argv[n] = NULL;
    char *outdir = qt_tmpdir(), *out = qt_path(outdir, "out.json");
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *text = qt_slurp(out);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root)
        fail_msg("not JSON (%s): %s", je.text, text);
    free(text);
    unlink(out);
    free(out);
    qt_tmpdir_remove(outdir);
    return root;
}

static void test_stored_leaks_name_paths_and_idle(void **state)
{
    struct fx *f = *state;
    const char *args[] = { "leaks", "be-1", "--since", "7d", NULL };
    json_t *root = run_json(f, args);
    json_t *n0 = json_array_get(json_object_get(root, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n0, "node")), "be-1");
    assert_int_equal(json_integer_value(json_object_get(n0, "snapshots")), 4);
    /* It names the snapshots it used. */
    json_t *fs = json_object_get(n0, "first_snapshot"), *ls = json_object_get(n0, "last_snapshot");
    assert_true(json_integer_value(json_object_get(fs, "id")) > 0);
    assert_true(json_integer_value(json_object_get(ls, "id")) >
                json_integer_value(json_object_get(fs, "id")));
    assert_string_equal(json_string_value(json_object_get(ls, "node")), "be-1");
    assert_non_null(json_string_value(json_object_get(ls, "time")));
    assert_true(json_is_true(json_object_get(n0, "idle_known")));
    json_t *funcs = json_object_get(n0, "functions");
    bool leak = false, join = false;
    for (size_t i = 0; i < json_array_size(funcs); i++) {
        json_t *fn = json_array_get(funcs, i);
        const char *name = json_string_value(json_object_get(fn, "name"));
        /* Ranked by flat growth: the fixture allocates through tracked_alloc. */
        if (strcmp(name, "tracked_alloc") == 0)
            leak = json_is_true(json_object_get(fn, "grows_while_idle"));
        join |= strcmp(name, "hash_join_build") == 0;
    }
    assert_true(leak);
    assert_false(join);
    json_decref(root);
}

static void test_stored_discrepancy_uses_stored_figures(void **state)
{
    struct fx *f = *state;
    /* The fixture's paths are small: no 1 MiB floor for "consistent". */
    char *rules = qt_path(f->dir, "small.rules");
    FILE *fp = fopen(rules, "w");
    assert_non_null(fp);
    fputs("[settings]\nfloor_bytes = 0\n", fp);
    fclose(fp);
    const char *args[] = { "discrepancy", "be-1", "--rules", rules, NULL };
    json_t *root = run_json(f, args);
    unlink(rules);
    free(rules);
    json_t *cats = json_object_get(root, "categories");
    bool under = false;
    for (size_t i = 0; i < json_array_size(cats); i++) {
        json_t *c = json_array_get(cats, i);
        if (strcmp(json_string_value(json_object_get(c, "category")), "metadata") == 0)
            under = strcmp(json_string_value(json_object_get(c, "verdict")),
                           "tracker under-counts") == 0 &&
                    strcmp(json_string_value(json_object_get(
                               json_array_get(json_object_get(c, "held_in"), 0), "frame")),
                           "leak_tablet_schema") == 0;
    }
    assert_true(under);
    json_t *lad = json_object_get(root, "ladder");
    bool allocated = false;
    for (size_t i = 0; i < json_array_size(lad); i++) {
        json_t *s = json_array_get(lad, i);
        if (strcmp(json_string_value(json_object_get(s, "step")), "jemalloc_allocated") == 0)
            allocated = json_is_real(json_object_get(s, "value"));
    }
    assert_true(allocated);
    json_decref(root);
}

static void test_stored_fleet_and_trend(void **state)
{
    struct fx *f = *state;
    const char *args[] = { "fleet", "--label", "rack=a", "--min-bytes", "65536", NULL };
    json_t *root = run_json(f, args);
    /* rack=a: be-1, be-2, be-17; be-3 is rack=b. */
    assert_int_equal(json_integer_value(json_object_get(root, "nodes")), 3);
    json_t *funcs = json_object_get(root, "functions");
    assert_true(json_array_size(funcs) > 0);
    for (size_t i = 0; i < json_array_size(funcs); i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(funcs, i), "node")),
                            "be-17");
    json_decref(root);

    const char *trend[] = { "trend", "--fleet", "--function", "^leak_tablet_schema$", NULL };
    root = run_json(f, trend);
    json_t *cols = json_object_get(root, "columns");
    bool fn = false, fig = false;
    for (size_t i = 0; i < json_array_size(cols); i++) {
        const char *c = json_string_value(json_array_get(cols, i));
        fn |= strcmp(c, "fn:leak_tablet_schema") == 0;
        fig |= strcmp(c, "doris_be_memory_jemalloc_allocated_bytes") == 0;
    }
    assert_true(fn && fig);
    assert_int_equal(json_array_size(json_object_get(root, "rows")), 4 + 3);
    json_decref(root);
}

/* Runs query with ARGS + --db; returns its exit status, its stderr in *ret_err. */
static int run_err(struct fx *f, const char *const *args, char **ret_err)
{
    char *argv[32];
    size_t n = 0;
    argv[n++] = getenv("QUERY_EXE");
    assert_non_null(argv[0]);
    for (size_t i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n++] = "--db";
    argv[n++] = f->db;
    argv[n] = NULL;
    char *errpath = qt_path(f->dir, "stderr.txt");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0)
            _exit(126);
        dup2(fd, 2);
        dup2(nul, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    assert_true(waitpid(pid, &st, 0) == pid);
    *ret_err = qt_slurp(errpath);
    unlink(errpath);
    free(errpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* issue 17: a mistyped node gets the closest stored name; a far-off one
 * gets none; a missing --symbols folder is an error, not a silent
 * unsymbolized report; a label nobody has says so. */
static void test_stored_cli_says_what_is_wrong(void **state)
{
    struct fx *f = *state;
    char *err = NULL;
    const char *top[] = { "top", "be17", NULL };
    assert_int_equal(run_err(f, top, &err), 1);
    assert_non_null(strstr(err, "no node named \"be17\""));
    assert_non_null(strstr(err, "(did you mean \"be-17\"?)"));
    free(err);
    const char *at[] = { "top", "be-171@-2h", NULL };
    assert_int_equal(run_err(f, at, &err), 1);
    assert_non_null(strstr(err, "did you mean \"be-17\"?"));
    free(err);
    const char *trend[] = { "trend", "be-4", NULL };
    assert_int_equal(run_err(f, trend, &err), 1);
    assert_non_null(strstr(err, "did you mean \"be-"));
    free(err);
    const char *far[] = { "top", "starrocks-cn-9", NULL };
    assert_int_equal(run_err(f, far, &err), 1);
    assert_null(strstr(err, "did you mean"));
    free(err);

    const char *sym[] = { "top", "be-17", "--symbols", "/nonexistent", NULL };
    assert_int_equal(run_err(f, sym, &err), 2);
    assert_non_null(strstr(err, "--symbols \"/nonexistent\": No such file or directory"));
    free(err);

    /* Each analysis takes only its own options. */
    const char *other[] = { "leaks", "--series", "all", NULL };
    assert_int_equal(run_err(f, other, &err), 2);
    assert_non_null(strstr(err, "unknown option --series"));
    free(err);

    const char *label[] = { "fleet", "--label", "rack=z", NULL };
    assert_int_equal(run_err(f, label, &err), 1);
    assert_non_null(strstr(err, "no node has the label rack=z"));
    free(err);
}

/* issue 17: query nodes counts stored snapshots and failed attempts apart,
 * and its columns stay aligned when an address is a long URL. */
static void test_stored_nodes_counts_and_columns(void **state)
{
    struct fx *f = *state;
    char *argv[] = { getenv("QUERY_EXE"), "nodes", "--db", f->db, NULL };
    assert_non_null(argv[0]);
    char *out = qt_path(f->dir, "nodes.txt");
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *text = qt_slurp(out);
    unlink(out);
    free(out);
    const char *hdr = strstr(text, "LAST ATTEMPT");
    assert_non_null(hdr);
    assert_non_null(strstr(text, "FAILED"));
    long col = hdr - text; /* every line starts its LAST ATTEMPT here */
    int lines = 0;
    bool saw_url = false, saw_be1 = false;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        if (lines++ > 0) {
            assert_true((long)strlen(line) > col);
            assert_memory_equal(line + col, "20", 2); /* 2026-..., a time */
            int64_t snaps, failed;
            char name[64];
            char addr[128];
            assert_int_equal(sscanf(line, "%63s %*s %127s %" SCNd64 " %" SCNd64, name, addr,
                                    &snaps, &failed),
                             4);
            if (strcmp(name, "url-proxy") == 0) {
                saw_url = true;
                assert_int_equal(snaps, 0);
                assert_int_equal(failed, 1);
                assert_non_null(strstr(line, "HTTP 503"));
            } else if (strcmp(name, "be-1") == 0) {
                saw_be1 = true;
                assert_int_equal(snaps, 4);
                assert_int_equal(failed, 0);
            }
        }
    }
    assert_true(saw_url && saw_be1);
    free(text);
}

/* issue 17: retain --dry-run says what would go and changes nothing. */
static void test_stored_retain_dry_run(void **state)
{
    struct fx *f = *state;
    char *out = qt_path(f->dir, "retain.txt");
    /* be-1 has snapshots 4, 3, 2 and 1 h old: two are older than 150 min. */
    char *argv[] = { getenv("QUERY_EXE"), "retain", "--retain", "150m", "--thin-after", "0",
                     "--dry-run", "--db", f->db, NULL };
    assert_non_null(argv[0]);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(qt_run(argv, NULL, out), 0);
        char *text = qt_slurp(out);
        if (!strstr(text, "dry run: 2 snapshots would be deleted"))
            fail_msg("round %d: %s", round, text);
        free(text);
    }
    const char *args[] = { "trend", "be-1", NULL };
    json_t *root = run_json(f, args);
    assert_int_equal(json_array_size(json_object_get(root, "rows")), 4);
    json_decref(root);
    unlink(out);
    free(out);
}

/* issue 17: a command's --help lists the options it takes, not the other
 * analyses'. */
static void test_stored_help_is_per_command(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *cmd, *own, *others[3];
    } c[] = {
        { "trend", "--series", { "--rules", "--min-rate", "--label" } },
        { "leaks", "--min-rate", { "--rules", "--series", "--label" } },
        { "fleet", "--label", { "--rules", "--series", "--min-rate" } },
        { "discrepancy", "--rules", { "--label", "--series", "--min-rate" } },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(c); i++) {
        char *argv[] = { getenv("QUERY_EXE"), (char *)c[i].cmd, "--help", NULL };
        char *out = qt_path(f->dir, "help.txt");
        assert_int_equal(qt_run(argv, NULL, out), 0);
        char *text = qt_slurp(out);
        assert_non_null(strstr(text, c[i].own));
        for (size_t k = 0; k < 3; k++)
            if (strstr(text, c[i].others[k]))
                fail_msg("query %s --help lists %s", c[i].cmd, c[i].others[k]);
        free(text);
        unlink(out);
        free(out);
    }
}

/* Generated nodes for the two paths of leaks: "steady" (one layout, a
 * few stacks growing), "restarts" (unsymbolized, a new load address every
 * 8 hours: several dictionaries whose names are addresses), "flipping"
 * (two load addresses alternating: the folded fallback), "threads"
 * (per-thread samples, which leaks must ignore). */
static const struct gen_node {
    const char *name;
    bool symbolize;
    uint32_t nthreads, hours;
    int bias_every; /* new load address every N hours; <0 alternating */
} gen_nodes[] = {
    { "steady", true, 0, 30, 0 },
    { "restarts", false, 0, 24, 8 },
    { "flipping", false, 0, 10, -1 },
    { "threads", true, 2, 12, 0 },
};
#define GEN_HOURS_MAX 30

static void grow_some(struct profile *p, uint32_t h);

/* Hour h of generated node k (deterministic). */
static struct profile *gen_node_profile(size_t k, uint32_t h)
{
    int b = gen_nodes[k].bias_every;
    uint64_t epoch = b > 0 ? h / (uint32_t)b : b < 0 ? h % 2 : 0;
    struct gen_params gp = { .seed = 7 + k, .nstacks = 300, .nfuncs = 120, .hour = h,
                             .nthreads = gen_nodes[k].nthreads,
                             .load_bias = 0x555500000000u + (epoch << 24),
                             .symbolize = gen_nodes[k].symbolize };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    grow_some(p, h);
    return p;
}

/* Every 40th sample of p grows with the hours h: leak suspects. Others
 * gain a 4 MiB block every 6 hours: beyond sampling noise only by their
 * exact variance (blocks of 8 periods are all recorded), not by the value
 * x period bound. */
static void grow_some(struct profile *p, uint32_t h)
{
    for (size_t i = 0; i < p->nsamples; i++) {
        int64_t *raw = p->samples[i].raw;
        if (i % 40 == 3)
            for (int v = 0; v < 2; v++)
                raw[v] += raw[v] * (int64_t)h / 3;
        if (i % 40 == 23) {
            raw[0] = 10 + h / 6;
            raw[1] = raw[0] * (4 << 20);
        }
    }
    profile_unsample(p);
}

/* The generated nodes' snapshots from t0 on, hourly; only hours h of node k
 * with keep[k][h] when keep is given. */
static void insert_generated_at(const char *db, int64_t t0,
                                const bool (*keep)[GEN_HOURS_MAX])
{
    struct store *st = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (store_open(db, STORE_OPEN_WRITE, &st, &err) < 0)
        fail_msg("open: %.*s", (int)err.len, err.data);
    for (size_t k = 0; k < HP_ARRAY_SIZE(gen_nodes); k++) {
        int64_t node_id;
        struct store_node_info ni = { .name = gen_nodes[k].name, .kind = "doris" };
        assert_int_equal(store_node_upsert(st, &ni, &node_id, &err), 0);
        for (uint32_t h = 0; h < gen_nodes[k].hours; h++) {
            if (keep && !keep[k][h])
                continue;
            struct profile *p = gen_node_profile(k, h);
            struct store_stat stats[] = {
                { "memory_query_trackers_sum_bytes", "bytes", h % 3 ? 0 : 4e9 },
                { "memory_load_trackers_sum_bytes", "bytes", 0 },
            };
            int64_t id;
            if (store_snapshot_insert(st, node_id, t0 + (int64_t)h * 3600000, p, NULL, 0, NULL,
                                      stats, HP_ARRAY_SIZE(stats), &id, &err) < 0)
                fail_msg("insert: %.*s", (int)err.len, err.data);
            profile_free(p);
        }
    }
    store_close(st);
    hp_buf_release(&err);
}

static void insert_generated(const char *db)
{
    insert_generated_at(db, hp_wall_ms() - 40 * INT64_C(3600000), NULL);
}

/* Runs every variant (query ARGS --db DB) over every database two ways:
 * A with extra_a appended, B with extra_b appended and env_b in the
 * environment (each may be NULL), and fails unless both print the same
 * bytes with the same exit status. Returns how many outputs contained one
 * of marks[] (NULL-ended). */
static size_t same_two_ways(const char *const *dbs, size_t ndbs,
                            const char *const (*variants)[12], size_t nvariants,
                            const char *const *extra_a, const char *const *extra_b, char *env_b,
                            const char *const *marks)
{
    char *outdir = qt_tmpdir();
    char *out[2] = { qt_path(outdir, "a.out"), qt_path(outdir, "b.out") };
    size_t marked = 0;
    for (size_t d = 0; d < ndbs; d++)
        for (size_t v = 0; v < nvariants; v++) {
            int rc[2];
            char *text[2];
            for (int w = 0; w < 2; w++) {
                const char *const *extra = w ? extra_b : extra_a;
                char *argv[24];
                size_t n = 0;
                argv[n++] = getenv("QUERY_EXE");
                for (size_t i = 0; variants[v][i]; i++)
                    argv[n++] = (char *)variants[v][i];
                argv[n++] = "--db";
                argv[n++] = (char *)dbs[d];
                for (size_t i = 0; extra && extra[i]; i++)
                    argv[n++] = (char *)extra[i];
                argv[n] = NULL;
                char *env[] = { w ? env_b : NULL, NULL };
                rc[w] = qt_run(argv, env, out[w]);
                text[w] = qt_slurp(out[w]);
            }
            if (rc[0] != rc[1] || strcmp(text[0], text[1]) != 0) {
                fprintf(stderr, "one way:\n%s\nthe other:\n%s\n", text[0], text[1]);
                fail_msg("%s %s %s %s: one way (exit %d):\n%s\nthe other (exit %d):\n%s",
                         dbs[d], variants[v][0], variants[v][1],
                         variants[v][2] ? variants[v][2] : "", rc[0], text[0], rc[1], text[1]);
            }
            bool hit = false;
            for (size_t m = 0; marks[m]; m++)
                hit |= strstr(text[0], marks[m]) != NULL;
            marked += hit;
            free(text[0]);
            free(text[1]);
        }
    for (int w = 0; w < 2; w++) {
        unlink(out[w]);
        free(out[w]);
    }
    qt_tmpdir_remove(outdir);
    return marked;
}

/* The stored path, then with `via` in the environment (the path through
 * whole profiles). */
static size_t same_both_paths(const char *const *dbs, size_t ndbs,
                              const char *const (*variants)[12], size_t nvariants, char *via,
                              const char *const *marks)
{
    return same_two_ways(dbs, ndbs, variants, nvariants, NULL, NULL, via, marks);
}

/* Leaks from stored stack ids and values answers byte for byte what leaks
 * from the stored profiles, folded, answers: every node of the fixture and
 * the generated ones, text and JSON, with options that change the fold. */
static void test_stored_leaks_ids_path_equals_profiles_path(void **state)
{
    struct fx *f = *state;
    char *gen = qt_path(f->dir, "gen.db");
    insert_generated(gen);
    const char *dbs[] = { f->db, gen };
    static const char *const variants[][12] = {
        { "leaks", "--top", "0", NULL },
        { "leaks", "--top", "0", "--format", "json", NULL },
        { "leaks", "be-1", "--format", "json", NULL },
        { "leaks", "steady", "--top", "0", "--sample", "inuse_objects", NULL },
        /* The other pair of values (query_sample_one picks one pair). */
        { "leaks", "--top", "0", "--sample", "alloc_space", "--format", "json", NULL },
        { "leaks", "--top", "0", "--ignore", "tracked_alloc|f1[0-9]", "--format", "json", NULL },
        { "leaks", "restarts", "--top", "0", "--keep-allocator", NULL },
        { "leaks", "--top", "5", "--min-rate", "1000", NULL },
        /* Nodes without a snapshot in the window, or at all (the stored
         * path lists each node's snapshots in the worker that reads it). */
        { "leaks", "--top", "0", "--since", "1s", NULL },
        { "leaks", "be-2", "--since", "1s", NULL },
        { "leaks", "--top", "0", "--since", "90m", NULL },
    };
    /* The comparisons saw suspects, not only empty tables. */
    const char *const marks[] = { "rate_per_hour", "/h ", NULL };
    assert_true(same_both_paths(dbs, HP_ARRAY_SIZE(dbs), variants, HP_ARRAY_SIZE(variants),
                                "HEAPFLEET_LEAKS_VIA=profiles", marks) >= 4);
    unlink(gen);
    free(gen);
}

/* `query leaks` over several nodes of a store answers the same, byte for
 * byte and with the same exit status, whether one worker reads the nodes
 * one after another or four read them at once, each over its own
 * connection (under ThreadSanitizer too: meson test query-leaks-jobs). */
static void test_stored_leaks_jobs_same_answers(void **state)
{
    struct fx *f = *state;
    char *gen = qt_path(f->dir, "gen.db");
    insert_generated(gen);
    const char *dbs[] = { f->db, gen };
    static const char *const variants[][12] = {
        { "leaks", "--top", "0", NULL },
        { "leaks", "--top", "0", "--format", "json", NULL },
        { "leaks", "--top", "3", "--sample", "inuse_objects", NULL },
        { "leaks", "steady", "--format", "json", NULL },
        { "leaks", "--top", "0", "--since", "1s", NULL }, /* no snapshot: an error */
    };
    const char *const one[] = { "--jobs", "1", NULL }, *const four[] = { "--jobs", "4", NULL };
    const char *const marks[] = { "rate_per_hour", "/h ", NULL };
    assert_true(same_two_ways(dbs, HP_ARRAY_SIZE(dbs), variants, HP_ARRAY_SIZE(variants), one,
                              four, NULL, marks) >= 4);
    unlink(gen);
    free(gen);
}

/* `query trend` over the store takes its function columns from the stored
 * function totals and answers what the folded profiles answer: the top
 * five, a --function expression, a fleet, objects, CSV and JSON. */
static void test_stored_trend_totals_path_equals_profiles_path(void **state)
{
    struct fx *f = *state;
    char *gen = qt_path(f->dir, "gen.db");
    insert_generated(gen);
    const char *fixture[] = { f->db }, *generated[] = { gen };
    static const char *const on_fixture[][12] = {
        { "trend", "be-1", "--format", "csv", NULL },
        { "trend", "be-1", "--function", "leak|tablet", "--format", "csv", NULL },
        { "trend", "--fleet", "--format", "json", NULL },
        { "trend", "--fleet", "--function", "^leak_tablet_schema$", "--format", "csv", NULL },
        { "trend", "be-17", "--sample", "inuse_objects", "--format", "csv", NULL },
        /* Options the stored totals do not cover: both fold profiles. */
        { "trend", "be-1", "--no-inline", "--format", "csv", NULL },
        { "trend", "be-1", "--sample", "alloc_space", "--format", "csv", NULL },
    };
    static const char *const on_generated[][12] = {
        { "trend", "steady", "--format", "csv", NULL },
        { "trend", "steady", "--function", "Serialize", "--format", "json", NULL },
        { "trend", "--fleet", "--format", "csv", NULL },
        { "trend", "--fleet", "--function", "Compact|Aggregate", "--sample", "inuse_objects",
          "--format",
          "csv", NULL },
        /* Hundreds of matches: read in one pass over the snapshots. */
        { "trend", "steady", "--function", "doris|std", "--format", "csv", NULL },
        { "trend", "--fleet", "--function", "::", "--sample", "inuse_objects", "--format", "json",
          NULL },
        { "trend", "threads", NULL }, /* text: totals and figures only */
    };
    /* Function columns were compared, not only totals. */
    const char *const marks[] = { "fn:", NULL };
    assert_int_equal(same_both_paths(fixture, 1, on_fixture, HP_ARRAY_SIZE(on_fixture),
                                     "HEAPFLEET_TREND_VIA=profiles", marks),
                     HP_ARRAY_SIZE(on_fixture));
    assert_int_equal(same_both_paths(generated, 1, on_generated, HP_ARRAY_SIZE(on_generated),
                                     "HEAPFLEET_TREND_VIA=profiles", marks),
                     HP_ARRAY_SIZE(on_generated) - 1);
    unlink(gen);
    free(gen);
}

/* A year of hourly snapshots took `query trend` 40 s and 19 GB: it loaded
 * and folded every stored profile. It reads no profile now: with every
 * sample set unreadable it still charts the node (the profiles path, given
 * the same database, cannot). */
static void test_stored_trend_reads_no_profile(void **state)
{
    struct fx *f = *state;
    char *db = qt_path(f->dir, "noprof.db");
    insert_generated(db);
    sqlite3 *sq;
    assert_int_equal(sqlite3_open(db, &sq), SQLITE_OK);
    assert_int_equal(sqlite3_exec(sq, "UPDATE sample_sets SET data = x'ff'", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_true(sqlite3_changes(sq) > 0);
    sqlite3_close(sq);
    char *outdir = qt_tmpdir(), *out = qt_path(outdir, "trend.csv");
    char *argv[] = { getenv("QUERY_EXE"), "trend", "steady", "--format", "csv", "--db", db, NULL };
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *text = qt_slurp(out);
    size_t lines = 0;
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    assert_int_equal(lines, 1 + gen_nodes[0].hours);
    assert_non_null(strstr(text, ",fn:"));
    free(text);
    char *via[] = { "HEAPFLEET_TREND_VIA=profiles", NULL };
    assert_int_not_equal(qt_run(argv, via, out), 0);
    unlink(out);
    free(out);
    qt_tmpdir_remove(outdir);
    unlink(db);
    free(db);
}

/* `query leaks --top 0` over db, ids path, text with the "#ID at " of the
 * first and last snapshots taken out (two databases number them apart). */
static char *leaks_text(const char *db, const char *out)
{
    char *argv[] = { getenv("QUERY_EXE"), "leaks", "--top", "0", "--db", (char *)db, NULL };
    assert_non_null(argv[0]);
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *text = qt_slurp(out);
    char *w = text;
    for (const char *r = text; *r;) {
        size_t d = r[0] == '#' ? strspn(r + 1, "0123456789") : 0;
        if (d && strncmp(r + 1 + d, " at ", 4) == 0) {
            r += 1 + d + 4;
            continue;
        }
        *w++ = *r++;
    }
    *w = 0;
    return text;
}

struct kept {
    int64_t t0;
    size_t n;
    int64_t hour[GEN_HOURS_MAX], id[GEN_HOURS_MAX];
};

static int kept_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct kept *k = ctx;
    assert_true(k->n < GEN_HOURS_MAX);
    k->hour[k->n] = (si->taken_at - k->t0) / INT64_C(3600000);
    k->id[k->n++] = si->id;
    return 0;
}

/* Retention and reindex keep leaks right: after `store_retain` dropped
 * snapshots (thinned days and an age limit) and the remaining ones of a node
 * were reindexed, leaks answers what it answers over a database that only
 * ever held the remaining snapshots. Leaks reads sample sets today; a store
 * of precomputed per-node series (issue 18) must keep this. */
static void test_stored_leaks_after_retain_equals_scratch(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    char *a = qt_path(dir, "retained.db"), *b = qt_path(dir, "scratch.db");
    char *out = qt_path(dir, "leaks.txt");
    /* Hour 0 at a UTC midnight, so that thinning keeps hour 23 of day one
     * (the last of that day). */
    int64_t t0 = (hp_wall_ms() / 86400000 - 3) * INT64_C(86400000);
    insert_generated_at(a, t0, NULL);
    char *before = leaks_text(a, out);
    struct store *st;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_open(a, STORE_OPEN_WRITE, &st, &err), 0);
    /* At hour 30: hours 0-3 are older than 26 h (gone); of hours 4-17,
     * older than 12 h, each node keeps its last (one per UTC day). */
    int64_t now = t0 + 30 * INT64_C(3600000);
    struct store_retain_policy pol = { .retain_s = 26 * 3600, .thin_after_s = 12 * 3600 };
    struct store_retain_result res;
    if (store_retain(st, &pol, now, &res, &err) < 0)
        fail_msg("retain: %.*s", (int)err.len, err.data);
    assert_true(res.snapshots_deleted > 20);
    /* Which hours remain, node by node; reindex the remaining snapshots of
     * "steady" with their own profiles (new sample sets and totals). */
    bool keep[HP_ARRAY_SIZE(gen_nodes)][GEN_HOURS_MAX] = { { false } };
    size_t nkept = 0;
    for (size_t k = 0; k < HP_ARRAY_SIZE(gen_nodes); k++) {
        int64_t node_id;
        struct kept kp = { .t0 = t0 };
        assert_int_equal(store_node_find(st, gen_nodes[k].name, &node_id, &err), 0);
        assert_int_equal(store_snapshots_list(st, node_id, 0, INT64_MAX, false, kept_cb, &kp,
                                              &err),
                         0);
        for (size_t i = 0; i < kp.n; i++) {
            assert_true(kp.hour[i] >= 0 && kp.hour[i] < GEN_HOURS_MAX);
            keep[k][kp.hour[i]] = true;
            nkept++;
            if (k != 0)
                continue;
            struct profile *p = gen_node_profile(0, (uint32_t)kp.hour[i]);
            if (store_snapshot_reindex(st, kp.id[i], p, &err) < 0)
                fail_msg("reindex: %.*s", (int)err.len, err.data);
            profile_free(p);
        }
    }
    assert_int_equal(nkept, 13 + 7 + 1 + 1);
    store_close(st);
    insert_generated_at(b, t0, (const bool (*)[GEN_HOURS_MAX])keep);
    char *after = leaks_text(a, out), *scratch = leaks_text(b, out);
    if (strcmp(after, scratch) != 0)
        fail_msg("leaks after retention:\n%s\nfrom scratch:\n%s", after, scratch);
    /* Retention changed the answer (fewer snapshots), so the comparison
     * is not between two untouched databases. */
    assert_string_not_equal(before, after);
    assert_non_null(strstr(after, "/h"));
    free(before);
    free(after);
    free(scratch);
    hp_buf_release(&err);
    unlink(out);
    free(out);
    free(a);
    free(b);
    qt_tmpdir_remove(dir);
}



static int64_t db_count(const char *db, const char *sql)
{
    sqlite3 *sq;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(db, &sq), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(sq, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(sq);
    return n;
}

/* Hour h of the long node: a new load address (a restart) at hour 150,
 * inside a span; the samples listed in reverse at hour 77 (a contradicted
 * order: a new chunk of the stack series); a stack listed twice every 50
 * hours; every 10th sample growing. */
static struct profile *long_profile(uint32_t h)
{
    struct gen_params gp = { .seed = 21, .nstacks = 40, .nfuncs = 30, .hour = h,
                             .load_bias = h >= 150 ? 0x1000000 : 0, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    for (size_t i = 0; i < p->nsamples; i++)
        if (i % 10 == 3)
            for (int v = 0; v < 2; v++)
                p->samples[i].raw[v] += p->samples[i].raw[v] * (int64_t)h / 50;
    if (h == 77)
        for (size_t i = 0, j = p->nsamples - 1; i < j; i++, j--) {
            struct profile_sample t = p->samples[i];
            p->samples[i] = p->samples[j];
            p->samples[j] = t;
        }
    if (h % 50 == 10) {
        int64_t raw[PV_COUNT] = { 3, 3 << 20, 3, 3 << 20 };
        (void)profile_sample_add(p, p->samples[1].stack, 0, raw);
    }
    profile_unsample(p);
    return p;
}

/* Leaks over closed spans (their stack series, store/sseries.c) answers
 * what the folded profiles answer, and what the sample sets answer with
 * every stack series gone: across a restart inside a span, a contradicted
 * sample order, a stack listed twice, stacks the options fold together, a
 * dump imported late (first in time, newest id), a window cutting spans,
 * and after a retention thinned the history and packed it again. */
static void test_stored_leaks_spans_path_equals_profiles_path(void **state)
{
    (void)state;
    char *dir = qt_tmpdir(), *db = qt_path(dir, "long.db");
    enum { H = 300 };
    int64_t t0 = (hp_wall_ms() / 3600000 - H - 2) * INT64_C(3600000);
    struct store *st = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_open(db, STORE_OPEN_WRITE, &st, &err), 0);
    int64_t node_id, id;
    struct store_node_info ni = { .name = "long", .kind = "doris" };
    assert_int_equal(store_node_upsert(st, &ni, &node_id, &err), 0);
    for (uint32_t h = 0; h <= H; h++) {
        /* The last one is hour 0's dump, imported late. */
        uint32_t hour = h == H ? 0 : h + 1;
        struct profile *p = long_profile(hour);
        struct store_stat stats[] = {
            { "memory_query_trackers_sum_bytes", "bytes", hour % 3 ? 0 : 4e9 },
            { "memory_load_trackers_sum_bytes", "bytes", 0 },
        };
        if (store_snapshot_insert(st, node_id, t0 + (int64_t)hour * 3600000, p, NULL, 0, NULL,
                                  stats, 2, &id, &err) < 0)
            fail_msg("insert: %.*s", (int)err.len, err.data);
        profile_free(p);
    }
    store_close(st);
    /* A row for each of two closed spans, a group of the open span. */
    assert_int_equal(db_count(db, "SELECT count(*) FROM stack_series"), 3);
    assert_true(db_count(db, "SELECT count(*) FROM stack_series WHERE size > 0") == 3);
    const char *dbs[] = { db };
    static const char *const variants[][12] = {
        { "leaks", "--top", "0", NULL },
        { "leaks", "long", "--format", "json", NULL },
        { "leaks", "--top", "0", "--sample", "inuse_objects", "--format", "json", NULL },
        { "leaks", "--top", "0", "--sample", "alloc_space", NULL },
        { "leaks", "--top", "0", "--since", "200h", "--format", "json", NULL },
        /* Frames dropped: stacks that fold into one entry. */
        { "leaks", "--top", "0", "--ignore", "Alloc|Build|Merge", "--format", "json", NULL },
        { "leaks", "--top", "0", "--keep-allocator", NULL },
    };
    const char *const marks[] = { "rate_per_hour", "/h ", NULL };
    assert_int_equal(same_both_paths(dbs, 1, variants, HP_ARRAY_SIZE(variants),
                                     "HEAPFLEET_LEAKS_VIA=profiles", marks),
                     HP_ARRAY_SIZE(variants));
    /* The same from the sample sets alone (the stack series unused). */
    assert_int_equal(same_both_paths(dbs, 1, variants, HP_ARRAY_SIZE(variants),
                                     "HEAPFLEET_LEAKS_VIA=samples", marks),
                     HP_ARRAY_SIZE(variants));
    /* And the series are what is read: the snapshots of the closed spans
     * and of the open span's complete group (2 x 128 + 32 of 301), the rest
     * from their sample sets. */
    struct query_snapshot *snaps = hp_xcalloc(H + 1, sizeof(*snaps));
    assert_int_equal(store_open(db, STORE_OPEN_READ, &st, &err), 0);
    for (int64_t i = 0; i <= H; i++)
        snaps[i] = (struct query_snapshot){ .node = "long", .id = i + 1,
                                            .time_s = i == H ? 0 : i + 1 };
    struct query_opts qo;
    query_opts_init(&qo);
    for (unsigned fl = 0; fl < 2; fl++) {
        struct query_stored *qs = NULL;
        size_t from_series, from_samples;
        if (query_stored_fill(st, &qo, snaps, H + 1, fl ? QUERY_STORED_SAMPLE_SETS : 0, NULL,
                              &qs, &err) < 0)
            fail_msg("fill: %.*s", (int)err.len, err.data);
        query_stored_counts(qs, &from_series, &from_samples);
        assert_int_equal(from_series, fl ? 0 : 9 * 32);
        assert_int_equal(from_samples, fl ? H + 1 : H + 1 - 9 * 32);
        query_stored_free(qs);
    }
    store_close(st);
    free(snaps);
    hp_buf_release(&err);
    /* Thinned: days older than 5 keep one snapshot each; retention packs
     * what no span covers any more. */
    char *argv[] = { getenv("QUERY_EXE"), "retain", "--retain", "0", "--thin-after", "5d",
                     "--db", db, NULL };
    char *out = qt_path(dir, "retain.txt");
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *said = qt_slurp(out);
    assert_non_null(strstr(said, "spans of older snapshots packed"));
    free(said);
    free(out);
    /* Every closed span has one row of its own. */
    assert_true(db_count(db, "SELECT count(*) FROM function_series_spans WHERE closed = 1") > 0);
    assert_int_equal(db_count(db, "SELECT count(*) FROM function_series_spans p"
                                  " WHERE closed = 1 AND NOT EXISTS (SELECT 1 FROM stack_series s"
                                  " WHERE s.node_id = p.node_id AND s.first_id = p.first_id"
                                  " AND s.last_id = p.last_id)"),
                     0);
    assert_int_equal(same_both_paths(dbs, 1, variants, 3, "HEAPFLEET_LEAKS_VIA=profiles", marks),
                     3);
    unlink(db);
    free(db);
    qt_tmpdir_remove(dir);
}

/* Nodes on one build of the binaries share their stored stacks, and
 * `query leaks` over them resolves a stack once for all of them (the
 * stack cache, query/stored.h). Nodes of three builds, symbolized or not
 * (a frame labelled by its address says where that process mapped it: a
 * node's own, never taken from another), over a closed span, a group of
 * the open one and its newest snapshots: the answers are the folded
 * profiles', byte for byte, and the cache served most stacks. */
static const struct sb_node {
    const char *name;
    uint64_t build, bias;
    bool symbolize;
} sb_nodes[] = {
    { "b1-a", 1, 0, true },
    { "b1-b", 1, 0x7000000, true },
    { "b3-bare-a", 3, 0, false }, /* build 3 is never symbolized */
    { "b3-bare-b", 3, 0x3000000, false },
    { "b1-c", 1, 0, true },
    { "b2-a", 2, 0, true },
};
enum { SB_HOURS = 170, SB_STACKS = 150 };

static void test_stored_leaks_shared_build(void **state)
{
    (void)state;
    char *dir = qt_tmpdir(), *db = qt_path(dir, "builds.db");
    int64_t t0 = (hp_wall_ms() / 3600000 - SB_HOURS - 2) * INT64_C(3600000);
    struct store *st = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_open(db, STORE_OPEN_WRITE, &st, &err), 0);
    int64_t node_id[HP_ARRAY_SIZE(sb_nodes)], id;
    for (size_t k = 0; k < HP_ARRAY_SIZE(sb_nodes); k++) {
        struct store_node_info ni = { .name = sb_nodes[k].name, .kind = "doris" };
        assert_int_equal(store_node_upsert(st, &ni, &node_id[k], &err), 0);
        for (uint32_t h = 0; h < SB_HOURS; h++) {
            struct gen_params gp = { .seed = 50 + k, .build = sb_nodes[k].build,
                                     .nstacks = SB_STACKS, .nfuncs = 120, .hour = h,
                                     .load_bias = 0x555500000000u + sb_nodes[k].bias,
                                     .symbolize = sb_nodes[k].symbolize };
            struct profile *p = gen_profile(&gp, NULL, NULL);
            grow_some(p, h);
            struct store_stat stats[] = {
                { "memory_query_trackers_sum_bytes", "bytes", h % 3 ? 0 : 4e9 },
                { "memory_load_trackers_sum_bytes", "bytes", 0 },
            };
            if (store_snapshot_insert(st, node_id[k], t0 + (int64_t)h * 3600000, p, NULL, 0,
                                      NULL, stats, 2, &id, &err) < 0)
                fail_msg("insert: %.*s", (int)err.len, err.data);
            profile_free(p);
        }
    }
    store_close(st);
    /* One build's nodes share their stacks in the store: each build's
     * twice SB_STACKS at most (its paths), where nodes sharing nothing would
     * make 6 x (SB_STACKS + ~130 of the hour). */
    assert_true(db_count(db, "SELECT count(*) FROM stacks") <= 3 * 2 * SB_STACKS);
    const char *dbs[] = { db };
    static const char *const variants[][12] = {
        { "leaks", "--top", "0", "--jobs", "1", NULL },
        { "leaks", "--top", "0", "--jobs", "1", "--format", "json", NULL },
        { "leaks", "--top", "0", "--jobs", "1", "--sample", "inuse_objects", NULL },
        { "leaks", "--top", "0", "--jobs", "1", "--keep-allocator", "--format", "json", NULL },
        { "leaks", "--top", "0", "--jobs", "2", "--since", "30h", NULL },
    };
    const char *const marks[] = { "rate_per_hour", "/h ", NULL };
    assert_int_equal(same_both_paths(dbs, 1, variants, HP_ARRAY_SIZE(variants),
                                     "HEAPFLEET_LEAKS_VIA=profiles", marks),
                     HP_ARRAY_SIZE(variants));
    assert_int_equal(same_both_paths(dbs, 1, variants, 2, "HEAPFLEET_LEAKS_VIA=uncached", marks),
                     2);
    /* Suspects of the bare nodes were among them, named by addresses. */
    char *out = qt_path(dir, "leaks.txt");
    char *text = leaks_text(db, out);
    const char *bare = strstr(text, "Node b3-bare-b");
    assert_non_null(bare);
    assert_non_null(strstr(bare, " 0x"));
    free(text);
    unlink(out);
    free(out);

    /* One cache over the nodes in turn, as a worker reads them: after the
     * first node of a build, its stacks are found. */
    struct query_stack_cache *cache = query_stack_cache_new();
    struct query_opts qo;
    query_opts_init(&qo);
    assert_int_equal(store_open(db, STORE_OPEN_READ, &st, &err), 0);
    size_t lookups = 0, hits = 0, lookups0 = 0, hits0 = 0;
    bool gave_up = true;
    struct query_snapshot snaps[SB_HOURS];
    for (size_t k = 0; k < HP_ARRAY_SIZE(sb_nodes); k++) {
        /* Node k's snapshots, ids in the order they were inserted. */
        for (uint32_t h = 0; h < SB_HOURS; h++)
            snaps[h] = (struct query_snapshot){ .node = sb_nodes[k].name,
                                                .id = (int64_t)(k * SB_HOURS + h + 1),
                                                .time_s = t0 / 1000 + h * 3600 };
        struct query_stored *qs = NULL;
        if (query_stored_fill(st, &qo, snaps, SB_HOURS, 0, cache, &qs, &err) < 0)
            fail_msg("fill: %.*s", (int)err.len, err.data);
        query_stored_free(qs);
        query_stack_cache_counts(cache, &lookups, &hits, &gave_up);
        size_t l = lookups - lookups0, f = hits - hits0;
        printf("# %s: %zu stacks looked up, %zu found\n", sb_nodes[k].name, l, f);
        /* b1-b and b1-c after b1-a (symbolized, build 1): the build's
         * SB_STACKS found, and most of the paths of the hour; a bare
         * node's are never kept, and b2-a's build is new. */
        if (k == 1 || k == 4)
            assert_true(f >= SB_STACKS && f * 10 > l * 8);
        else
            assert_int_equal(f, 0);
        lookups0 = lookups;
        hits0 = hits;
    }
    assert_false(gave_up);
    query_stack_cache_free(cache);
    store_close(st);
    hp_buf_release(&err);
    unlink(db);
    free(db);
    qt_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stored_leaks_name_paths_and_idle),
        cmocka_unit_test(test_stored_leaks_ids_path_equals_profiles_path),
        cmocka_unit_test(test_stored_trend_totals_path_equals_profiles_path),
        cmocka_unit_test(test_stored_trend_reads_no_profile),
        cmocka_unit_test(test_stored_leaks_after_retain_equals_scratch),
        cmocka_unit_test(test_stored_discrepancy_uses_stored_figures),
        cmocka_unit_test(test_stored_fleet_and_trend),
        cmocka_unit_test(test_stored_cli_says_what_is_wrong),
        cmocka_unit_test(test_stored_nodes_counts_and_columns),
        cmocka_unit_test(test_stored_retain_dry_run),
        cmocka_unit_test(test_stored_help_is_per_command),
        cmocka_unit_test(test_stored_leaks_jobs_same_answers),
        cmocka_unit_test(test_stored_leaks_spans_path_equals_profiles_path),
        cmocka_unit_test(test_stored_leaks_shared_build),
    };
    /* One test (meson test query-leaks-jobs: the threads suite). */
    if (getenv("QT_FILTER"))
        cmocka_set_test_filter(getenv("QT_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
