/* A node's stack view (store/view.c): the rows that resolve the stacks of
 * its newest closed spans, in one blob. Real SQLite files, real generated
 * profiles. A view must give exactly what the rows give, be used when it
 * is current, not when a location it copied changed (a later
 * symbolization), go with the snapshots it covers, and never be trusted
 * when its bytes are damaged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store-internal.h"
#include "tests/store/gen.h"

#define T0 INT64_C(1763798400000) /* 2025-11-22T08:00:00Z */
#define HOUR_MS INT64_C(3600000)
#define SPAN STORE_SPAN_SNAPSHOTS

struct fx {
    char dir[64];
    char db[128];
    struct store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/hf-view-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_close(f->s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void sql(const char *db, const char *text)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char *msg = NULL;
    int r = sqlite3_exec(h, text, NULL, NULL, &msg);
    if (r != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", text, msg);
    sqlite3_free(msg);
    sqlite3_close(h);
    assert_int_equal(r, SQLITE_OK);
}

static int64_t count_rows(const char *db, const char *text)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, text, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static int64_t put(struct store *s, int64_t node_id, int h, const struct gen_params *gp)
{
    struct gen_params g = *gp;
    g.hour = (uint32_t)h % 7;
    struct profile *p = gen_profile(&g, NULL, NULL);
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t id = 0;
    int r = store_snapshot_insert(s, node_id, T0 + h * HOUR_MS, p, NULL, 0, NULL, NULL, 0, &id,
                                  &err);
    if (r < 0)
        fprintf(stderr, "insert: %s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    profile_free(p);
    return id;
}

/* A node with `hours` hourly snapshots of gp; their ids into ids. */
static int64_t node_with(struct store *s, const char *name, const struct gen_params *gp,
                         int hours, int64_t *ids)
{
    struct store_node_info ni = { .name = name, .kind = "doris" };
    int64_t n = 0;
    assert_int_equal(store_node_upsert(s, &ni, &n, NULL), 0);
    for (int h = 0; h < hours; h++)
        ids[h] = put(s, n, h, gp);
    return n;
}

struct stack_ids {
    int64_t *v;
    size_t n, cap;
};

static int collect(const struct store_samples *ss, void *ctx)
{
    struct stack_ids *x = ctx;
    for (size_t i = 0; i < ss->n; i++) {
        x->v = hp_xgrow(x->v, &x->cap, x->n + 1, sizeof(*x->v));
        x->v[x->n++] = ss->samples[i].stack;
    }
    return 0;
}

/* The stacks snapshots ids[0..n) list, each once. */
static void stacks_of(struct store *s, const int64_t *ids, size_t n, struct stack_ids *out)
{
    memset(out, 0, sizeof(*out));
    assert_int_equal(store_snapshots_samples(s, ids, n, collect, out, NULL), 0);
    hp_qsort(out->v, out->n, sizeof(*out->v), hp_cmp_i64);
    size_t m = 0;
    for (size_t i = 0; i < out->n; i++)
        if (m == 0 || out->v[i] != out->v[m - 1])
            out->v[m++] = out->v[i];
    out->n = m;
}

/* Canon text of the stacks as snapshot `id` shows them, through view
 * (NULL: the rows alone). */
static char *load(struct store *s, int64_t id, const struct stack_ids *k,
                  const struct store_stack_view *view)
{
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_stacks_load(s, id, k->v, k->n, 0, view, &p, &err);
    if (r < 0)
        fprintf(stderr, "load: %s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    char *c = gen_canon(p);
    profile_free(p);
    return c;
}

/* Resolved stacks (store_stacks_resolve) as text: each stack's locations
 * leaf first, with their flags and labels. */
static char *resolve(struct store *s, int64_t id, const struct stack_ids *k,
                     const struct store_stack_view *view, unsigned flags, bool *ret_from_view)
{
    struct profile_resolved *r = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int rc = store_stacks_resolve(s, id, k->v, k->n, flags, view, &r, &err);
    if (rc < 0)
        fprintf(stderr, "resolve: %s\n", err.data);
    assert_int_equal(rc, 0);
    hp_buf_release(&err);
    assert_int_equal(r->nstacks, k->n);
    struct hp_buf out = HP_BUF_INIT(0);
    for (size_t i = 0; i < r->nstacks; i++) {
        hp_buf_printf(&out, "stack %zu:", i);
        for (uint32_t j = r->stack_off[i]; j < r->stack_off[i + 1]; j++) {
            const struct profile_rloc *l = &r->loc[r->locs[j]];
            hp_buf_printf(&out, " [%u", l->flags);
            for (uint32_t q = 0; q < l->nnames; q++)
                hp_buf_printf(&out, " %s", r->names[l->name_off + q].s);
            hp_buf_printf(&out, "]");
        }
        hp_buf_printf(&out, "\n");
    }
    *ret_from_view = r->from_view;
    profile_resolved_free(r);
    return out.data;
}

/* Packed and unpacked, a view is what it was; cut short at any byte, or
 * with a byte more, or naming a location it does not hold, it is refused
 * with the reason, never read past its end. */
static void test_view_pack_roundtrip_and_damage(void **state)
{
    (void)state;
    struct store_view_name fns[] = { { 3, "main", 4 }, { 900, "doris::Tablet::load", 19 } };
    struct store_view_name files[] = { { 7, "be/src/olap/tablet.cpp", 22 } };
    struct store_view_loc locs[] = { { 10, 2, 0x4010, 1, 0, 2 }, { 11, -1, 900, 0, 2, 0 },
                                     { 300000, 0, UINT64_MAX, 3, 2, 1 } };
    struct store_view_frame frames[] = { { 900, 7, 1234 }, { 3, 0, 0 }, { 3, 7, 1 } };
    struct store_view_stack stacks[] = { { 5, 0, 2 }, { 6000000000, 2, 3 } };
    uint32_t stack_locs[] = { 0, 1, 2, 0, 1 };
    struct store_view_obj objs[] = { { -1, 0 }, { 0, 4 }, { 2, 1ull << 40 } };
    struct store_view v = { .objs = objs, .nobjs = 3, .fns = fns, .nfns = 2, .files = files,
                            .nfiles = 1, .locs = locs, .nlocs = 3, .frames = frames,
                            .nframes = 3, .stacks = stacks, .nstacks = 2,
                            .stack_locs = stack_locs, .nstack_locs = 5 };
    struct store_pack b = { 0 };
    store_view_pack(&v, &b);
    struct store_view u;
    assert_int_equal(store_view_unpack(b.data, b.len, &u, NULL), 0);
    assert_int_equal(u.nobjs, 3);
    assert_int_equal(u.objs[0].id, -1);
    assert_true(u.objs[2].gen == 1ull << 40);
    assert_int_equal(u.nfns, 2);
    assert_int_equal(u.fns[1].id, 900);
    assert_int_equal(u.fns[1].len, 19);
    assert_memory_equal(u.fns[1].s, "doris::Tablet::load", 19);
    assert_int_equal(u.files[0].id, 7);
    assert_int_equal(u.nlocs, 3);
    assert_int_equal(u.locs[1].object_id, -1);
    assert_true(u.locs[2].address == UINT64_MAX);
    assert_int_equal(u.locs[2].id, 300000);
    assert_int_equal(u.locs[0].nframes, 2);
    assert_int_equal(u.frames[u.locs[0].frame_off].line, 1234);
    assert_int_equal(u.frames[u.locs[2].frame_off].fid, 3);
    assert_int_equal(u.nstacks, 2);
    /* Stacks come in the packed order (root first), each whole. */
    for (size_t i = 0; i < 2; i++) {
        size_t w = u.stacks[i].id == 5 ? 0 : 1;
        assert_true(u.stacks[i].id == stacks[w].id);
        assert_int_equal(u.stacks[i].n, stacks[w].n);
        for (uint32_t j = 0; j < stacks[w].n; j++)
            assert_int_equal(u.stack_locs[u.stacks[i].off + j], stack_locs[stacks[w].off + j]);
    }
    store_view_release(&u);

    /* Every cut, exactly that many bytes (ASan sees a read past them). */
    for (size_t cut = 0; cut < b.len; cut++) {
        unsigned char *exact = cut ? hp_xmalloc(cut) : NULL;
        if (cut)
            memcpy(exact, b.data, cut);
        struct hp_buf err = HP_BUF_INIT(0);
        assert_int_equal(store_view_unpack(exact, cut, &u, &err), HP_ECORRUPT);
        assert_non_null(strstr(err.data, "a stack view does not decode"));
        hp_buf_release(&err);
        free(exact);
    }
    unsigned char *more = hp_xmalloc(b.len + 1);
    memcpy(more, b.data, b.len);
    more[b.len] = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_view_unpack(more, b.len + 1, &u, &err), HP_ECORRUPT);
    assert_non_null(strstr(err.data, "bytes after its end"));
    hp_buf_release(&err);
    free(more);

    /* The last stack's last new location index (the last byte) made 3. */
    b.data[b.len - 1] = 3;
    assert_int_equal(store_view_unpack(b.data, b.len, &u, &err), HP_ECORRUPT);
    assert_non_null(strstr(err.data, "a location the view does not hold"));
    hp_buf_release(&err);
    store_pack_release(&b);

    /* Each stack the one before and one more (kept locations cost no
     * bytes): refused before its memory grows with the square. */
    struct store_pack h = { 0 };
    store_pack_u64(&h, 1); /* version */
    store_pack_u64(&h, 0); /* objects */
    store_pack_u64(&h, 0); /* functions */
    store_pack_u64(&h, 0); /* files */
    store_pack_u64(&h, 1); /* one location: id 1, object 0, address 0, flags 0, no frames */
    store_pack_u64(&h, 1);
    store_pack_i64(&h, 0);
    store_pack_u64(&h, 0);
    store_pack_u64(&h, 0);
    store_pack_u64(&h, 0);
    enum { NH = 20000 };
    store_pack_u64(&h, NH);
    for (uint64_t i = 0; i < NH; i++) {
        store_pack_i64(&h, 1);
        store_pack_u64(&h, i); /* keep all of the one before */
        store_pack_u64(&h, 1);
        store_pack_u64(&h, 0);
    }
    assert_int_equal(store_view_unpack(h.data, h.len, &u, &err), HP_ECORRUPT);
    assert_non_null(strstr(err.data, "stacks longer than a view of its size holds"));
    hp_buf_release(&err);
    store_pack_release(&h);
}

/* Closing a span writes the node's view: the stacks of its closed spans,
 * which give what the rows give, for a snapshot of the closed span and
 * one of the open span (whose new stacks the view does not hold). */
static void test_view_written_at_span_close(void **state)
{
    struct fx *f = *state;
    int64_t ids[SPAN + 3];
    struct gen_params gp = { .seed = 21, .nstacks = 60, .nfuncs = 40, .symbolize = true };
    int64_t n = node_with(f->s, "be-view", &gp, SPAN - 1, ids);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stack_views"), 0);
    ids[SPAN - 1] = put(f->s, n, SPAN - 1, &gp);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stack_views"), 1);
    for (int h = SPAN; h < SPAN + 3; h++)
        ids[h] = put(f->s, n, h, &gp);
    struct store_stack_view view;
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
    assert_int_equal(view.first_id, ids[0]);
    assert_int_equal(view.last_id, ids[SPAN - 1]);
    struct store_stack_view none;
    assert_int_equal(store_stack_view_get(f->s, n + 1, &none, NULL), HP_ENOTFOUND);

    struct stack_ids k;
    stacks_of(f->s, ids, SPAN + 3, &k);
    assert_true(k.n > 60);
    int64_t at[] = { ids[5], ids[SPAN + 2] };
    for (size_t i = 0; i < 2; i++) {
        char *rows = load(f->s, at[i], &k, NULL), *via = load(f->s, at[i], &k, &view);
        assert_string_equal(via, rows);
        assert_non_null(strstr(rows, "::")); /* symbolized: names to compare */
        free(rows);
        free(via);
    }
    free(k.v);
    store_stack_view_release(&view);
}

/* The compressed blocks of zstd frame z (RFC 8878): how many there are
 * (*ret_blocks) and how many of them Huffman-code their literals (the
 * return), or -1 where the frame does not parse. */
static int huffman_literal_blocks(const unsigned char *z, size_t n, int *ret_blocks)
{
    static const size_t did_size[] = { 0, 1, 2, 4 };
    *ret_blocks = 0;
    if (n < 6 || z[0] != 0x28 || z[1] != 0xb5 || z[2] != 0x2f || z[3] != 0xfd)
        return -1;
    unsigned fhd = z[4], fcs_flag = fhd >> 6, single = (fhd >> 5) & 1;
    size_t fcs = fcs_flag == 0 ? single : (size_t)1 << fcs_flag;
    size_t p = 5 + !single + did_size[fhd & 3] + fcs;
    int huffman = 0;
    for (;;) {
        if (p + 3 > n)
            return -1;
        unsigned h = z[p] | (unsigned)z[p + 1] << 8 | (unsigned)z[p + 2] << 16;
        unsigned last = h & 1, type = (h >> 1) & 3, size = h >> 3;
        p += 3;
        size_t len = type == 1 ? 1 : size;
        if (type == 3 || p + len > n)
            return -1;
        if (type == 2) {
            (*ret_blocks)++;
            huffman += (z[p] & 3) >= 2; /* Compressed_ or Treeless_Literals_Block */
        }
        p += len;
        if (last)
            return huffman;
    }
}

/* Stack series and views, read a node at a time by `query leaks`, are
 * written with plain literals (store_zstd_compress_hot): decoded faster for
 * a few more bytes. The same bytes compressed as other blobs are Huffman-
 * coded, so the check below can tell. */
static void test_series_and_views_plain_literals(void **state)
{
    struct fx *f = *state;
    int64_t ids[SPAN];
    struct gen_params gp = { .seed = 23, .nstacks = 300, .nfuncs = 120, .symbolize = true };
    (void)node_with(f->s, "be-literals", &gp, SPAN, ids);
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(f->db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT size, data FROM stack_views UNION ALL "
                                        "SELECT size, data FROM stack_series",
                                        -1, &st, NULL),
                     SQLITE_OK);
    int blobs = 0, huffman_elsewhere = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *z = sqlite3_column_blob(st, 1);
        size_t zlen = (size_t)sqlite3_column_bytes(st, 1), size = (size_t)sqlite3_column_int64(st, 0);
        int blocks;
        assert_int_equal(huffman_literal_blocks(z, zlen, &blocks), 0);
        assert_true(blocks > 0); /* compressed, not stored: the check means something */
        void *raw;
        assert_int_equal(store_zstd_decompress(f->s, z, zlen, NULL, 0, size, &raw, NULL), 0);
        void *other;
        size_t olen;
        assert_int_equal(store_zstd_compress(f->s, raw, size, NULL, 0, false, &other, &olen, NULL),
                         0);
        int ob, oh = huffman_literal_blocks(other, olen, &ob);
        assert_true(oh >= 0);
        huffman_elsewhere += oh > 0;
        free(other);
        free(raw);
        blobs++;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    assert_true(blobs >= 2); /* the span's view and its series at least */
    assert_true(huffman_elsewhere > 0);
}

/* A current view is used: a name changed in its bytes shows in the
 * profile. A location it copied symbolized later (first stored bare) is
 * not the view's any more: its object's generation moved, and the load
 * gives the rows' new frames, not the view's bare copy. */
static void test_view_used_until_its_locations_change(void **state)
{
    struct fx *f = *state;
    int64_t ids[SPAN + 1];
    struct gen_params bare = { .seed = 22, .nstacks = 50, .nfuncs = 30, .symbolize = false };
    struct gen_params named = bare;
    named.symbolize = true;
    struct store_node_info ni = { .name = "be-late-symbols", .kind = "doris" };
    int64_t n = 0;
    assert_int_equal(store_node_upsert(f->s, &ni, &n, NULL), 0);
    /* A span's worth: the view is written when the last one closes it. */
    for (int h = 0; h < SPAN; h++)
        ids[h] = put(f->s, n, h, &named);
    struct stack_ids k;
    stacks_of(f->s, ids, SPAN, &k);
    struct store_stack_view view;
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);

    /* Used: its first function name with one letter changed. */
    struct store_view u;
    assert_int_equal(store_view_unpack(view.data, view.len, &u, NULL), 0);
    assert_true(u.nfns > 0);
    char *name = (char *)u.fns[0].s; /* into view.data, which is ours */
    char *was = strndup(name, u.fns[0].len), *now = strdup(was);
    now[0] = name[0] = '~';
    store_view_release(&u);
    char *rows = load(f->s, ids[3], &k, NULL), *via = load(f->s, ids[3], &k, &view);
    assert_null(strstr(rows, now));
    assert_non_null(strstr(via, now));
    free(rows);
    free(via);
    store_stack_view_release(&view);

    /* A node of the same binary whose locations were stored bare, with
     * its own view; then a symbolized dump brings their frames. */
    int64_t bids[SPAN + 1];
    struct store_node_info bi = { .name = "be-bare", .kind = "doris" };
    int64_t bn = 0;
    assert_int_equal(store_node_upsert(f->s, &bi, &bn, NULL), 0);
    struct gen_params other = bare;
    other.seed = 23; /* its own binary: its locations are stored bare */
    for (int h = 0; h < SPAN; h++)
        bids[h] = put(f->s, bn, h, &other);
    struct stack_ids bk;
    stacks_of(f->s, bids, SPAN, &bk);
    struct store_stack_view bview;
    assert_int_equal(store_stack_view_get(f->s, bn, &bview, NULL), 0);
    char *bare_rows = load(f->s, bids[4], &bk, NULL), *bare_via = load(f->s, bids[4], &bk, &bview);
    assert_string_equal(bare_via, bare_rows);
    int64_t gens = count_rows(f->db, "SELECT count(*) FROM loc_gens");
    other.symbolize = true;
    bids[SPAN] = put(f->s, bn, SPAN, &other);
    assert_true(count_rows(f->db, "SELECT count(*) FROM loc_gens") > gens);
    char *late_rows = load(f->s, bids[4], &bk, NULL);
    char *late_via = load(f->s, bids[4], &bk, &bview); /* the old view */
    assert_string_not_equal(late_rows, bare_rows);     /* frames now */
    assert_string_equal(late_via, late_rows);          /* not the view's bare copy */
    free(bare_rows);
    free(bare_via);
    free(late_rows);
    free(late_via);
    store_stack_view_release(&bview);
    free(bk.v);
    free(k.v);
    free(was);
    free(now);
}

/* Replace node n's view with bytes of our own (size: their size before
 * compression). */
static void view_replace(const char *db, int64_t n, const void *z, size_t zlen, size_t size)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "UPDATE stack_views SET data = ?1, size = ?2 "
                                           "WHERE node_id = ?3",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(st, 1, z, (int)zlen, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (int64_t)size);
    sqlite3_bind_int64(st, 3, n);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    assert_int_equal(sqlite3_changes(h), 1);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/* A view made stale by a later symbolization is written again by the
 * next retention (not only at the node's next span close, up to 128
 * snapshots later: leaks reads the rows meanwhile), and so is a damaged
 * one; a current one is left alone. A view whose objects do not fit in
 * the first bytes read is read whole. */
static void test_stale_view_written_by_retention(void **state)
{
    struct fx *f = *state;
    int64_t ids[SPAN + 1];
    struct gen_params bare = { .seed = 24, .nstacks = 50, .nfuncs = 30, .symbolize = false };
    int64_t n = node_with(f->s, "be-stale", &bare, SPAN, ids);
    assert_int_equal(store_view_current(f->s, n, NULL), 1);
    assert_int_equal(store_view_current(f->s, n + 1, NULL), HP_ENOTFOUND);
    struct store_retain_policy keep = { 0 };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 0); /* current: left alone */

    /* A symbolized dump of the same binary: the view's bare copies moved. */
    struct gen_params named = bare;
    named.symbolize = true;
    ids[SPAN] = put(f->s, n, SPAN, &named);
    assert_int_equal(store_view_current(f->s, n, NULL), 0);
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 1);
    assert_int_equal(store_view_current(f->s, n, NULL), 1);
    struct stack_ids k;
    stacks_of(f->s, ids, SPAN, &k);
    struct store_stack_view view;
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
    char *rows = load(f->s, ids[4], &k, NULL), *via = load(f->s, ids[4], &k, &view);
    assert_string_equal(via, rows);
    assert_non_null(strstr(rows, "::")); /* the frames the later dump brought */
    free(rows);
    free(via);
    store_stack_view_release(&view);
    free(k.v);
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 0);

    /* Damaged: bytes that are no zstd frame. */
    view_replace(f->db, n, "not a view", 10, 10);
    assert_int_equal(store_view_current(f->s, n, NULL), 0);
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 1);
    assert_int_equal(store_view_current(f->s, n, NULL), 1);

    /* 3,000 objects (no generation row: 0 is current) take more than the
     * first 16 KB: read whole; the last one's generation moved: stale. */
    static struct store_view_obj objs[3000];
    for (size_t i = 0; i < 3000; i++)
        objs[i] = (struct store_view_obj){ .id = ((int64_t)1 << 40) + (int64_t)i * 9973,
                                           .gen = 0 };
    for (int moved = 0; moved < 2; moved++) {
        objs[2999].gen = (uint64_t)moved;
        struct store_view v = { .objs = objs, .nobjs = 3000 };
        struct store_pack pk = { 0 };
        store_view_pack(&v, &pk);
        assert_true(pk.len > 16384);
        void *z;
        size_t zlen;
        assert_int_equal(store_zstd_compress_hot(f->s, pk.data, pk.len, &z, &zlen, NULL), 0);
        view_replace(f->db, n, z, zlen, pk.len);
        assert_int_equal(store_view_current(f->s, n, NULL), !moved);
        free(z);
        store_pack_release(&pk);
    }
}

/* Stacks resolved for folding straight from the view are what the
 * profile of them all gives: symbolized and bare, with stacks the view
 * does not hold (the open span's), after a restart mapped the binary
 * elsewhere (labels carry the new addresses), and, where the view lacks a
 * name, built from the profile instead. */
static void test_resolve_from_view_equals_profile(void **state)
{
    struct fx *f = *state;
    for (int named = 0; named < 2; named++) {
        struct gen_params gp = { .seed = 31 + (uint64_t)named, .nstacks = 80, .nfuncs = 40,
                                 .symbolize = named };
        int64_t ids[SPAN + 8];
        char name[32];
        snprintf(name, sizeof(name), "be-resolve-%d", named);
        int64_t n = node_with(f->s, name, &gp, SPAN, ids);
        /* The open span: stacks the closed one did not have; then a
         * restart: the binary mapped elsewhere for the last four. */
        struct gen_params more = gp;
        more.nstacks = 120;
        for (int h = SPAN; h < SPAN + 4; h++)
            ids[h] = put(f->s, n, h, &more);
        struct gen_params moved = more;
        moved.load_bias = 0x7f0000000000u;
        for (int h = SPAN + 4; h < SPAN + 8; h++)
            ids[h] = put(f->s, n, h, &moved);
        struct store_stack_view view;
        assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
        struct store_view u;
        assert_int_equal(store_view_unpack(view.data, view.len, &u, NULL), 0);
        struct stack_ids k;
        stacks_of(f->s, ids, SPAN + 8, &k);
        assert_true(k.n > u.nstacks); /* some only the rows hold */
        int64_t at[] = { ids[3], ids[SPAN + 2], ids[SPAN + 6], ids[SPAN + 6] };
        for (size_t i = 0; i < 4; i++) {
            if (i == 3) /* the view's stacks and the others interleaved */
                for (size_t a = 0, z = k.n - 1; a < z; a += 2, z--) {
                    int64_t t = k.v[a];
                    k.v[a] = k.v[z];
                    k.v[z] = t;
                }
            bool fv, fp;
            char *a = resolve(f->s, at[i], &k, &view, 0, &fv);
            char *b = resolve(f->s, at[i], &k, &view, STORE_RESOLVE_NO_VIEW, &fp);
            assert_true(fv);
            assert_false(fp);
            assert_string_equal(a, b);
            assert_non_null(strstr(a, named ? "::" : "0x"));
            free(a);
            free(b);
        }
        /* The view without its first function name: built from the
         * profile, the same answer. */
        if (named) {
            u.fns++;
            u.nfns--;
            struct store_pack pk = { 0 };
            store_view_pack(&u, &pk);
            struct store_stack_view lacking = { view.first_id, view.last_id, pk.data, pk.len };
            bool fv, fp;
            char *a = resolve(f->s, ids[SPAN + 2], &k, &lacking, 0, &fv);
            char *b = resolve(f->s, ids[SPAN + 2], &k, NULL, 0, &fp);
            assert_false(fv);
            assert_string_equal(a, b);
            free(a);
            free(b);
            store_pack_release(&pk);
            u.fns--;
            u.nfns++;
        }
        store_view_release(&u);
        store_stack_view_release(&view);
        free(k.v);
    }
}

/* Damaged bytes are not trusted: the rows are read, and nothing fails.
 * Bytes that do not decompress are no view; bytes that decompress but do
 * not decode are not used. A retention writes a missing view again (a
 * store from before views gets them so). */
static void test_view_damaged_is_ignored(void **state)
{
    struct fx *f = *state;
    int64_t ids[SPAN];
    struct gen_params gp = { .seed = 24, .nstacks = 40, .nfuncs = 30, .symbolize = true };
    int64_t n = node_with(f->s, "be-damaged", &gp, SPAN, ids);
    struct stack_ids k;
    stacks_of(f->s, ids, SPAN, &k);
    char *rows = load(f->s, ids[7], &k, NULL);

    sql(f->db, "UPDATE stack_views SET data = x'28b52ffd0102'");
    struct store_stack_view view;
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), HP_ENOTFOUND);
    sql(f->db, "DELETE FROM stack_views");
    struct store_retain_policy keep = { 0 };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 1);
    assert_int_equal(res.views_left, 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stack_views"), 1);
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
    /* Written, it is not written again. */
    assert_int_equal(store_retain(f->s, &keep, T0 + SPAN * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.views_written, 0);
    char *via = load(f->s, ids[7], &k, &view);
    assert_string_equal(via, rows);
    free(via);

    /* Cut, grown, and a count that lies: each decompresses, none decodes. */
    size_t len = view.len;
    unsigned char *whole = hp_xmalloc(len + 1);
    memcpy(whole, view.data, len);
    struct store_stack_view bad = view;
    size_t cuts[] = { 0, 1, len / 2, len - 1 };
    for (size_t i = 0; i < sizeof(cuts) / sizeof(*cuts); i++) {
        bad.len = cuts[i];
        via = load(f->s, ids[7], &k, &bad);
        assert_string_equal(via, rows);
        free(via);
    }
    unsigned char *more = hp_xmalloc(len + 1);
    memcpy(more, whole, len);
    more[len] = 7;
    bad.data = more;
    bad.len = len + 1;
    via = load(f->s, ids[7], &k, &bad);
    assert_string_equal(via, rows);
    free(via);
    more[1] = 0xff; /* the object count, huge */
    more[2] = 0xff;
    bad.len = len;
    via = load(f->s, ids[7], &k, &bad);
    assert_string_equal(via, rows);
    free(via);
    free(more);
    free(whole);
    store_stack_view_release(&view);
    free(rows);
    free(k.v);
}

/* A view goes with the snapshots it covers: retention deleting the oldest
 * drops it, and writes one over what is left. */
static void test_view_goes_with_its_snapshots(void **state)
{
    struct fx *f = *state;
    enum { H = 2 * SPAN + 10 };
    int64_t ids[H];
    struct gen_params gp = { .seed = 25, .nstacks = 40, .nfuncs = 30, .symbolize = true };
    int64_t n = node_with(f->s, "be-retained", &gp, H, ids);
    struct store_stack_view view;
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
    assert_int_equal(view.first_id, ids[0]);
    assert_int_equal(view.last_id, ids[2 * SPAN - 1]);
    store_stack_view_release(&view);
    struct store_retain_policy pol = { .retain_s = (H - 20) * 3600, .reclaim = true };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &pol, T0 + H * HOUR_MS, &res, NULL), 0);
    assert_true(res.snapshots_deleted >= 19);
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), 0);
    assert_true(view.first_id > ids[res.snapshots_deleted - 1]);
    /* What it holds still matches the rows (retention swept the rest). */
    struct stack_ids k;
    stacks_of(f->s, ids + res.snapshots_deleted, (size_t)(H - res.snapshots_deleted), &k);
    char *rows = load(f->s, ids[H - 1], &k, NULL), *via = load(f->s, ids[H - 1], &k, &view);
    assert_string_equal(via, rows);
    free(rows);
    free(via);
    free(k.v);
    store_stack_view_release(&view);

    /* A reindexed snapshot it covers has other stacks now, and the rows
     * only it held may be swept and their ids taken again: the view goes
     * with it (until its span closes again). */
    struct gen_params other = gp;
    other.seed = 26;
    struct profile *p = gen_profile(&other, NULL, NULL);
    assert_int_equal(store_snapshot_reindex(f->s, ids[H - SPAN - 5], p, NULL), 0);
    profile_free(p);
    assert_int_equal(store_stack_view_get(f->s, n, &view, NULL), HP_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_pack_roundtrip_and_damage),
        cmocka_unit_test_setup_teardown(test_view_written_at_span_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_series_and_views_plain_literals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_used_until_its_locations_change, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resolve_from_view_equals_profile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_damaged_is_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_view_written_by_retention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_goes_with_its_snapshots, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
