/* pprof reader tests: real profiles written by Go's runtime/pprof and by
 * `go tool pprof -proto` (tests/data, see its README), and hostile profiles
 * built with the same protobuf-c library the reader uses, one defect each.
 *
 * Environment (set by meson): DATADIR = tests/data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <zlib.h>

#include "collector/ingest/ingest.h"
#include "store/proto/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;

static char *data_path(const char *name)
{
    const char *d = getenv("DATADIR");
    return hp_xasprintf("%s/%s", d ? d : "tests/data", name);
}

static struct profile *parse_file_ok(const char *name)
{
    char *path = data_path(name);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = ingest_parse_file(path, NULL, &p, &err);
    if (r != 0)
        fprintf(stderr, "%s: %s\n", path, err.data ? err.data : hp_strerror(r));
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    free(path);
    return p;
}

/* Sum of raw values over samples whose leaf location's innermost frame is
 * `fn`. */
static void leaf_sum(const struct profile *p, const char *fn, int64_t ret[PV_COUNT])
{
    memset(ret, 0, PV_COUNT * sizeof(*ret));
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *s = &p->samples[i];
        const struct profile_location *l = &p->locs[profile_stack_locs(p, s->stack)[0]];
        if (l->nframes && p->frames[l->frame_off].function &&
            strcmp(p->frames[l->frame_off].function, fn) == 0)
            for (int v = 0; v < PV_COUNT; v++)
                ret[v] += s->raw[v];
    }
}

/* Go wrote this with MemProfileRate = 1 (tests/data/gen/goheap.go): the
 * known paths hold exactly what the program allocated. */
static void test_pprof_reads_go_heap_profile(void **state)
{
    (void)state;
    struct profile *p = parse_file_ok("go-heap.pb.gz");
    assert_int_equal(p->format, PROFILE_FORMAT_PPROF);
    assert_int_equal(p->scaling, PROFILE_SCALING_NONE);
    assert_true(p->has_alloc);
    assert_int_equal(p->period, 1);
    assert_true(p->time_ns > INT64_C(1600000000) * 1000000000);
    assert_string_equal(p->value_unit[PV_INUSE_SPACE], "bytes");
    assert_string_equal(p->value_unit[PV_ALLOC_OBJECTS], "count");
    /* runtime/pprof lists every executable mapping (binary, vdso, ...). */
    assert_true(p->nmappings >= 1);
    int64_t v[PV_COUNT];
    leaf_sum(p, "main.leakTabletSchema", v);
    assert_int_equal(v[PV_INUSE_OBJECTS], 64);
    assert_int_equal(v[PV_INUSE_SPACE], 64 * 4096);
    leaf_sum(p, "main.newSegment", v);
    assert_int_equal(v[PV_INUSE_OBJECTS], 32);
    assert_int_equal(v[PV_INUSE_SPACE], 32 * 16384);
    leaf_sum(p, "main.transient", v);
    assert_int_equal(v[PV_INUSE_SPACE], 0);
    assert_int_equal(v[PV_ALLOC_OBJECTS], 100);
    assert_int_equal(v[PV_ALLOC_SPACE], 100 * 1024);
    /* newSegment is inlined into segmentCache: one location, two frames,
     * innermost first, with file and line; it is in the Go binary's mapping. */
    bool found = false;
    for (size_t i = 0; i < p->nlocs; i++) {
        const struct profile_location *l = &p->locs[i];
        if (l->nframes != 2 || strcmp(p->frames[l->frame_off].function, "main.newSegment"))
            continue;
        found = true;
        assert_string_equal(p->frames[l->frame_off + 1].function, "main.segmentCache");
        assert_non_null(strstr(p->frames[l->frame_off].file, "goheap.go"));
        assert_int_equal(p->frames[l->frame_off].line, 27);
        assert_int_equal(p->frames[l->frame_off + 1].line, 32);
        assert_true(l->flags & PROFILE_LOC_SYMBOLIZED);
        assert_true(l->mapping >= 1);
        const struct profile_mapping *pm = &p->mappings[l->mapping - 1];
        assert_non_null(strstr(pm->path, "goheap"));
        assert_true(l->address >= pm->start && l->address < pm->limit);
    }
    assert_true(found);
    profile_free(p);
}

static void totals_int(const struct profile *p, int64_t ret[PV_COUNT])
{
    double t[PV_COUNT];
    profile_totals(p, t);
    for (int v = 0; v < PV_COUNT; v++)
        ret[v] = (int64_t)t[v];
}

static unsigned char *gunzip_file(const char *name, size_t *ret_len)
{
    char *path = data_path(name);
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = hp_xmalloc(cap);
    int n;
    while ((n = gzread(gz, buf + len, (unsigned)(cap - len))) > 0)
        len += (size_t)n;
    gzclose(gz);
    free(path);
    *ret_len = len;
    return buf;
}

/* The same profile uncompressed: detected by its first fields (Go starts
 * with period_type, not sample_type) and read identically. */
static void test_pprof_plain_equals_gzipped(void **state)
{
    (void)state;
    size_t len;
    unsigned char *plain = gunzip_file("go-heap.pb.gz", &len);
    assert_int_equal(ingest_detect(plain, len), PROFILE_FORMAT_PPROF);
    struct profile *a = parse_file_ok("go-heap.pb.gz"), *b = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(ingest_parse(plain, len, NULL, &b, &err), 0);
    int64_t ta[PV_COUNT], tb[PV_COUNT];
    totals_int(a, ta);
    totals_int(b, tb);
    assert_memory_equal(ta, tb, sizeof(ta));
    assert_int_equal(a->nsamples, b->nsamples);
    assert_int_equal(a->nlocs, b->nlocs);
    /* Streamed in small chunks through the parser API, same result. */
    struct ingest_parser *ps = ingest_parser_new(NULL);
    for (size_t off = 0; off < len; off += 7)
        assert_int_equal(ingest_parser_feed(ps, plain + off, HP_MIN(7, len - off), &err), 0);
    struct profile *c = NULL;
    assert_int_equal(ingest_parser_finish(ps, &c, &err), 0);
    int64_t tc[PV_COUNT];
    totals_int(c, tc);
    assert_memory_equal(ta, tc, sizeof(ta));
    ingest_parser_free(ps);
    profile_free(a);
    profile_free(b);
    profile_free(c);
    free(plain);
    hp_buf_release(&err);
}

/* tc-heapprofile.pb.gz is `go tool pprof -proto` of tc-heapprofile.heap, a
 * real tcmalloc heap profile: pprof's legacy reader and ours agree, and the
 * "space"/"objects" sample types land on the in-use columns. */
static void test_pprof_matches_go_tool_conversion_of_gperf(void **state)
{
    (void)state;
    struct profile *g = parse_file_ok("tc-heapprofile.heap");
    struct profile *pp = parse_file_ok("tc-heapprofile.pb.gz");
    int64_t tg[PV_COUNT], tp[PV_COUNT];
    totals_int(g, tg);
    totals_int(pp, tp);
    assert_true(tp[PV_INUSE_SPACE] > 0);
    assert_int_equal(tg[PV_INUSE_SPACE], tp[PV_INUSE_SPACE]);
    assert_int_equal(tg[PV_INUSE_OBJECTS], tp[PV_INUSE_OBJECTS]);
    assert_false(pp->has_alloc);
    assert_int_equal(g->nsamples, pp->nsamples);
    /* pprof keeps only the mappings samples use; each has its file. */
    assert_true(pp->nmappings >= 2);
    for (size_t i = 0; i < pp->nmappings; i++)
        assert_true(pp->mappings[i].path[0] == '/');
    profile_free(g);
    profile_free(pp);
}

/* ---- hostile profiles, built with protobuf-c ---- */

struct mk {
    pb_profile pb;
    Perftools__Profiles__ValueType vt[2], *vtp[2];
    Perftools__Profiles__Mapping map[2], *mapp[2];
    Perftools__Profiles__Function fn[2], *fnp[2];
    Perftools__Profiles__Line line[2], *linep[2];
    Perftools__Profiles__Location loc[3], *locp[3];
    Perftools__Profiles__Sample smp[3], *smpp[3];
    uint64_t ids[3][4];
    int64_t vals[3][2];
    ProtobufCBinaryData strs[16];
};

static void add_str(struct mk *m, const char *s)
{
    m->strs[m->pb.n_string_table++] =
        (ProtobufCBinaryData){ .len = strlen(s), .data = (uint8_t *)(uintptr_t)s };
}

/* A valid two-function profile: main -> leaf, inuse_objects/inuse_space,
 * mapping 1 = /bin/app, mapping 2 = /lib/libx.so; sample 0 leaf-first
 * [2, 1], sample 1 [3]. Tests break one thing each. */
static void mk_init(struct mk *m)
{
    memset(m, 0, sizeof(*m));
    perftools__profiles__profile__init(&m->pb);
    m->pb.string_table = m->strs;
    add_str(m, "");              /* 0 */
    add_str(m, "inuse_objects"); /* 1 */
    add_str(m, "count");         /* 2 */
    add_str(m, "inuse_space");   /* 3 */
    add_str(m, "bytes");         /* 4 */
    add_str(m, "main");          /* 5 */
    add_str(m, "leaf");          /* 6 */
    add_str(m, "app.c");         /* 7 */
    add_str(m, "/bin/app");      /* 8 */
    add_str(m, "/lib/libx.so");  /* 9 */
    add_str(m, "ABCDEF0123");    /* 10 */
    for (int i = 0; i < 2; i++) {
        perftools__profiles__value_type__init(&m->vt[i]);
        m->vt[i].type = i ? 3 : 1;
        m->vt[i].unit = i ? 4 : 2;
        m->vtp[i] = &m->vt[i];
        perftools__profiles__mapping__init(&m->map[i]);
        /* Listed out of address order, so sorting renumbers them. */
        m->map[i].id = (uint64_t)i + 1;
        m->map[i].memory_start = i ? 0x1000 : 0x400000;
        m->map[i].memory_limit = i ? 0x2000 : 0x500000;
        m->map[i].filename = i ? 9 : 8;
        m->map[i].build_id = i ? 0 : 10;
        m->mapp[i] = &m->map[i];
        perftools__profiles__function__init(&m->fn[i]);
        m->fn[i].id = (uint64_t)i + 1;
        m->fn[i].name = 5 + i;
        m->fn[i].filename = 7;
        m->fnp[i] = &m->fn[i];
        perftools__profiles__line__init(&m->line[i]);
        m->line[i].function_id = (uint64_t)i + 1;
        m->line[i].line = 10 + i;
        m->linep[i] = &m->line[i];
    }
    for (int i = 0; i < 3; i++) {
        perftools__profiles__location__init(&m->loc[i]);
        m->loc[i].id = (uint64_t)i + 1;
        m->loc[i].mapping_id = i == 2 ? 2 : 1;
        m->loc[i].address = i == 2 ? 0x1100 : 0x400100 + (uint64_t)i * 0x10;
        m->loc[i].n_line = i == 2 ? 0 : 1;
        m->loc[i].line = &m->linep[i == 2 ? 0 : i];
        m->locp[i] = &m->loc[i];
    }
    for (int i = 0; i < 2; i++) {
        perftools__profiles__sample__init(&m->smp[i]);
        m->ids[i][0] = i ? 3 : 2;
        m->ids[i][1] = 1;
        m->smp[i].n_location_id = i ? 1 : 2;
        m->smp[i].location_id = m->ids[i];
        m->vals[i][0] = i ? 1 : 3;
        m->vals[i][1] = i ? 100 : 300;
        m->smp[i].n_value = 2;
        m->smp[i].value = m->vals[i];
        m->smpp[i] = &m->smp[i];
    }
    m->pb.n_sample_type = 2;
    m->pb.sample_type = m->vtp;
    m->pb.n_mapping = 2;
    m->pb.mapping = m->mapp;
    m->pb.n_function = 2;
    m->pb.function = m->fnp;
    m->pb.n_location = 3;
    m->pb.location = m->locp;
    m->pb.n_sample = 2;
    m->pb.sample = m->smpp;
    m->pb.period = 524288;
}

static uint8_t *mk_pack(struct mk *m, size_t *ret_len)
{
    size_t n = perftools__profiles__profile__get_packed_size(&m->pb);
    uint8_t *buf = hp_xmalloc(n + 1);
    assert_int_equal(perftools__profiles__profile__pack(&m->pb, buf), n);
    *ret_len = n;
    return buf;
}

static uint8_t *gzip_mem(const uint8_t *data, size_t len, size_t *ret_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
                     Z_OK);
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    uint8_t *out = hp_xmalloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *ret_len = cap - zs.avail_out;
    deflateEnd(&zs);
    return out;
}

static int parse_mem(const void *d, size_t n, const struct ingest_limits *lim,
                     struct profile **ret, struct hp_buf *err)
{
    hp_buf_reset(err);
    return ingest_parse(d, n, lim, ret, err);
}

/* Parse m (gzipped, as files are) and expect failure `code` with `want` in
 * the message. */
static void expect_error(struct mk *m, int code, const char *want)
{
    size_t n, gn;
    uint8_t *raw = mk_pack(m, &n);
    uint8_t *gz = gzip_mem(raw, n, &gn);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = parse_mem(gz, gn, NULL, &p, &err);
    if (r != code || !err.data || !strstr(err.data, want))
        fprintf(stderr, "got %d \"%s\", want %d \"%s\"\n", r, err.data ? err.data : "", code,
                want);
    assert_int_equal(r, code);
    assert_non_null(strstr(err.data, want));
    assert_null(p);
    hp_buf_release(&err);
    free(raw);
    free(gz);
}

static void test_pprof_builds_model_from_valid_message(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(raw, n, NULL, &p, &err), 0);
    assert_int_equal(p->nsamples, 2);
    assert_false(p->has_alloc);
    assert_int_equal(p->period, 524288);
    /* Mappings were sorted by start: libx (0x1000) first. Every location
     * still points at the mapping it named. */
    assert_int_equal(p->nmappings, 2);
    assert_string_equal(p->mappings[0].path, "/lib/libx.so");
    assert_string_equal(p->mappings[1].path, "/bin/app");
    assert_string_equal(p->mappings[1].build_id, "abcdef0123"); /* lowercased */
    assert_null(p->mappings[0].build_id);
    const uint32_t *s0 = profile_stack_locs(p, p->samples[0].stack);
    const struct profile_location *leaf = &p->locs[s0[0]], *caller = &p->locs[s0[1]];
    assert_int_equal(leaf->address, 0x400110);
    assert_string_equal(p->mappings[leaf->mapping - 1].path, "/bin/app");
    assert_string_equal(p->frames[leaf->frame_off].function, "leaf");
    assert_string_equal(p->frames[caller->frame_off].function, "main");
    assert_string_equal(p->frames[caller->frame_off].file, "app.c");
    assert_int_equal(p->frames[caller->frame_off].line, 10);
    const uint32_t *s1 = profile_stack_locs(p, p->samples[1].stack);
    assert_string_equal(p->mappings[p->locs[s1[0]].mapping - 1].path, "/lib/libx.so");
    assert_int_equal(p->locs[s1[0]].nframes, 0);
    int64_t t[PV_COUNT];
    totals_int(p, t);
    assert_int_equal(t[PV_INUSE_OBJECTS], 4);
    assert_int_equal(t[PV_INUSE_SPACE], 400);
    profile_free(p);
    hp_buf_release(&err);
    free(raw);
}

/* The same address in two mappings (or with two line tables) stays two
 * locations, each with its own mapping and frames. */
static void test_pprof_shared_address_in_two_mappings(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.loc[2].address = m.loc[1].address; /* 0x400110, but in mapping 2 */
    m.loc[2].n_line = 1;
    m.loc[2].line = &m.linep[0]; /* "main" instead of "leaf" */
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(raw, n, NULL, &p, &err), 0);
    uint32_t a = profile_stack_locs(p, p->samples[0].stack)[0];
    uint32_t b = profile_stack_locs(p, p->samples[1].stack)[0];
    assert_int_not_equal(a, b);
    assert_int_equal(p->locs[a].address, p->locs[b].address);
    assert_string_equal(p->mappings[p->locs[a].mapping - 1].path, "/bin/app");
    assert_string_equal(p->mappings[p->locs[b].mapping - 1].path, "/lib/libx.so");
    assert_string_equal(p->frames[p->locs[a].frame_off].function, "leaf");
    assert_string_equal(p->frames[p->locs[b].frame_off].function, "main");
    profile_free(p);
    hp_buf_release(&err);
    free(raw);
}

/* Two samples over one stack (pprof keeps them apart by label) become one
 * sample with the sum; a sample without locations keeps its value. */
static void test_pprof_merges_equal_stacks_and_keeps_empty_ones(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.ids[1][0] = 2;
    m.ids[1][1] = 1;
    m.smp[1].n_location_id = 2;
    perftools__profiles__sample__init(&m.smp[2]);
    m.smp[2].n_value = 2;
    m.vals[2][0] = 5;
    m.vals[2][1] = 50;
    m.smp[2].value = m.vals[2];
    m.smpp[2] = &m.smp[2];
    m.pb.n_sample = 3;
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(raw, n, NULL, &p, &err), 0);
    assert_int_equal(p->nsamples, 2);
    assert_int_equal(p->samples[0].raw[PV_INUSE_SPACE], 400);
    assert_int_equal(p->samples[0].raw[PV_INUSE_OBJECTS], 4);
    int64_t t[PV_COUNT];
    totals_int(p, t);
    assert_int_equal(t[PV_INUSE_SPACE], 450);
    profile_free(p);
    hp_buf_release(&err);
    free(raw);
}

/* Names that are not UTF-8 are kept byte for byte (the renderers clean them). */
static void test_pprof_keeps_non_utf8_names(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.strs[6] = (ProtobufCBinaryData){ .len = 5, .data = (uint8_t *)"le\xff\xfe" "f" };
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(raw, n, NULL, &p, &err), 0);
    const struct profile_location *leaf = &p->locs[profile_stack_locs(p, p->samples[0].stack)[0]];
    assert_string_equal(p->frames[leaf->frame_off].function, "le\xff\xfe" "f");
    profile_free(p);
    hp_buf_release(&err);
    free(raw);
}

static void test_pprof_rejects_missing_location(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.ids[1][0] = 99;
    expect_error(&m, HP_EPARSE, "pprof profile: sample 1 refers to location id 99 which does "
                                "not exist");
}

static void test_pprof_rejects_missing_mapping(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.loc[2].mapping_id = 7;
    expect_error(&m, HP_EPARSE, "location id 3 refers to mapping id 7 which does not exist");
}

static void test_pprof_rejects_missing_function(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.line[1].function_id = 42;
    expect_error(&m, HP_EPARSE, "location id 2, line 0 refers to function id 42");
}

static void test_pprof_rejects_string_index_out_of_range(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.fn[1].name = 1000;
    expect_error(&m, HP_EPARSE,
                 "function id 2 has name string index 1000, but the string table has 11 "
                 "entries");
    mk_init(&m);
    m.map[0].filename = -3;
    expect_error(&m, HP_EPARSE, "mapping id 1 has filename string index -3");
    mk_init(&m);
    m.vt[1].unit = 11;
    expect_error(&m, HP_EPARSE, "sample_type 1 has unit string index 11");
}

static void test_pprof_rejects_bad_ids(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.loc[2].id = 1;
    expect_error(&m, HP_EPARSE, "location 2 repeats id 1 of location 0");
    mk_init(&m);
    m.fn[0].id = 0;
    expect_error(&m, HP_EPARSE, "function 0 has id 0");
}

static void test_pprof_rejects_value_count_mismatch(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.smp[1].n_value = 1;
    expect_error(&m, HP_EPARSE, "sample 1 has 1 values but the profile declares 2 sample types");
}

static void test_pprof_rejects_non_heap_profile(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    add_str(&m, "cpu");         /* 11 */
    add_str(&m, "nanoseconds"); /* 12 */
    m.vt[0].type = 11;
    m.vt[0].unit = 12;
    m.vt[1].type = 11;
    expect_error(&m, HP_EPARSE, "no heap sample types (found: cpu/nanoseconds, cpu/bytes)");
}

static void test_pprof_rejects_nonempty_first_string(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    m.strs[0] = (ProtobufCBinaryData){ .len = 1, .data = (uint8_t *)"x" };
    expect_error(&m, HP_EPARSE, "string_table[0] must be the empty string");
}

static void test_pprof_limits_frames_and_stacks(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_frames = 1;
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(raw, n, &lim, &p, &err), HP_ETOOBIG);
    assert_non_null(strstr(err.data, "sample 0 has 2 locations (the frame limit is 1)"));
    ingest_limits_default(&lim);
    lim.max_stacks = 1;
    assert_int_equal(parse_mem(raw, n, &lim, &p, &err), HP_ETOOBIG);
    assert_non_null(strstr(err.data, "more than 1 distinct stacks"));
    ingest_limits_default(&lim);
    lim.max_mappings = 1;
    assert_int_equal(parse_mem(raw, n, &lim, &p, &err), HP_ETOOBIG);
    assert_non_null(strstr(err.data, "2 mappings (the limit is 1)"));
    hp_buf_release(&err);
    free(raw);
}

static void test_pprof_rejects_broken_gzip(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    size_t n, gn;
    uint8_t *raw = mk_pack(&m, &n);
    uint8_t *gz = gzip_mem(raw, n, &gn);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    /* Truncated download. */
    assert_int_equal(parse_mem(gz, gn - 10, NULL, &p, &err), HP_EPARSE);
    assert_non_null(strstr(err.data, "gzip stream ends early"));
    /* Flipped bytes in the deflate data. */
    uint8_t *bad = hp_xmalloc(gn);
    memcpy(bad, gz, gn);
    for (size_t i = 12; i < gn - 8; i += 3)
        bad[i] ^= 0x5a;
    assert_int_equal(parse_mem(bad, gn, NULL, &p, &err), HP_EPARSE);
    assert_true(strstr(err.data, "corrupt gzip data") || strstr(err.data, "malformed protobuf") ||
                strstr(err.data, "ends early"));
    /* Garbage after the stream. */
    uint8_t *tail = hp_xmalloc(gn + 4);
    memcpy(tail, gz, gn);
    memcpy(tail + gn, "junk", 4);
    assert_int_equal(parse_mem(tail, gn + 4, NULL, &p, &err), HP_EPARSE);
    assert_non_null(strstr(err.data, "4 unexpected bytes after the end of the gzip stream"));
    /* Two members (concatenated .gz files) are one stream: read fine. */
    uint8_t *two = hp_xmalloc(2 * gn);
    size_t half = n / 2, g1, g2;
    uint8_t *p1 = gzip_mem(raw, half, &g1), *p2 = gzip_mem(raw + half, n - half, &g2);
    memcpy(two, p1, g1);
    memcpy(two + g1, p2, g2);
    assert_int_equal(parse_mem(two, g1 + g2, NULL, &p, &err), 0);
    assert_int_equal(p->nsamples, 2);
    profile_free(p);
    free(p1);
    free(p2);
    free(two);
    free(tail);
    free(bad);
    free(gz);
    free(raw);
    hp_buf_release(&err);
}

/* A gzip bomb stops at the size limit, not at the end of memory. */
static void test_pprof_gzip_bomb_hits_limit(void **state)
{
    (void)state;
    size_t n = 16 << 20, gn;
    uint8_t *zeros = hp_xcalloc(1, n);
    zeros[0] = 0x0a; /* looks like a profile.proto start */
    uint8_t *gz = gzip_mem(zeros, n, &gn);
    free(zeros);
    assert_true(gn < n / 100);
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = 4 << 20;
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(gz, gn, &lim, &p, &err), HP_ETOOBIG);
    assert_non_null(strstr(err.data, "decompressed size is over the limit of 4194304 bytes"));
    free(gz);
    hp_buf_release(&err);
}

/* Millions of empty sub-messages would take 40x their size to decode: the
 * budget refuses them before memory runs out. */
static void test_pprof_decode_memory_is_budgeted(void **state)
{
    (void)state;
    size_t n = 2 << 20;
    uint8_t *buf = hp_xmalloc(n);
    for (size_t i = 0; i < n; i += 2) {
        buf[i] = 0x22; /* field 4 (location), length-delimited */
        buf[i + 1] = 0x00;
    }
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    assert_int_equal(parse_mem(buf, n, NULL, &p, &err), HP_ETOOBIG);
    assert_non_null(strstr(err.data, "needs more than"));
    free(buf);
    hp_buf_release(&err);
}

/* Broken protobuf: the message names the byte and the element. */
static void test_pprof_malformed_protobuf_names_offset(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    size_t n;
    uint8_t *raw = mk_pack(&m, &n);
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    /* Cut inside the last element. */
    assert_int_equal(parse_mem(raw, n - 3, NULL, &p, &err), HP_EPARSE);
    assert_non_null(strstr(err.data, "malformed protobuf"));
    assert_non_null(strstr(err.data, "at byte"));
    /* A location whose inner field has an invalid wire type. */
    static const uint8_t bad_loc[] = { 0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, /* sample_type */
                                       0x22, 0x02, 0x0f, 0x00 };
    assert_int_equal(parse_mem(bad_loc, sizeof(bad_loc), NULL, &p, &err), HP_EPARSE);
    assert_non_null(strstr(err.data, "location element 0 at byte 6"));
    free(raw);
    hp_buf_release(&err);
}

/* A profile with only alloc_* types (as some converters write) says so, so
 * a reader asking it for inuse_space can refuse instead of totalling 0. */
static void test_pprof_records_which_values_it_has(void **state)
{
    (void)state;
    struct mk m;
    mk_init(&m);
    add_str(&m, "alloc_objects"); /* 11 */
    add_str(&m, "alloc_space");   /* 12 */
    m.vt[0].type = 11;
    m.vt[1].type = 12;
    size_t n;
    uint8_t *buf = mk_pack(&m, &n);
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(parse_mem(buf, n, NULL, &p, &err), 0);
    assert_int_equal(p->values_present, (1u << PV_ALLOC_OBJECTS) | (1u << PV_ALLOC_SPACE));
    profile_free(p);
    p = NULL;
    /* The query CLI refuses --sample inuse_space on it, naming what it has
     * (before: a table totalling 0 B). */
    const char *q = getenv("QUERY_EXE");
    if (q) {
        char dir[] = "/tmp/hp-pprof-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char *file = hp_xasprintf("%s/alloc-only.pb", dir);
        char *errf = hp_xasprintf("%s/err.txt", dir);
        FILE *f = fopen(file, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, n, f), n);
        fclose(f);
        char *cmd = hp_xasprintf("'%s' top '%s' --no-symbolize --sample inuse_space >/dev/null 2>'%s'",
                                 q, file, errf);
        int rc = system(cmd);
        assert_true(rc != 0);
        char *msg = NULL;
        size_t mlen = 0;
        assert_int_equal(hp_file_read(errf, 1 << 20, &msg, &mlen, NULL), 0);
        if (!strstr(msg, "has no inuse_space values (it has: alloc_objects, alloc_space)"))
            fprintf(stderr, "query said: %s\n", msg);
        assert_non_null(strstr(msg, "has no inuse_space values (it has: alloc_objects, alloc_space)"));
        free(cmd);
        cmd = hp_xasprintf("'%s' top '%s' --no-symbolize --sample alloc_space >/dev/null 2>&1", q,
                           file);
        assert_int_equal(system(cmd), 0);
        free(cmd);
        free(msg);
        unlink(file);
        unlink(errf);
        rmdir(dir);
        free(file);
        free(errf);
    }
    free(buf);
    mk_init(&m);
    buf = mk_pack(&m, &n);
    assert_int_equal(parse_mem(buf, n, NULL, &p, &err), 0);
    assert_int_equal(p->values_present, (1u << PV_INUSE_OBJECTS) | (1u << PV_INUSE_SPACE));
    profile_free(p);
    free(buf);
    hp_buf_release(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pprof_reads_go_heap_profile),
        cmocka_unit_test(test_pprof_plain_equals_gzipped),
        cmocka_unit_test(test_pprof_matches_go_tool_conversion_of_gperf),
        cmocka_unit_test(test_pprof_builds_model_from_valid_message),
        cmocka_unit_test(test_pprof_shared_address_in_two_mappings),
        cmocka_unit_test(test_pprof_merges_equal_stacks_and_keeps_empty_ones),
        cmocka_unit_test(test_pprof_keeps_non_utf8_names),
        cmocka_unit_test(test_pprof_rejects_missing_location),
        cmocka_unit_test(test_pprof_rejects_missing_mapping),
        cmocka_unit_test(test_pprof_rejects_missing_function),
        cmocka_unit_test(test_pprof_rejects_string_index_out_of_range),
        cmocka_unit_test(test_pprof_rejects_bad_ids),
        cmocka_unit_test(test_pprof_rejects_value_count_mismatch),
        cmocka_unit_test(test_pprof_rejects_non_heap_profile),
        cmocka_unit_test(test_pprof_rejects_nonempty_first_string),
        cmocka_unit_test(test_pprof_limits_frames_and_stacks),
        cmocka_unit_test(test_pprof_rejects_broken_gzip),
        cmocka_unit_test(test_pprof_gzip_bomb_hits_limit),
        cmocka_unit_test(test_pprof_decode_memory_is_budgeted),
        cmocka_unit_test(test_pprof_malformed_protobuf_names_offset),
        cmocka_unit_test(test_pprof_records_which_values_it_has),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
