/* pprof writer: a profile as gzipped profile.proto, for `go tool pprof`,
 * Pyroscope, Parca and anything else that reads pprof.
 *
 * The output keeps what pprof can use: the four heap sample types
 * (inuse_objects/count, inuse_space/bytes, alloc_objects/count,
 * alloc_space/bytes; the default is the --sample in force), every mapping
 * with its file, offset and build-id, every location with its address and
 * mapping, and for symbolized locations one Line per frame, innermost first,
 * with functions deduplicated by (name, file). Unsymbolized locations get no
 * lines, so pprof can still symbolize them itself from the mapping.
 *
 * The samples are the profile's all-threads samples with the same selection
 * `query top` makes: allocator frames trimmed from the leaf end (unless
 * keep_allocator), --focus/--ignore applied to the same frame names. Values
 * are the un-sampled estimates rounded to integers so that each column sums
 * to its total truncated toward zero, the figure the text table prints; pprof
 * wants integers and already-scaled values.
 *
 * Every string goes through query_utf8_clean: pprof readers built on
 * protobuf-go reject a string_table with invalid UTF-8. */
#include "query/query.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "store/proto/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__ValueType pb_value_type;

struct writer {
    const struct profile *p;
    const struct query_opts *o;
    struct hp_arena arena; /* cleaned strings, protobuf sub-messages */
    /* String table: interned pointer (in `strs`) -> index. */
    struct hp_strtab strs;
    struct hp_map64 str_index;
    ProtobufCBinaryData *table;
    size_t ntable, table_cap;
    /* Functions, deduplicated by (name index, file index). */
    struct hp_map64 fn_index;
    pb_function **fns;
    size_t nfns, fns_cap;
    /* Locations actually used: profile location -> pprof id (0 = not yet). */
    uint64_t *loc_id;
    pb_location **locs;
    size_t nlocs, locs_cap;
    /* Regex selection, as query_fold makes it. */
    regex_t focus, ignore;
    bool has_focus, has_ignore;
    uint8_t *loc_match; /* 0 unknown, 1 checked; |2 focus hit, |4 ignore hit */
};

static int64_t str_idx(struct writer *w, const char *s)
{
    if (!s || !*s)
        return 0;
    s = query_utf8_clean(&w->arena, s);
    const char *in = hp_strtab_intern(&w->strs, s, strlen(s));
    uint32_t idx;
    if (hp_map64_get(&w->str_index, (uint64_t)(uintptr_t)in, &idx))
        return idx;
    w->table = hp_xgrow(w->table, &w->table_cap, w->ntable + 1, sizeof(*w->table));
    w->table[w->ntable] = (ProtobufCBinaryData){ .len = strlen(in), .data = (uint8_t *)in };
    (void)hp_map64_put(&w->str_index, (uint64_t)(uintptr_t)in, (uint32_t)w->ntable, &idx);
    return (int64_t)w->ntable++;
}

static uint64_t function_id(struct writer *w, const struct profile_frame *fr)
{
    int64_t name = str_idx(w, fr->function);
    int64_t file = str_idx(w, fr->file);
    /* String indexes are below 2^32 (the table is an array we built). */
    uint64_t key = ((uint64_t)name << 32) | (uint64_t)file;
    uint32_t idx;
    if (hp_map64_get(&w->fn_index, key, &idx))
        return w->fns[idx]->id;
    pb_function *f = hp_arena_alloc(&w->arena, sizeof(*f));
    perftools__profiles__function__init(f);
    f->id = w->nfns + 1;
    f->name = name;
    f->system_name = name;
    f->filename = file;
    w->fns = hp_xgrow(w->fns, &w->fns_cap, w->nfns + 1, sizeof(*w->fns));
    w->fns[w->nfns] = f;
    (void)hp_map64_put(&w->fn_index, key, (uint32_t)w->nfns, &idx);
    w->nfns++;
    return f->id;
}

static uint64_t location_id(struct writer *w, uint32_t loc)
{
    if (w->loc_id[loc])
        return w->loc_id[loc];
    const struct profile *p = w->p;
    const struct profile_location *l = &p->locs[loc];
    pb_location *pl = hp_arena_alloc(&w->arena, sizeof(*pl));
    perftools__profiles__location__init(pl);
    pl->id = w->nlocs + 1;
    pl->mapping_id = l->mapping; /* mapping ids are index + 1, as in the model */
    pl->address = l->address;
    /* Frames are innermost first, as pprof wants its lines. With no_inline
     * only the outermost (the function the address is in) is kept. */
    uint32_t first = 0, n = l->nframes;
    if (w->o->no_inline && n > 1)
        first = n - 1;
    /* A named location (collapsed input) with no function name still needs a
     * line so pprof shows something other than address 0. */
    if (n > first) {
        pl->line = hp_arena_alloc(&w->arena, (n - first) * sizeof(*pl->line));
        for (uint32_t k = first; k < n; k++) {
            const struct profile_frame *fr = &p->frames[l->frame_off + k];
            pb_line *ln = hp_arena_alloc(&w->arena, sizeof(*ln));
            perftools__profiles__line__init(ln);
            char buf[64];
            struct profile_frame named = *fr;
            if (!named.function)
                named.function = profile_frame_label(p, loc, k, buf, sizeof(buf), false);
            ln->function_id = function_id(w, &named);
            ln->line = fr->line;
            pl->line[pl->n_line++] = ln;
        }
    }
    w->locs = hp_xgrow(w->locs, &w->locs_cap, w->nlocs + 1, sizeof(*w->locs));
    w->locs[w->nlocs++] = pl;
    w->loc_id[loc] = pl->id;
    return pl->id;
}

static int compile(regex_t *re, const char *pat, const char *what, struct hp_buf *err)
{
    int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[256];
        regerror(rc, re, msg, sizeof(msg));
        hp_err_printf(err, "--%s \"%s\": invalid regular expression: %s", what, pat, msg);
        return HP_EUSAGE;
    }
    return 0;
}

/* Focus/ignore marks of one location, from the names query_fold gives its
 * frames (function name or "0x... object", with " file:line" under --lines). */
static uint8_t location_match(struct writer *w, uint32_t loc)
{
    if (w->loc_match[loc])
        return w->loc_match[loc];
    const struct profile *p = w->p;
    const struct profile_location *l = &p->locs[loc];
    uint8_t m = 1;
    uint32_t n = l->nframes ? l->nframes : 1;
    uint32_t first = w->o->no_inline ? n - 1 : 0;
    for (uint32_t k = first; k < n; k++) {
        char buf[512];
        const char *name = profile_frame_label(p, loc, k, buf, sizeof(buf), true);
        char *owned = NULL;
        if (w->o->with_lines && k < l->nframes && p->frames[l->frame_off + k].file) {
            const struct profile_frame *fr = &p->frames[l->frame_off + k];
            owned = hp_xasprintf("%s %s:%u", name, fr->file, fr->line);
            name = owned;
        }
        if (w->has_focus && regexec(&w->focus, name, 0, NULL, 0) == 0)
            m |= 2;
        if (w->has_ignore && regexec(&w->ignore, name, 0, NULL, 0) == 0)
            m |= 4;
        free(owned);
    }
    return w->loc_match[loc] = m;
}

/* gzip `data` into out. */
static int gzip_append(const uint8_t *data, size_t len, struct hp_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return HP_EPARSE;
    int r = 0;
    uint8_t chunk[65536];
    size_t off = 0;
    int zr;
    do {
        size_t feed = HP_MIN(len - off, (size_t)1 << 30);
        zs.next_in = (Bytef *)(uintptr_t)(data + off);
        zs.avail_in = (uInt)feed;
        int flush = off + feed == len ? Z_FINISH : Z_NO_FLUSH;
        do {
            zs.next_out = chunk;
            zs.avail_out = sizeof(chunk);
            zr = deflate(&zs, flush);
            if (zr == Z_STREAM_ERROR) {
                r = HP_EPARSE;
                goto out;
            }
            size_t got = sizeof(chunk) - zs.avail_out;
            if (got && (r = hp_buf_append(out, chunk, got)) < 0)
                goto out;
        } while (zs.avail_out == 0);
        off += feed - zs.avail_in;
    } while (zr != Z_STREAM_END);
out:
    deflateEnd(&zs);
    return r;
}

int query_render_pprof(const struct profile *p, const struct query_opts *o, struct hp_buf *out,
                       struct hp_buf *err)
{
    struct writer w = { .p = p, .o = o };
    hp_arena_init(&w.arena);
    hp_strtab_init(&w.strs, &w.arena);
    hp_map64_init(&w.str_index);
    hp_map64_init(&w.fn_index);
    w.loc_id = hp_xcalloc(p->nlocs + 1, sizeof(*w.loc_id));
    w.loc_match = hp_xcalloc(p->nlocs + 1, 1);
    pb_sample **samples = NULL;
    uint32_t *kept = NULL;   /* profile sample index of each output sample */
    uint32_t *firsts = NULL; /* first kept location (allocator trimming) */
    double *vals = NULL;
    int64_t *ints = NULL;
    uint8_t *packed = NULL;
    int r = 0;

    /* string_table[0] must be ""; str_idx maps empty strings to it. */
    w.table = hp_xgrow(w.table, &w.table_cap, 1, sizeof(*w.table));
    w.table[w.ntable++] = (ProtobufCBinaryData){ .len = 0, .data = NULL };
    if (o->focus && *o->focus) {
        if ((r = compile(&w.focus, o->focus, "focus", err)) < 0)
            goto out;
        w.has_focus = true;
    }
    if (o->ignore && *o->ignore) {
        if ((r = compile(&w.ignore, o->ignore, "ignore", err)) < 0)
            goto out;
        w.has_ignore = true;
    }

    /* Select samples as query_fold does. */
    size_t nkept = 0;
    kept = hp_xmalloc((p->nsamples + 1) * sizeof(*kept));
    firsts = hp_xmalloc((p->nsamples + 1) * sizeof(*firsts));
    for (size_t si = 0; si < p->nsamples; si++) {
        const struct profile_sample *s = &p->samples[si];
        const struct profile_stack *st = &p->stacks[s->stack];
        const uint32_t *locs = profile_stack_locs(p, s->stack);
        uint32_t first = 0;
        if (!o->keep_allocator)
            while (first < st->n && (p->locs[locs[first]].flags & PROFILE_LOC_ALLOCATOR))
                first++;
        if (first == st->n)
            first = st->n ? st->n - 1 : 0;
        if (st->n == 0)
            continue;
        bool focus_hit = !w.has_focus, ignore_hit = false;
        if (w.has_focus || w.has_ignore)
            for (uint32_t k = first; k < st->n; k++) {
                uint8_t m = location_match(&w, locs[k]);
                focus_hit |= (m & 2) != 0;
                ignore_hit |= (m & 4) != 0;
            }
        if (!focus_hit || ignore_hit)
            continue;
        kept[nkept] = (uint32_t)si;
        firsts[nkept++] = first;
    }

    /* Integer values per column, each summing to its truncated total. */
    vals = hp_xmalloc((nkept + 1) * sizeof(*vals));
    ints = hp_xmalloc((nkept + 1) * PV_COUNT * sizeof(*ints));
    for (int v = 0; v < PV_COUNT; v++) {
        for (size_t i = 0; i < nkept; i++)
            vals[i] = p->samples[kept[i]].value[v];
        query_round_preserving_sum(vals, nkept, ints + (size_t)v * (nkept + 1));
    }
    samples = hp_xcalloc(nkept + 1, sizeof(*samples));
    for (size_t i = 0; i < nkept; i++) {
        const struct profile_sample *s = &p->samples[kept[i]];
        const struct profile_stack *st = &p->stacks[s->stack];
        const uint32_t *locs = profile_stack_locs(p, s->stack);
        pb_sample *ps = hp_arena_alloc(&w.arena, sizeof(*ps));
        perftools__profiles__sample__init(ps);
        ps->n_location_id = st->n - firsts[i];
        ps->location_id = hp_arena_alloc(&w.arena, ps->n_location_id * sizeof(uint64_t) + 1);
        for (uint32_t k = firsts[i]; k < st->n; k++)
            ps->location_id[k - firsts[i]] = location_id(&w, locs[k]); /* leaf first */
        ps->n_value = PV_COUNT;
        ps->value = hp_arena_alloc(&w.arena, PV_COUNT * sizeof(int64_t));
        for (int v = 0; v < PV_COUNT; v++)
            ps->value[v] = ints[(size_t)v * (nkept + 1) + i];
        samples[i] = ps;
    }

    /* Mappings: all of them, ids = index + 1 (locations already use that). */
    pb_mapping **maps = hp_arena_alloc(&w.arena, (p->nmappings + 1) * sizeof(*maps));
    bool *map_symbolized = hp_arena_alloc(&w.arena, p->nmappings + 1);
    bool *map_lines = hp_arena_alloc(&w.arena, p->nmappings + 1);
    memset(map_symbolized, 0, p->nmappings + 1);
    memset(map_lines, 0, p->nmappings + 1);
    for (size_t li = 0; li < p->nlocs; li++) {
        const struct profile_location *l = &p->locs[li];
        if (l->mapping && l->mapping <= p->nmappings && l->nframes) {
            map_symbolized[l->mapping - 1] = true;
            if (p->frames[l->frame_off].line)
                map_lines[l->mapping - 1] = true;
        }
    }
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        pb_mapping *pm = hp_arena_alloc(&w.arena, sizeof(*pm));
        perftools__profiles__mapping__init(pm);
        pm->id = i + 1;
        pm->memory_start = m->start;
        pm->memory_limit = m->limit;
        pm->file_offset = m->offset;
        pm->filename = str_idx(&w, m->path);
        pm->build_id = str_idx(&w, m->build_id);
        pm->has_functions = map_symbolized[i];
        pm->has_filenames = map_lines[i];
        pm->has_line_numbers = map_lines[i];
        pm->has_inline_frames = map_symbolized[i] && !o->no_inline;
        maps[i] = pm;
    }

    pb_value_type types[PV_COUNT], period_type;
    pb_value_type *type_ptrs[PV_COUNT];
    for (int v = 0; v < PV_COUNT; v++) {
        perftools__profiles__value_type__init(&types[v]);
        types[v].type = str_idx(&w, profile_value_name((enum profile_value)v));
        types[v].unit = str_idx(&w, v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE ? "bytes"
                                                                                : "count");
        type_ptrs[v] = &types[v];
    }
    perftools__profiles__value_type__init(&period_type);
    period_type.type = str_idx(&w, "space");
    period_type.unit = str_idx(&w, "bytes");

    int64_t comments[2];
    size_t ncomments = 0;
    if (o->title && *o->title)
        comments[ncomments++] = str_idx(&w, o->title);
    char *note = p->hint ? hp_xasprintf("heapfleet export of a %s profile (%s)",
                                        profile_format_name(p->format), p->hint)
                         : hp_xasprintf("heapfleet export of a %s profile",
                                        profile_format_name(p->format));
    comments[ncomments++] = str_idx(&w, note);
    free(note);

    pb_profile pb;
    perftools__profiles__profile__init(&pb);
    pb.n_sample_type = PV_COUNT;
    pb.sample_type = type_ptrs;
    pb.n_sample = nkept;
    pb.sample = samples;
    pb.n_mapping = p->nmappings;
    pb.mapping = maps;
    pb.n_location = w.nlocs;
    pb.location = w.locs;
    pb.n_function = w.nfns;
    pb.function = w.fns;
    pb.time_nanos = p->time_ns;
    pb.period_type = &period_type;
    pb.period = p->period > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)p->period;
    pb.n_comment = ncomments;
    pb.comment = comments;
    pb.default_sample_type = types[o->sample < PV_COUNT ? o->sample : PV_INUSE_SPACE].type;
    /* Last: str_idx above may have grown the table. */
    pb.n_string_table = w.ntable;
    pb.string_table = w.table;

    size_t sz = perftools__profiles__profile__get_packed_size(&pb);
    packed = hp_xmalloc(sz + 1);
    size_t got = perftools__profiles__profile__pack(&pb, packed);
    if (got != sz) {
        hp_err_printf(err, "pprof: protobuf packing produced %zu bytes, expected %zu", got, sz);
        r = HP_EPARSE;
        goto out;
    }
    r = gzip_append(packed, sz, out);
    if (r < 0)
        hp_err_printf(err, "pprof: compressing %zu bytes failed: %s", sz, hp_strerror(r));
out:
    if (w.has_focus)
        regfree(&w.focus);
    if (w.has_ignore)
        regfree(&w.ignore);
    free(packed);
    free(samples);
    free(kept);
    free(firsts);
    free(vals);
    free(ints);
    free(w.loc_id);
    free(w.loc_match);
    free(w.locs);
    free(w.fns);
    free(w.table);
    hp_map64_release(&w.str_index);
    hp_map64_release(&w.fn_index);
    hp_strtab_release(&w.strs);
    hp_arena_release(&w.arena);
    return r;
}
