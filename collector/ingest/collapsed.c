/* Collapsed ("folded") stacks, as jeprof --collapsed, RisingWave's dashboard
 * and flamegraph.pl's stackcollapse scripts write them: one stack per line,
 * frames root first joined by ';', a blank, then an integer value.
 *
 *   main;run_query;HashJoin::build;malloc 1048576
 *
 * There are no addresses, so every frame becomes a named location. The value
 * is a byte count (these exports are of in-use space); objects are unknown. A
 * stack that repeats is summed. Frame names may hold any byte but ';' and NUL:
 * they are kept as given (non-UTF-8 included) and escaped on output.
 *
 * Lines that are not stacks -- comments ("# ...", "// ...") and anything
 * else that does not end in a value -- are skipped and counted, as
 * flamegraph.pl and speedscope do; the profile says how many and which came
 * first. A file with no stack line at all is an error naming that line. */
#include "collector/ingest/ingest-internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Count a line that is not a stack; remember the first invalid one (or the
 * first comment while there is no invalid line). */
static int skip_line(struct ingest_parser *ps, const char *line, size_t len, bool comment)
{
    bool replace = ps->bad_lines++ == 0 || (ps->first_bad_is_comment && !comment);
    if (replace) {
        ps->first_bad_is_comment = comment;
        ps->first_bad_line = ps->lineno;
        (void)ingest__excerpt(line, len, ps->first_bad, sizeof(ps->first_bad));
    }
    return 0;
}

static int collapsed_line(struct ingest_parser *ps, const char *line, size_t len,
                          struct hp_buf *err)
{
    const char *end = line + len;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (end == line)
        return 0;
    if (line[0] == '#' || (len >= 2 && line[0] == '/' && line[1] == '/'))
        return skip_line(ps, line, len, true); /* comment lines some tools add */
    const char *d = end;
    while (d > line && (unsigned)(d[-1] - '0') <= 9)
        d--;
    const char *sp = d;
    while (sp > line && (sp[-1] == ' ' || sp[-1] == '\t'))
        sp--;
    if (d == end || sp == d || sp == line)
        return skip_line(ps, line, len, false);
    uint64_t v;
    if (hp_parse_u64(d, (size_t)(end - d), &v) < 0 || v > (uint64_t)INT64_MAX)
        return skip_line(ps, line, len, false);
    if (memchr(line, '\0', (size_t)(sp - line)))
        return skip_line(ps, line, len, false);
    ps->valid_lines++;
    /* Frames root first in the text; the model keeps leaf first. */
    uint32_t n = 0;
    const char *f = line;
    for (;;) {
        const char *semi = memchr(f, ';', (size_t)(sp - f));
        const char *fe = semi ? semi : sp;
        if (n >= ps->lim.max_frames)
            return ingest__error(ps, err, HP_ETOOBIG, "stack has more than %u frames (the limit)",
                                 ps->lim.max_frames);
        ps->locbuf = hp_xgrow(ps->locbuf, &ps->locbuf_cap, n + 1, sizeof(*ps->locbuf));
        ps->locbuf[n++] = profile_location_for_name(ps->p, f, (size_t)(fe - f));
        if (!semi)
            break;
        f = semi + 1;
    }
    for (uint32_t i = 0; i < n / 2; i++) {
        uint32_t t = ps->locbuf[i];
        ps->locbuf[i] = ps->locbuf[n - 1 - i];
        ps->locbuf[n - 1 - i] = t;
    }
    if (ps->p->nstacks >= ps->lim.max_stacks)
        return ingest__error(ps, err, HP_ETOOBIG, "profile has more than %zu stacks (the limit)",
                             ps->lim.max_stacks);
    uint32_t stack = profile_stack_add(ps->p, ps->locbuf, n);
    int64_t raw[PV_COUNT] = { 0, (int64_t)v, 0, 0 };
    (void)profile_sample_add(ps->p, stack, 0, raw);
    return 0;
}

static int collapsed_end(struct ingest_parser *ps, struct hp_buf *err)
{
    if (ps->bad_lines) {
        char what[200];
        snprintf(what, sizeof(what), "%s line %llu: \"%s\"",
                 ps->first_bad_is_comment ? "comment" : "invalid", (unsigned long long)ps->first_bad_line,
                 ps->first_bad);
        ps->p->lines_skipped = ps->bad_lines;
        ps->p->skipped_first = profile_intern(ps->p, what, strlen(what));
    }
    if (ps->valid_lines == 0) {
        ps->lineno = 0; /* the message names the line itself */
        if (ps->bad_lines == 0)
            return ingest__error(ps, err, HP_EPARSE, "no stack lines (expected "
                                                     "\"frame;frame;... <value>\")");
        return ingest__error(ps, err, HP_EPARSE,
                             "no valid stack line in %llu lines; the first bad one is line %llu: \"%s\" "
                             "(expected \"frame;frame;... <value>\")",
                             (unsigned long long)ps->bad_lines,
                             (unsigned long long)ps->first_bad_line, ps->first_bad);
    }
    return 0;
}

int ingest__collapsed_begin(struct ingest_parser *ps, struct hp_buf *err)
{
    ps->line = collapsed_line;
    ps->end = collapsed_end;
    ps->p->scaling = PROFILE_SCALING_NONE;
    ps->p->period = 1;
    return 0;
}
