/* pprof profile.proto reader (gzipped or not), as `go tool pprof -proto`,
 * Go's runtime/pprof, jemalloc_pprof and Pyroscope exports write it.
 *
 * The driver hands over the whole body at the end of input. Steps:
 *   1. gunzip (zlib) when the body starts with 1f 8b, output capped at
 *      lim.max_bytes; concatenated gzip members are accepted;
 *   2. decode with protobuf-c (store/proto/profile.proto) through an
 *      allocator with a memory budget, so a small message that claims
 *      millions of empty sub-messages cannot take unbounded memory; on a
 *      decoding error the top-level fields are walked once more to say at
 *      which byte and in which element the message is broken;
 *   3. check every cross reference (string indexes, location, function and
 *      mapping ids) before anything is built, naming the offending element;
 *   4. build the model: heap sample types map onto PV_* by name (values are
 *      already un-sampled in pprof, so scaling is NONE), mappings keep their
 *      build-id, locations keep their address, mapping and line table
 *      (pprof's Location.line is innermost first, as the model's frames are),
 *      and samples with equal location lists are merged.
 *
 * Not used: sample labels (Go's per-object "bytes"), drop_frames/keep_frames
 * (pprof display hints; query has --focus/--ignore), is_folded, columns.
 *
 * Two pprof locations may share an address (the same offset in two mappings,
 * or a profile that merged differently symbolized copies): the first one owns
 * the address index entry, the others become unindexed locations of their
 * own, so neither loses its frames or mapping. */
#include "collector/ingest/ingest-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "store/proto/profile.pb-c.h"

/* Decoding memory allowed per input byte, plus a fixed floor. Real profiles
 * need up to ~10x (line tables); hostile ones (many empty sub-messages) need
 * 40x or more. */
#define PPROF_MEM_PER_BYTE 24
#define PPROF_MEM_FLOOR ((size_t)16 << 20)

typedef Perftools__Profiles__Profile pb_profile;

static int perr(struct ingest_parser *ps, struct hp_buf *err, int code, const char *fmt, ...)
    HP_PRINTF(4, 5);

static int perr(struct ingest_parser *ps, struct hp_buf *err, int code, const char *fmt, ...)
{
    if (err) {
        if (err->len)
            (void)hp_buf_puts(err, "; ");
        (void)hp_buf_puts(err, "pprof profile: ");
        va_list ap;
        va_start(ap, fmt);
        (void)hp_buf_vprintf(err, fmt, ap);
        va_end(ap);
    }
    ps->status = code;
    return code;
}

/* ---- 1. gunzip ---------------------------------------------------------- */

static int gunzip(struct ingest_parser *ps, const uint8_t *data, size_t len, struct hp_buf *out,
                  struct hp_buf *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* 16 + MAX_WBITS: gzip wrapper only, as profile.proto files use. */
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return perr(ps, err, HP_EPARSE, "zlib could not start inflating");
    int r = 0;
    uint8_t chunk[65536];
    size_t in_off = 0;
    for (;;) {
        /* zlib counts in uInt; feed at most 1 GiB at a time. */
        size_t feed = HP_MIN(len - in_off, (size_t)1 << 30);
        zs.next_in = (Bytef *)(uintptr_t)(data + in_off);
        zs.avail_in = (uInt)feed;
        zs.next_out = chunk;
        zs.avail_out = sizeof(chunk);
        int zr = inflate(&zs, Z_NO_FLUSH);
        size_t used = feed - zs.avail_in;
        in_off += used;
        size_t got = sizeof(chunk) - zs.avail_out;
        if (got && hp_buf_append(out, chunk, got) < 0) {
            r = perr(ps, err, HP_ETOOBIG,
                     "decompressed size is over the limit of %zu bytes (at compressed byte %zu)",
                     ps->lim.max_bytes, in_off);
            goto out;
        }
        if (zr == Z_STREAM_END) {
            /* Another gzip member may follow (concatenated .gz files). */
            if (len - in_off >= 2 && data[in_off] == 0x1f && data[in_off + 1] == 0x8b) {
                if (inflateReset(&zs) != Z_OK) {
                    r = perr(ps, err, HP_EPARSE, "zlib could not restart inflating");
                    goto out;
                }
                continue;
            }
            if (in_off != len) {
                r = perr(ps, err, HP_EPARSE,
                         "%zu unexpected bytes after the end of the gzip stream at byte %zu",
                         len - in_off, in_off);
                goto out;
            }
            break;
        }
        if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR ||
            zr == Z_MEM_ERROR) {
            r = perr(ps, err, HP_EPARSE, "corrupt gzip data near compressed byte %zu: %s", in_off,
                     zs.msg ? zs.msg : "inflate failed");
            goto out;
        }
        if (zr == Z_BUF_ERROR || (used == 0 && got == 0)) {
            if (in_off >= len) {
                r = perr(ps, err, HP_EPARSE,
                         "gzip stream ends early after %zu compressed bytes (truncated file "
                         "or download?)",
                         len);
                goto out;
            }
        }
    }
out:
    inflateEnd(&zs);
    return r;
}

/* ---- 2. decode ------------------------------------------------------------ */

struct budget {
    size_t used, cap;
    bool over;
};

static void *budget_alloc(void *data, size_t size)
{
    struct budget *b = data;
    if (size > b->cap - b->used) {
        b->over = true;
        return NULL;
    }
    b->used += size;
    return hp_xmalloc(size ? size : 1);
}

static void budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr);
}

/* Read a varint at *off; false when it runs off the end or past 10 bytes. */
static bool read_varint(const uint8_t *d, size_t len, size_t *off, uint64_t *ret)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*off >= len)
            return false;
        uint8_t b = d[(*off)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

static const char *field_name(uint64_t f)
{
    static const char *names[] = { "?",          "sample_type", "sample",       "mapping",
                                   "location",   "function",    "string_table", "drop_frames",
                                   "keep_frames", "time_nanos", "duration_nanos",
                                   "period_type", "period",     "comment",
                                   "default_sample_type" };
    return f < HP_ARRAY_SIZE(names) ? names[f] : "unknown field";
}

/* protobuf-c says only that decoding failed. Walk the top-level fields to
 * find where: a bad tag or length, or the first sub-message that does not
 * decode on its own. */
static int explain_decode_error(struct ingest_parser *ps, const uint8_t *d, size_t len,
                                ProtobufCAllocator *alloc, struct hp_buf *err)
{
    size_t off = 0;
    uint64_t count[16] = { 0 };
    while (off < len) {
        size_t start = off;
        uint64_t key, n = 0;
        if (!read_varint(d, len, &off, &key))
            return perr(ps, err, HP_EPARSE, "malformed protobuf: bad field tag at byte %zu",
                        start);
        uint64_t f = key >> 3;
        unsigned wt = (unsigned)(key & 7);
        if (f == 0)
            return perr(ps, err, HP_EPARSE,
                        "malformed protobuf: field number 0 at byte %zu (not a profile.proto "
                        "message?)",
                        start);
        switch (wt) {
        case 0:
            if (!read_varint(d, len, &off, &n))
                return perr(ps, err, HP_EPARSE,
                            "malformed protobuf: truncated number in field %llu (%s) at byte %zu",
                            (unsigned long long)f, field_name(f), start);
            break;
        case 1:
        case 5: {
            size_t w = wt == 1 ? 8 : 4;
            if (len - off < w)
                return perr(ps, err, HP_EPARSE,
                            "malformed protobuf: truncated field %llu (%s) at byte %zu",
                            (unsigned long long)f, field_name(f), start);
            off += w;
            break;
        }
        case 2: {
            if (!read_varint(d, len, &off, &n) || n > len - off)
                return perr(ps, err, HP_EPARSE,
                            "malformed protobuf: field %llu (%s) at byte %zu claims %llu bytes "
                            "but only %zu remain (truncated file?)",
                            (unsigned long long)f, field_name(f), start, (unsigned long long)n,
                            len - off);
            const ProtobufCMessageDescriptor *desc = NULL;
            switch (f) {
            case 1:
            case 11:
                desc = &perftools__profiles__value_type__descriptor;
                break;
            case 2:
                desc = &perftools__profiles__sample__descriptor;
                break;
            case 3:
                desc = &perftools__profiles__mapping__descriptor;
                break;
            case 4:
                desc = &perftools__profiles__location__descriptor;
                break;
            case 5:
                desc = &perftools__profiles__function__descriptor;
                break;
            default:
                break;
            }
            if (desc) {
                ProtobufCMessage *m = protobuf_c_message_unpack(desc, alloc, (size_t)n, d + off);
                if (!m)
                    return perr(ps, err, HP_EPARSE,
                                "malformed protobuf: %s element %llu at byte %zu (%llu bytes) "
                                "does not decode",
                                field_name(f), (unsigned long long)count[f],
                                start, (unsigned long long)n);
                protobuf_c_message_free_unpacked(m, alloc);
            }
            off += (size_t)n;
            break;
        }
        default:
            return perr(ps, err, HP_EPARSE,
                        "malformed protobuf: invalid wire type %u for field %llu at byte %zu "
                        "(not a profile.proto message?)",
                        wt, (unsigned long long)f, start);
        }
        if (f < HP_ARRAY_SIZE(count))
            count[f]++;
    }
    return perr(ps, err, HP_EPARSE,
                "malformed protobuf: the message does not decode as profile.proto "
                "(%zu bytes; a field has the wrong type?)",
                len);
}

/* ---- 3. + 4. check and build ------------------------------------------------ */

struct reader {
    struct ingest_parser *ps;
    struct hp_buf *err;
    const pb_profile *pb;
    struct profile *p;
    const char **strs;       /* interned string_table entries, filled lazily */
    struct hp_map64 loc_ids; /* pprof location id -> index in pb->location */
    struct hp_map64 fn_ids;  /* function id -> index */
    struct hp_map64 map_ids; /* mapping id -> index */
    uint32_t *loc_of;        /* pb location index -> profile location */
    int pv_of[64];           /* sample_type index -> PV_* or -1 (first 64 types) */
    struct hp_map64 stacks;  /* hash of a location list -> sample index (probed) */
    struct profile_frame *frames;
    size_t frames_cap;
};

/* A string table index, checked. The referrer is named as "<kind> <id>"
 * (just "<kind>" when id is NO_ID) and `field` is its field. */
#define NO_ID UINT64_MAX

static int str_at(struct reader *rd, int64_t idx, const char **ret, const char *kind,
                  uint64_t id, const char *field)
{
    size_t n = rd->pb->n_string_table;
    if (idx == 0 && n == 0) {
        *ret = "";
        return 0;
    }
    if (idx < 0 || (uint64_t)idx >= n) {
        char ids[32] = "";
        if (id != NO_ID)
            snprintf(ids, sizeof(ids), " %llu", (unsigned long long)id);
        return perr(rd->ps, rd->err, HP_EPARSE,
                    "%s%s has %s string index %lld, but the string table has %zu entries", kind,
                    ids, field, (long long)idx, n);
    }
    if (!rd->strs[idx]) {
        const ProtobufCBinaryData *b = &rd->pb->string_table[idx];
        /* protobuf-c leaves data NULL for an empty string. */
        rd->strs[idx] = b->len ? profile_intern(rd->p, (const char *)b->data, b->len) : "";
    }
    *ret = rd->strs[idx];
    return 0;
}

static int index_ids(struct reader *rd, struct hp_map64 *m, size_t n, const char *kind,
                     uint64_t (*id_of)(const pb_profile *, size_t))
{
    for (size_t i = 0; i < n; i++) {
        uint64_t id = id_of(rd->pb, i);
        if (id == 0)
            return perr(rd->ps, rd->err, HP_EPARSE, "%s %zu has id 0 (ids must be nonzero)",
                        kind, i);
        uint32_t old;
        if (hp_map64_put(m, id, (uint32_t)i, &old))
            return perr(rd->ps, rd->err, HP_EPARSE,
                        "%s %zu repeats id %llu of %s %u (ids must be unique)", kind, i,
                        (unsigned long long)id, kind, old);
    }
    return 0;
}

static uint64_t loc_id(const pb_profile *pb, size_t i)
{
    return pb->location[i]->id;
}
static uint64_t fn_id(const pb_profile *pb, size_t i)
{
    return pb->function[i]->id;
}
static uint64_t map_id(const pb_profile *pb, size_t i)
{
    return pb->mapping[i]->id;
}

static int pv_for_type(const char *t)
{
    static const struct {
        const char *name;
        int pv;
    } types[] = {
        { "inuse_objects", PV_INUSE_OBJECTS }, { "inuse_space", PV_INUSE_SPACE },
        { "alloc_objects", PV_ALLOC_OBJECTS }, { "alloc_space", PV_ALLOC_SPACE },
        /* jemalloc_pprof and older converters: in-use figures only. */
        { "objects", PV_INUSE_OBJECTS },       { "space", PV_INUSE_SPACE },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(types); i++)
        if (strcmp(t, types[i].name) == 0)
            return types[i].pv;
    return -1;
}

static int read_sample_types(struct reader *rd)
{
    const pb_profile *pb = rd->pb;
    bool seen[PV_COUNT] = { false };
    bool any = false;
    struct hp_buf found = HP_BUF_INIT(512);
    int r = 0;
    if (pb->n_sample_type > HP_ARRAY_SIZE(rd->pv_of)) {
        r = perr(rd->ps, rd->err, HP_EPARSE, "%zu sample types (at most %zu expected)",
                 pb->n_sample_type, HP_ARRAY_SIZE(rd->pv_of));
        goto out;
    }
    for (size_t i = 0; i < pb->n_sample_type; i++) {
        const Perftools__Profiles__ValueType *vt = pb->sample_type[i];
        const char *type, *unit;
        if ((r = str_at(rd, vt->type, &type, "sample_type", i, "type")) < 0 ||
            (r = str_at(rd, vt->unit, &unit, "sample_type", i, "unit")) < 0)
            goto out;
        (void)hp_buf_printf(&found, "%s%s/%s", i ? ", " : "", type, unit);
        int pv = pv_for_type(type);
        rd->pv_of[i] = -1;
        if (pv < 0 || seen[pv])
            continue;
        seen[pv] = true;
        any = true;
        rd->pv_of[i] = pv;
        rd->p->value_unit[pv] = unit;
        rd->p->values_present |= (uint8_t)(1u << pv);
        if (pv == PV_ALLOC_OBJECTS || pv == PV_ALLOC_SPACE)
            rd->p->has_alloc = true;
    }
    if (!any)
        r = perr(rd->ps, rd->err, HP_EPARSE,
                 "no heap sample types (found: %s); expected inuse_space, inuse_objects, "
                 "alloc_space, alloc_objects, space or objects",
                 found.len ? found.data : "none");
out:
    hp_buf_release(&found);
    return r;
}

static int read_mappings(struct reader *rd)
{
    const pb_profile *pb = rd->pb;
    if (pb->n_mapping > rd->ps->lim.max_mappings)
        return perr(rd->ps, rd->err, HP_ETOOBIG, "%zu mappings (the limit is %zu)",
                    pb->n_mapping, rd->ps->lim.max_mappings);
    for (size_t i = 0; i < pb->n_mapping; i++) {
        const Perftools__Profiles__Mapping *pm = pb->mapping[i];
        const char *file, *bid;
        int r;
        if ((r = str_at(rd, pm->filename, &file, "mapping id", pm->id, "filename")) < 0 ||
            (r = str_at(rd, pm->build_id, &bid, "mapping id", pm->id, "build_id")) < 0)
            return r;
        struct profile_mapping m = {
            .start = pm->memory_start,
            .limit = pm->memory_limit,
            .offset = pm->file_offset,
            .path = file,
            .build_id = *bid ? bid : NULL,
        };
        /* pprof mappings are the executable ones (code addresses point into
         * them); it records no permissions. */
        memcpy(m.perms, "r-xp", 5);
        m.flags = PROFILE_MAP_EXEC;
        if (!*file)
            m.flags |= PROFILE_MAP_ANON;
        else if (file[0] == '[')
            m.flags |= PROFILE_MAP_SPECIAL;
        if (m.limit < m.start)
            return perr(rd->ps, rd->err, HP_EPARSE,
                        "mapping id %llu ends (0x%llx) before it starts (0x%llx)",
                        (unsigned long long)pm->id, (unsigned long long)m.limit,
                        (unsigned long long)m.start);
        /* Build-ids are compared as lowercase hex elsewhere. */
        char lower[256];
        if (m.build_id && strlen(m.build_id) < sizeof(lower)) {
            size_t k = 0;
            for (; m.build_id[k]; k++) {
                char c = m.build_id[k];
                lower[k] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
            }
            lower[k] = '\0';
            m.build_id = lower;
        }
        profile_mapping_add(rd->p, &m);
    }
    return 0;
}

static bool frames_equal(const struct profile *p, uint32_t loc, const struct profile_frame *f,
                         uint32_t n)
{
    const struct profile_location *l = &p->locs[loc];
    if (l->nframes != n)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        const struct profile_frame *g = &p->frames[l->frame_off + i];
        /* Both sides are interned: pointers identify strings. */
        if (g->function != f[i].function || g->file != f[i].file || g->line != f[i].line)
            return false;
    }
    return true;
}

static int read_locations(struct reader *rd)
{
    const pb_profile *pb = rd->pb;
    struct profile *p = rd->p;
    for (size_t i = 0; i < pb->n_location; i++) {
        const Perftools__Profiles__Location *pl = pb->location[i];
        uint32_t mapping = 0, mi;
        if (pl->mapping_id) {
            if (!hp_map64_get(&rd->map_ids, pl->mapping_id, &mi))
                return perr(rd->ps, rd->err, HP_EPARSE,
                            "location id %llu refers to mapping id %llu which does not exist",
                            (unsigned long long)pl->id, (unsigned long long)pl->mapping_id);
            mapping = mi + 1;
        }
        if (pl->n_line > rd->ps->lim.max_frames)
            return perr(rd->ps, rd->err, HP_ETOOBIG,
                        "location id %llu has %zu lines (the frame limit is %u)",
                        (unsigned long long)pl->id, pl->n_line, rd->ps->lim.max_frames);
        rd->frames = hp_xgrow(rd->frames, &rd->frames_cap, pl->n_line + 1, sizeof(*rd->frames));
        uint32_t nf = 0;
        for (size_t k = 0; k < pl->n_line; k++) {
            const Perftools__Profiles__Line *ln = pl->line[k];
            struct profile_frame fr = { 0 };
            if (ln->function_id) {
                uint32_t fi;
                if (!hp_map64_get(&rd->fn_ids, ln->function_id, &fi))
                    return perr(rd->ps, rd->err, HP_EPARSE,
                                "location id %llu, line %zu refers to function id %llu which "
                                "does not exist",
                                (unsigned long long)pl->id, k,
                                (unsigned long long)ln->function_id);
                const Perftools__Profiles__Function *fn = pb->function[fi];
                const char *name, *sys, *file;
                int r;
                if ((r = str_at(rd, fn->name, &name, "function id", fn->id, "name")) < 0 ||
                    (r = str_at(rd, fn->system_name, &sys, "function id", fn->id,
                                "system_name")) < 0 ||
                    (r = str_at(rd, fn->filename, &file, "function id", fn->id,
                                "filename")) < 0)
                    return r;
                fr.function = *name ? name : *sys ? sys : NULL;
                fr.file = *file ? file : NULL;
            }
            fr.line = ln->line > 0 && ln->line <= UINT32_MAX ? (uint32_t)ln->line : 0;
            rd->frames[nf++] = fr;
        }
        uint32_t idx;
        if (pl->address) {
            size_t before = p->nlocs;
            idx = profile_location_for_address(p, pl->address);
            if (p->nlocs == before) {
                /* The address is taken. Share the location only if it is
                 * the same one (same mapping and frames). */
                const struct profile_location *l = &p->locs[idx];
                if (l->mapping != mapping || !frames_equal(p, idx, rd->frames, nf))
                    idx = profile_location_new(p, pl->address, mapping);
            } else {
                p->locs[idx].mapping = mapping;
            }
        } else {
            /* No address (name-only exporters such as Pyroscope): one
             * location per pprof location. */
            idx = profile_location_new(p, 0, mapping);
        }
        if (nf) {
            profile_location_set_frames(p, idx, rd->frames, nf);
            p->locs[idx].flags |= PROFILE_LOC_SYMBOLIZED;
        }
        rd->loc_of[i] = idx;
    }
    return 0;
}

static uint64_t stack_hash(const uint32_t *locs, size_t n)
{
    return hp_hash_bytes(locs, n * sizeof(*locs), 0x70726f66u);
}

static int read_samples(struct reader *rd)
{
    const pb_profile *pb = rd->pb;
    struct ingest_parser *ps = rd->ps;
    struct profile *p = rd->p;
    uint32_t nostack = UINT32_MAX;
    for (size_t i = 0; i < pb->n_sample; i++) {
        const Perftools__Profiles__Sample *s = pb->sample[i];
        if (s->n_value != pb->n_sample_type)
            return perr(ps, rd->err, HP_EPARSE,
                        "sample %zu has %zu values but the profile declares %zu sample types", i,
                        s->n_value, pb->n_sample_type);
        if (s->n_location_id > ps->lim.max_frames)
            return perr(ps, rd->err, HP_ETOOBIG,
                        "sample %zu has %zu locations (the frame limit is %u)", i,
                        s->n_location_id, ps->lim.max_frames);
        size_t n = s->n_location_id;
        ps->locbuf = hp_xgrow(ps->locbuf, &ps->locbuf_cap, n + 1, sizeof(*ps->locbuf));
        for (size_t k = 0; k < n; k++) {
            uint32_t li;
            if (!hp_map64_get(&rd->loc_ids, s->location_id[k], &li))
                return perr(ps, rd->err, HP_EPARSE,
                            "sample %zu refers to location id %llu which does not exist", i,
                            (unsigned long long)s->location_id[k]);
            ps->locbuf[k] = rd->loc_of[li];
        }
        if (n == 0) {
            /* Keep the sample's value in the totals, as pprof does. */
            if (nostack == UINT32_MAX) {
                static const char label[] = "[no stack]";
                nostack = profile_location_for_name(p, label, sizeof(label) - 1);
            }
            ps->locbuf[n++] = nostack;
        }
        int64_t raw[PV_COUNT] = { 0 };
        for (size_t v = 0; v < s->n_value; v++)
            if (rd->pv_of[v] >= 0)
                raw[rd->pv_of[v]] = s->value[v];
        /* Merge samples over the same stack (pprof keeps them apart when
         * their labels differ; the model has one sample per stack). */
        uint64_t h = stack_hash(ps->locbuf, n);
        for (uint64_t key = h;; key++) {
            uint32_t si;
            if (!hp_map64_get(&rd->stacks, key, &si)) {
                if (p->nsamples >= ps->lim.max_stacks)
                    return perr(ps, rd->err, HP_ETOOBIG,
                                "more than %zu distinct stacks (the limit)", ps->lim.max_stacks);
                uint32_t st = profile_stack_add(p, ps->locbuf, (uint32_t)n);
                (void)profile_sample_add(p, st, 0, raw);
                (void)hp_map64_put(&rd->stacks, key, (uint32_t)(p->nsamples - 1), &si);
                break;
            }
            struct profile_sample *ex = &p->samples[si];
            const struct profile_stack *st = &p->stacks[ex->stack];
            if (st->n == n &&
                memcmp(profile_stack_locs(p, ex->stack), ps->locbuf, n * sizeof(uint32_t)) == 0) {
                for (int v = 0; v < PV_COUNT; v++) {
                    /* Saturate rather than overflow on hostile values. */
                    if (__builtin_add_overflow(ex->raw[v], raw[v], &ex->raw[v]))
                        ex->raw[v] = raw[v] < 0 ? INT64_MIN : INT64_MAX;
                    ex->value[v] = (double)ex->raw[v];
                }
                break;
            }
        }
    }
    return 0;
}

static int read_meta(struct reader *rd)
{
    const pb_profile *pb = rd->pb;
    struct profile *p = rd->p;
    p->scaling = PROFILE_SCALING_NONE; /* pprof values are already un-sampled */
    p->period = pb->period > 0 ? (uint64_t)pb->period : 1;
    p->time_ns = pb->time_nanos;
    /* Comments (free text such as the producer's command line) become the
     * profile's hint, capped. */
    struct hp_buf hint = HP_BUF_INIT(1024);
    int r = 0;
    for (size_t i = 0; i < pb->n_comment; i++) {
        const char *c;
        if ((r = str_at(rd, pb->comment[i], &c, "comment", i, "text")) < 0)
            goto out;
        if (hint.len)
            (void)hp_buf_puts(&hint, "; ");
        (void)hp_buf_puts(&hint, c);
    }
    if (pb->period_type) {
        const char *t, *u;
        if ((r = str_at(rd, pb->period_type->type, &t, "period_type", NO_ID, "type")) < 0 ||
            (r = str_at(rd, pb->period_type->unit, &u, "period_type", NO_ID, "unit")) < 0)
            goto out;
    }
    if (hint.len)
        p->hint = profile_intern(p, hint.data, hint.len);
out:
    hp_buf_release(&hint);
    return r;
}

int ingest__pprof_parse(struct ingest_parser *ps, const uint8_t *data, size_t len,
                        struct hp_buf *err)
{
    struct hp_buf plain = HP_BUF_INIT(ps->lim.max_bytes);
    struct budget bud = { 0 };
    ProtobufCAllocator alloc = { .alloc = budget_alloc, .free = budget_free,
                                 .allocator_data = &bud };
    pb_profile *pb = NULL;
    struct reader rd = { .ps = ps, .err = err, .p = ps->p };
    int r = 0;
    hp_map64_init(&rd.loc_ids);
    hp_map64_init(&rd.fn_ids);
    hp_map64_init(&rd.map_ids);
    hp_map64_init(&rd.stacks);

    if (len == 0) {
        r = perr(ps, err, HP_EPARSE, "empty input");
        goto out;
    }
    if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if ((r = gunzip(ps, data, len, &plain, err)) < 0)
            goto out;
        data = (const uint8_t *)(plain.data ? plain.data : "");
        len = plain.len;
    }
    bud.cap = len > (SIZE_MAX - PPROF_MEM_FLOOR) / PPROF_MEM_PER_BYTE
                  ? SIZE_MAX
                  : PPROF_MEM_FLOOR + len * PPROF_MEM_PER_BYTE;
    pb = perftools__profiles__profile__unpack(&alloc, len, data);
    if (!pb) {
        if (bud.over)
            r = perr(ps, err, HP_ETOOBIG,
                     "decoding %zu bytes needs more than %zu MiB of memory (the limit for "
                     "this size); the message is not a plausible profile",
                     len, bud.cap >> 20);
        else
            r = explain_decode_error(ps, data, len, &alloc, err);
        goto out;
    }
    rd.pb = pb;
    if (pb->n_string_table > 0 && pb->string_table[0].len != 0) {
        r = perr(ps, err, HP_EPARSE, "string_table[0] must be the empty string");
        goto out;
    }
    rd.strs = hp_xcalloc(pb->n_string_table + 1, sizeof(*rd.strs));
    rd.loc_of = hp_xcalloc(pb->n_location + 1, sizeof(*rd.loc_of));
    if ((r = read_sample_types(&rd)) < 0 ||
        (r = index_ids(&rd, &rd.map_ids, pb->n_mapping, "mapping", map_id)) < 0 ||
        (r = index_ids(&rd, &rd.fn_ids, pb->n_function, "function", fn_id)) < 0 ||
        (r = index_ids(&rd, &rd.loc_ids, pb->n_location, "location", loc_id)) < 0 ||
        (r = read_meta(&rd)) < 0 || (r = read_mappings(&rd)) < 0 ||
        (r = read_locations(&rd)) < 0 || (r = read_samples(&rd)) < 0)
        goto out;
out:
    if (pb)
        perftools__profiles__profile__free_unpacked(pb, &alloc);
    free(rd.strs);
    free(rd.loc_of);
    free(rd.frames);
    hp_map64_release(&rd.loc_ids);
    hp_map64_release(&rd.fn_ids);
    hp_map64_release(&rd.map_ids);
    hp_map64_release(&rd.stacks);
    hp_buf_release(&plain);
    return r;
}
