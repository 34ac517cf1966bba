/* Symbol coverage: the named share of a profile's bytes, and the note lines
 * that say, per object left unnamed, which sources were asked and what each
 * said (grammar in query.h). The collector writes the lines; `query`, the
 * web API and the UI read them back, so the grammar lives in one file. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "query/query.h"

double query_named_ratio(const struct profile *p)
{
    double all = 0, named = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *sm = &p->samples[i];
        const struct profile_stack *stk = &p->stacks[sm->stack];
        double v = sm->value[PV_INUSE_SPACE];
        bool ok = true;
        for (uint32_t k = 0; k < stk->n && ok; k++) {
            const struct profile_location *l = &p->locs[p->stack_locs[stk->off + k]];
            if (!(l->flags & PROFILE_LOC_ALLOCATOR) && l->nframes == 0)
                ok = false;
        }
        all += v;
        if (ok)
            named += v;
    }
    return all > 0 ? named / all : NAN;
}

/* Text without newlines (a note line must stay one line). */
static void put_line_text(struct hp_buf *b, const char *s)
{
    for (; *s; s++) {
        char c = *s == '\n' || *s == '\r' ? ' ' : *s;
        (void)hp_buf_append(b, &c, 1);
    }
}

void query_note_unnamed_add(struct hp_buf *note, const char *object, const char *build_id,
                            const char *message, const char *tried)
{
    hp_buf_puts(note, note->len ? "\nunnamed " : "unnamed ");
    put_line_text(note, object);
    if (build_id && *build_id)
        hp_buf_printf(note, " (build-id %s)", build_id);
    hp_buf_puts(note, ": ");
    put_line_text(note, message && *message ? message : "no names");
    if (tried && *tried) {
        hp_buf_puts(note, " {tried: ");
        put_line_text(note, tried);
        hp_buf_puts(note, "}");
    }
}

static void parse_tried(const char *t, size_t n, struct hp_arena *a, struct query_unnamed *u)
{
    size_t cap = 1;
    for (size_t i = 0; i + 2 < n; i++)
        cap += memcmp(t + i, " | ", 3) == 0;
    u->tried = hp_arena_alloc(a, cap * sizeof(*u->tried));
    const char *end = t + n;
    while (t < end) {
        const char *sep = t;
        while (sep < end && !(sep + 2 < end && memcmp(sep, " | ", 3) == 0))
            sep++;
        const char *colon = NULL;
        for (const char *q = t; q + 1 < sep; q++)
            if (q[0] == ':' && q[1] == ' ') {
                colon = q;
                break;
            }
        struct query_source_answer *ans = &u->tried[u->ntried++];
        ans->source = colon ? hp_arena_strndup(a, t, (size_t)(colon - t)) : "";
        ans->said = colon ? hp_arena_strndup(a, colon + 2, (size_t)(sep - colon - 2))
                          : hp_arena_strndup(a, t, (size_t)(sep - t));
        t = sep < end ? sep + 3 : end;
    }
}

static bool parse_line(const char *l, size_t n, struct hp_arena *a, struct query_unnamed *u)
{
    static const char pre[] = "unnamed ";
    if (n < sizeof(pre) || memcmp(l, pre, sizeof(pre) - 1) != 0)
        return false;
    memset(u, 0, sizeof(*u));
    const char *p = l + sizeof(pre) - 1, *end = l + n;
    /* The object ends at " (build-id " or at the first ": ". */
    const char *colon = NULL, *bid = NULL;
    for (const char *q = p; q + 1 < end; q++) {
        if (!bid && !colon && (size_t)(end - q) > 11 && memcmp(q, " (build-id ", 11) == 0)
            bid = q;
        if (q[0] == ':' && q[1] == ' ' && (!bid || (q > bid && q[-1] == ')'))) {
            colon = q;
            break;
        }
    }
    if (!colon)
        return false;
    if (bid) {
        u->object = hp_arena_strndup(a, p, (size_t)(bid - p));
        u->build_id = hp_arena_strndup(a, bid + 11, (size_t)(colon - 1 - bid - 11));
    } else {
        u->object = hp_arena_strndup(a, p, (size_t)(colon - p));
    }
    const char *msg = colon + 2, *mend = end;
    static const char tm[] = " {tried: ";
    const char *t = NULL;
    for (const char *q = msg; q + sizeof(tm) - 1 <= end; q++)
        if (memcmp(q, tm, sizeof(tm) - 1) == 0)
            t = q;
    if (t && end[-1] == '}') {
        mend = t;
        parse_tried(t + sizeof(tm) - 1, (size_t)(end - 1 - (t + sizeof(tm) - 1)), a, u);
    }
    u->message = hp_arena_strndup(a, msg, (size_t)(mend - msg));
    return true;
}

void query_note_unnamed_parse(const char *note, struct hp_arena *a, struct query_unnamed **ret,
                              size_t *ret_n)
{
    size_t cap = 1, n = 0;
    for (const char *q = note; q && *q; q++)
        cap += *q == '\n';
    struct query_unnamed *v = hp_arena_alloc(a, cap * sizeof(*v));
    for (const char *l = note; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        if (n < cap && parse_line(l, len, a, &v[n]))
            n++;
        l = nl ? nl + 1 : l + len;
    }
    *ret = v;
    *ret_n = n;
}

json_t *query_coverage_json(const struct profile *p)
{
    json_t *o = json_object();
    double r = query_named_ratio(p);
    json_object_set_new(o, "named_bytes_ratio", isnan(r) ? json_null() : json_real(r));
    struct hp_arena a;
    hp_arena_init(&a);
    struct query_unnamed *u;
    size_t n;
    query_note_unnamed_parse(p->hint, &a, &u, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "object", query_json_string(u[i].object));
        json_object_set_new(e, "build_id",
                            u[i].build_id ? query_json_string(u[i].build_id) : json_null());
        json_object_set_new(e, "message", query_json_string(u[i].message));
        json_t *t = json_array();
        for (size_t k = 0; k < u[i].ntried; k++) {
            json_t *s = json_object();
            json_object_set_new(s, "source", query_json_string(u[i].tried[k].source));
            json_object_set_new(s, "said", query_json_string(u[i].tried[k].said));
            json_array_append_new(t, s);
        }
        json_object_set_new(e, "tried", t);
        json_array_append_new(arr, e);
    }
    json_object_set_new(o, "unnamed", arr);
    /* The last re-derivation's line, if any. */
    const char *rs = NULL;
    for (const char *l = p->hint; l && *l;) {
        const char *nl = strchr(l, '\n');
        if (strncmp(l, "re-symbolized ", 14) == 0)
            rs = l;
        l = nl ? nl + 1 : l + strlen(l);
    }
    if (rs) {
        const char *nl = strchr(rs, '\n');
        char *line = hp_arena_strndup(&a, rs, nl ? (size_t)(nl - rs) : strlen(rs));
        json_object_set_new(o, "resymbolized", query_json_string(line));
    } else {
        json_object_set_new(o, "resymbolized", json_null());
    }
    hp_arena_release(&a);
    return o;
}
