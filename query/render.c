/* Renderers for a single profile: collapsed stacks, the text top table and
 * JSON. Graph renderers (dot, svg) and pprof live in their own files. */
#include "query/analysis-internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int query_render_collapsed(const struct query_folded *f, const struct query_opts *o,
                           struct hp_buf *out)
{
    double *vals = hp_xmalloc((f->nentries + 1) * sizeof(*vals));
    int64_t *ints = hp_xmalloc((f->nentries + 1) * sizeof(*ints));
    for (size_t i = 0; i < f->nentries; i++)
        vals[i] = f->entries[i].value[o->sample];
    query_round_preserving_sum(vals, f->nentries, ints);
    for (size_t i = 0; i < f->nentries; i++) {
        const struct query_fold_entry *e = &f->entries[i];
        if (ints[i] == 0 && vals[i] == 0)
            continue;
        const char *const *names = query_fold_frames(f, e);
        for (uint32_t k = 0; k < e->n; k++) {
            if (k)
                hp_buf_append(out, ";", 1);
            /* ';' and newlines would break the line format: replace them.
             * Names rarely hold one: strpbrk (vectorized in glibc) finds
             * out, where the byte loop over the output was most of the
             * cost of rendering 10 MB of stacks (perf, sym-bench). */
            const char *s = names[k];
            size_t start = out->len;
            hp_buf_puts(out, s);
            if (strpbrk(s, ";\n\r"))
                for (size_t j = start; j < out->len; j++)
                    if (out->data[j] == ';' || out->data[j] == '\n' || out->data[j] == '\r')
                        out->data[j] = ':';
        }
        hp_buf_printf(out, " %lld\n", (long long)ints[i]);
    }
    free(vals);
    free(ints);
    return 0;
}

const char *query_snapref_label(const struct query_snapref *r, char *out, size_t outsz)
{
    char tb[40];
    if (r->time_ms)
        hp_time_format(r->time_ms, tb, sizeof(tb));
    else
        snprintf(tb, sizeof(tb), "time unknown");
    if (r->id > 0)
        snprintf(out, outsz, "#%lld %s at %s", (long long)r->id, r->node, tb);
    else
        snprintf(out, outsz, "%s (%s)", r->path ? r->path : "(profile)", tb);
    return out;
}

json_t *query_snapref_json(const struct query_snapref *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "id", r->id > 0 ? json_integer(r->id) : json_null());
    json_object_set_new(j, "node", r->node[0] ? json_string(r->node) : json_null());
    char tb[40];
    json_object_set_new(j, "time",
                        r->time_ms ? json_string(hp_time_format(r->time_ms, tb, sizeof(tb)))
                                   : json_null());
    if (r->path)
        json_object_set_new(j, "path", json_string(r->path));
    return j;
}

static bool is_bytes(enum profile_value v)
{
    return v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE;
}

static const char *fmt_value(enum profile_value v, double x, char *buf, size_t n)
{
    return is_bytes(v) ? query_fmt_bytes(x, buf, n) : query_fmt_count(x, buf, n);
}

/* s right-aligned in width columns at w (printf's "%*s": never cut). */
static char *put_right(char *w, const char *s, size_t n, size_t width)
{
    for (size_t i = n; i < width; i++)
        *w++ = ' ';
    memcpy(w, s, n);
    return w + n;
}

/* One row of the top table: what "%12s %5.1f%% %5.1f%% %12s %5.1f%%  %s\n"
 * writes, without printf (numfmt.c says why). */
static void top_row(struct hp_buf *out, enum profile_value v, double flat, double pf, double ps,
                    double cum, double pc, const char *name)
{
    char row[4 * QUERY_FMT_MIN + 64], num[QUERY_FMT_MIN], *w = row;
    fmt_value(v, flat, num, sizeof(num));
    w = put_right(w, num, strlen(num), 12);
    *w++ = ' ';
    w = put_right(w, num, query_fmt_fixed(pf, 1, num, sizeof(num)), 5);
    *w++ = '%';
    *w++ = ' ';
    w = put_right(w, num, query_fmt_fixed(ps, 1, num, sizeof(num)), 5);
    *w++ = '%';
    *w++ = ' ';
    fmt_value(v, cum, num, sizeof(num));
    w = put_right(w, num, strlen(num), 12);
    *w++ = ' ';
    w = put_right(w, num, query_fmt_fixed(pc, 1, num, sizeof(num)), 5);
    memcpy(w, "%  ", 3);
    w += 3;
    (void)hp_buf_append(out, row, (size_t)(w - row));
    (void)hp_buf_puts(out, name);
    (void)hp_buf_append(out, "\n", 1);
}

int query_render_top_text(const struct profile *p, const struct query_folded *f,
                          const struct query_top *t, const struct query_opts *o,
                          struct hp_buf *out)
{
    enum profile_value v = o->sample;
    char a[QUERY_FMT_MIN];
    if (o->title)
        hp_buf_printf(out, "%s\n", o->title);
    hp_buf_printf(out, "Profile: %s", profile_format_name(p->format));
    if (p->scaling == PROFILE_SCALING_V2 && p->period <= 1)
        hp_buf_printf(out, ", every allocation recorded (heap_v2/%llu)",
                      (unsigned long long)p->period);
    else if (p->scaling == PROFILE_SCALING_V2)
        hp_buf_printf(out, ", sampled every %llu bytes on average (un-sampled as jeprof does)",
                      (unsigned long long)p->period);
    else if (p->scaling == PROFILE_SCALING_V1)
        hp_buf_printf(out, ", v1 sampling period %llu", (unsigned long long)p->period);
    else if (p->period > 1)
        hp_buf_printf(out, ", sampled every %llu bytes on average (the file's period; values "
                           "un-sampled by its producer)",
                      (unsigned long long)p->period);
    else
        hp_buf_puts(out, ", unsampled");
    hp_buf_printf(out, "; %zu stacks, %zu threads, %zu mappings\n", p->nsamples, p->nthreads,
                  p->nmappings);
    if (p->hint)
        hp_buf_printf(out, "Note: %s\n", p->hint);
    double total = t->total[v];
    hp_buf_printf(out, "Total %s: %s (%lld %s)\n", profile_value_name(v),
                  fmt_value(v, total, a, sizeof(a)), (long long)hp_double_to_i64(total),
                  is_bytes(v) ? "bytes" : "objects");
    if (o->focus || o->ignore) {
        double all[PV_COUNT];
        profile_totals(p, all);
        hp_buf_printf(out, "Shown: %.1f%% of %s after --focus/--ignore\n",
                      all[v] ? 100.0 * total / all[v] : 0.0, fmt_value(v, all[v], a, sizeof(a)));
    }
    hp_buf_printf(out, "%12s %6s %6s %12s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
                  "function");
    double sum = 0;
    size_t rows = o->top ? HP_MIN(o->top, t->n) : t->n;
    for (size_t i = 0; i < rows; i++) {
        const struct query_func *fn = &t->funcs[i];
        sum += fn->flat[v];
        double pf = total ? 100.0 * fn->flat[v] / total : 0;
        double ps = total ? 100.0 * sum / total : 0;
        double pc = total ? 100.0 * fn->cum[v] / total : 0;
        top_row(out, v, fn->flat[v], pf, ps, fn->cum[v], pc, fn->name);
    }
    if (rows < t->n)
        hp_buf_printf(out, "(%zu more functions; --top 0 shows all)\n", t->n - rows);
    (void)f;
    return 0;
}

/* A frame's file:line: the folded form keeps names only, so JSON looks the
 * details up in the source profile by name (first occurrence wins). */
static json_t *jstr(struct hp_arena *a, const char *s)
{
    return json_string(query_utf8_clean(a, s));
}

int query_render_json(const struct profile *p, const struct query_folded *f,
                      const struct query_top *t, const struct query_opts *o,
                      struct hp_buf *out)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    enum profile_value v = o->sample;
    json_t *root = json_object();
    if (o->snap)
        json_object_set_new(root, "snapshot", query_snapref_json(o->snap));
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string(profile_format_name(p->format)));
    json_object_set_new(meta, "scaling",
                        json_string(p->scaling == PROFILE_SCALING_V2   ? "v2"
                                    : p->scaling == PROFILE_SCALING_V1 ? "v1"
                                                                       : "none"));
    json_object_set_new(meta, "period", json_integer((json_int_t)p->period));
    json_object_set_new(meta, "stacks", json_integer((json_int_t)p->nsamples));
    json_object_set_new(meta, "threads", json_integer((json_int_t)p->nthreads));
    json_object_set_new(meta, "mappings", json_integer((json_int_t)p->nmappings));
    if (p->hint)
        json_object_set_new(meta, "hint", jstr(&tmp, p->hint));
    if (p->time_ns)
        json_object_set_new(meta, "time_ns", json_integer((json_int_t)p->time_ns));
    json_object_set_new(root, "profile", meta);
    json_object_set_new(root, "sample", json_string(profile_value_name(v)));
    json_t *totals = json_object();
    int64_t tot_int[PV_COUNT];
    for (int i = 0; i < PV_COUNT; i++) {
        tot_int[i] = hp_double_to_i64(f->total[i]);
        json_object_set_new(totals, profile_value_name((enum profile_value)i),
                            json_integer((json_int_t)tot_int[i]));
    }
    json_object_set_new(root, "totals", totals);
    json_object_set_new(root, "total", json_integer((json_int_t)tot_int[v]));

    /* Frame details: first symbolized frame seen for each display name. */
    struct hp_map64 detail;
    hp_map64_init(&detail);
    for (size_t li = 0; li < p->nlocs; li++) {
        const struct profile_location *l = &p->locs[li];
        for (uint32_t k = 0; k < l->nframes; k++) {
            const struct profile_frame *fr = &p->frames[l->frame_off + k];
            if (!fr->function || !fr->file)
                continue;
            /* Interning into the folded table (const-cast: the table is a
             * cache of names; adding one changes no entry). */
            const char *key = hp_strtab_intern((struct hp_strtab *)&f->strings, fr->function,
                                               strlen(fr->function));
            uint32_t dummy;
            (void)hp_map64_put(&detail, (uint64_t)(uintptr_t)key, (uint32_t)(l->frame_off + k),
                               &dummy);
        }
    }

    json_t *funcs = json_array();
    size_t rows = o->top ? HP_MIN(o->top, t->n) : t->n;
    for (size_t i = 0; i < rows; i++) {
        const struct query_func *fn = &t->funcs[i];
        json_t *j = json_object();
        json_object_set_new(j, "name", jstr(&tmp, fn->name));
        json_object_set_new(j, "flat", json_integer(hp_double_to_i64(fn->flat[v])));
        json_object_set_new(j, "cum", json_integer(hp_double_to_i64(fn->cum[v])));
        json_t *all = json_object();
        for (int k = 0; k < PV_COUNT; k++) {
            json_t *pair = json_object();
            json_object_set_new(pair, "flat", json_integer(hp_double_to_i64(fn->flat[k])));
            json_object_set_new(pair, "cum", json_integer(hp_double_to_i64(fn->cum[k])));
            json_object_set_new(all, profile_value_name((enum profile_value)k), pair);
        }
        json_object_set_new(j, "values", all);
        uint32_t fi;
        if (hp_map64_get(&detail, (uint64_t)(uintptr_t)fn->name, &fi)) {
            json_object_set_new(j, "file", jstr(&tmp, p->frames[fi].file));
            json_object_set_new(j, "line", json_integer(p->frames[fi].line));
        }
        json_array_append_new(funcs, j);
    }
    json_object_set_new(root, "functions", funcs);

    double *vals = hp_xmalloc((f->nentries + 1) * sizeof(*vals));
    int64_t *ints = hp_xmalloc((f->nentries + 1) * sizeof(*ints));
    for (size_t i = 0; i < f->nentries; i++)
        vals[i] = f->entries[i].value[v];
    query_round_preserving_sum(vals, f->nentries, ints);
    json_t *stacks = json_array();
    for (size_t i = 0; i < f->nentries; i++) {
        const struct query_fold_entry *e = &f->entries[i];
        json_t *s = json_object();
        json_t *frames = json_array();
        const char *const *names = query_fold_frames(f, e);
        for (uint32_t k = 0; k < e->n; k++) {
            json_t *fr = json_object();
            json_object_set_new(fr, "function", jstr(&tmp, names[k]));
            uint32_t fi;
            if (hp_map64_get(&detail, (uint64_t)(uintptr_t)names[k], &fi)) {
                json_object_set_new(fr, "file", jstr(&tmp, p->frames[fi].file));
                json_object_set_new(fr, "line", json_integer(p->frames[fi].line));
            }
            json_array_append_new(frames, fr);
        }
        json_object_set_new(s, "frames", frames);
        json_object_set_new(s, "value", json_integer((json_int_t)ints[i]));
        json_t *all = json_object();
        for (int k = 0; k < PV_COUNT; k++)
            json_object_set_new(all, profile_value_name((enum profile_value)k),
                                json_real(e->value[k]));
        json_object_set_new(s, "values", all);
        json_array_append_new(stacks, s);
    }
    json_object_set_new(root, "stacks", stacks);
    free(vals);
    free(ints);
    hp_map64_release(&detail);

    hp_arena_release(&tmp);
    return qa_json_emit(root, out); /* jansson's default precision is 17 digits too */
}
