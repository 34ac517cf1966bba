/* A collector sink that keeps everything in a directory, for use before (or
 * without) the SQLite store and for tests:
 *
 *   DIR/snapshots.jsonl        one JSON object per poll attempt, appended
 *   DIR/<node>/<time>.heap     each raw dump, byte for byte as received
 *   DIR/<node>/last.json       the node's latest attempt (its status)
 *   DIR/<node>/last-dump       name of the node's latest dump file
 *
 * A dump identical to the node's previous one (an agent whose process wrote
 * nothing new) is not written again; its record names the earlier file.
 *
 * Dumps are written to a temporary name and renamed, so a reader never sees
 * half a file. Node names are made safe for file names ([A-Za-z0-9._-],
 * everything else becomes '_'). Called on worker threads, one at a time. */
#include "collector/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/poll/poll.h"
#include "store/profile.h"

struct dirsink {
    struct collector_sink sink;
    char *dir;
    int jsonl_fd;
};

static void iso_time(int64_t ms, char *out, size_t outsz, bool compact)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[32];
    strftime(base, sizeof(base), compact ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outsz, "%s.%03dZ", base, (int)(ms % 1000));
}

static char *safe_name(const char *name)
{
    char *s = hp_xstrdup(name);
    for (char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '_';
    if (s[0] == '.')
        s[0] = '_'; /* never "." or ".." */
    return s;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return HP_ERR(errno);
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Write a file atomically: DIR/.tmp-name then rename. */
static int write_file(const char *path, const void *data, size_t len, struct hp_buf *err)
{
    char *tmp = hp_xasprintf("%s.tmp", path);
    int r = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        r = HP_ERR(errno);
        hp_err_printf(err, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    r = write_all(fd, data, len);
    if (close(fd) < 0 && r == 0)
        r = HP_ERR(errno);
    if (r < 0) {
        hp_err_printf(err, "%s: write failed: %s", tmp, hp_strerror(r));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) < 0) {
        r = HP_ERR(errno);
        hp_err_printf(err, "%s: rename failed: %s", path, strerror(errno));
        unlink(tmp);
    }
out:
    free(tmp);
    return r;
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* json_string refuses invalid UTF-8; node replies may contain anything, so
 * bad bytes become U+FFFD (hp_utf8_clean). */
static json_t *json_text(const char *s)
{
    if (!s)
        return json_null();
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *j = json_string(hp_utf8_clean(&tmp, s));
    hp_arena_release(&tmp);
    return j ? j : json_null();
}

static json_t *json_bytes(double v)
{
    return isfinite(v) ? json_integer((json_int_t)v) : json_null();
}

static json_t *result_json(const struct collector_result *r, const char *dump_rel)
{
    char t[40];
    json_t *o = json_object();
    iso_time(r->started_ms, t, sizeof(t), false);
    json_object_set_new(o, "time", json_string(t));
    json_object_set_new(o, "round", json_integer((json_int_t)r->round));
    json_object_set_new(o, "node", json_text(r->node->name));
    json_object_set_new(o, "kind", json_string(poll_kind_name(r->node->kind)));
    json_object_set_new(o, "addr", json_text(r->node->addr));
    json_t *labels = json_object();
    for (size_t i = 0; i < r->node->nlabels; i++)
        json_object_set_new(labels, r->node->labels[i].key, json_text(r->node->labels[i].value));
    json_object_set_new(o, "labels", labels);
    json_object_set_new(o, "status", json_string(r->status == 0 ? "ok" : "failed"));
    json_object_set_new(o, "error", json_text(r->error));
    json_object_set_new(o, "duration_ms", json_integer(r->finished_ms - r->started_ms));
    if (r->dump) {
        json_t *d = json_object();
        json_object_set_new(d, "file", json_str_or_null(dump_rel));
        json_object_set_new(d, "bytes", json_integer((json_int_t)r->dump_len));
        json_object_set_new(d, "url", json_text(r->dump_url));
        json_object_set_new(d, "content_type", json_text(r->dump_content_type));
        json_object_set_new(d, "fetch_ms", json_integer((json_int_t)r->dump_ms));
        json_object_set_new(d, "unchanged", json_boolean(r->dump_unchanged));
        json_object_set_new(o, "dump", d);
    } else {
        json_object_set_new(o, "dump", json_null());
    }
    json_object_set_new(o, "remote_path", json_text(r->remote_path));
    if (r->profile) {
        const struct profile *p = r->profile;
        double tot[PV_COUNT];
        profile_totals(p, tot);
        json_t *pj = json_object();
        json_object_set_new(pj, "format", json_string(profile_format_name(p->format)));
        json_object_set_new(pj, "period", json_integer((json_int_t)p->period));
        json_object_set_new(pj, "samples", json_integer((json_int_t)p->nsamples));
        json_object_set_new(pj, "mappings", json_integer((json_int_t)p->nmappings));
        json_object_set_new(pj, "inuse_objects", json_real(tot[PV_INUSE_OBJECTS]));
        json_object_set_new(pj, "inuse_bytes", json_real(tot[PV_INUSE_SPACE]));
        json_object_set_new(pj, "alloc_objects", json_real(tot[PV_ALLOC_OBJECTS]));
        json_object_set_new(pj, "alloc_bytes", json_real(tot[PV_ALLOC_SPACE]));
        json_object_set_new(o, "profile", pj);
    } else {
        json_object_set_new(o, "profile", json_null());
    }
    json_object_set_new(o, "parse_error", json_text(r->parse_error));
    if (r->activated_ms) {
        iso_time(r->activated_ms, t, sizeof(t), false);
        json_object_set_new(o, "activated_at", json_string(t));
    } else {
        json_object_set_new(o, "activated_at", json_null());
    }
    json_object_set_new(o, "activation_reply", json_text(r->activation_reply));
    json_t *figs = json_object();
    for (size_t i = 0; r->figures && i < r->figures->n; i++) {
        const struct poll_figure *f = &r->figures->v[i];
        json_t *v = isfinite(f->value) ? json_real(f->value) : json_null();
        /* Exact integers stay integers (byte counts). */
        if (isfinite(f->value) && f->value == (double)(json_int_t)f->value &&
            f->value < 9.007199254740992e15 && f->value > -9.007199254740992e15) {
            json_decref(v);
            v = json_integer((json_int_t)f->value);
        }
        json_object_set_new(figs, f->name, v ? v : json_null());
    }
    json_object_set_new(o, "figures", figs);
    struct poll_memory mem;
    poll_memory_pick(r->figures ? r->figures : &(struct poll_figures){0}, &mem);
    json_t *mj = json_object();
    json_object_set_new(mj, "rss_bytes", json_bytes(mem.rss_bytes));
    json_object_set_new(mj, "allocated_bytes", json_bytes(mem.allocated_bytes));
    json_object_set_new(mj, "tracked_bytes", json_bytes(mem.tracked_bytes));
    json_object_set_new(o, "memory", mj);
    json_object_set_new(o, "figures_error", json_text(r->figures_error));
    json_t *atts = json_array();
    for (size_t i = 0; i < r->nattempts; i++) {
        const struct collector_attempt *a = &r->attempts[i];
        json_t *aj = json_object();
        json_object_set_new(aj, "what", json_string(a->what));
        json_object_set_new(aj, "url", json_text(a->url));
        json_object_set_new(aj, "attempt", json_integer(a->attempt));
        iso_time(a->start_ms, t, sizeof(t), false);
        json_object_set_new(aj, "start", json_string(t));
        json_object_set_new(aj, "ms", json_integer((json_int_t)a->elapsed_ms));
        json_object_set_new(aj, "http", json_integer(a->http_code));
        json_object_set_new(aj, "bytes", json_integer((json_int_t)a->bytes));
        json_object_set_new(aj, "error", json_text(a->error));
        json_array_append_new(atts, aj);
    }
    json_object_set_new(o, "attempts", atts);
    return o;
}

static int dirsink_record(struct collector_sink *s, const struct collector_result *r,
                          struct hp_buf *err)
{
    struct dirsink *ds = hp_container_of(s, struct dirsink, sink);
    int rc = 0;
    char *safe = safe_name(r->node->name);
    char *node_dir = hp_xasprintf("%s/%s", ds->dir, safe);
    char *rel = NULL, *path = NULL, *last = NULL, *line = NULL;
    json_t *o = NULL;
    if (mkdir(node_dir, 0755) < 0 && errno != EEXIST) {
        rc = HP_ERR(errno);
        hp_err_printf(err, "%s: cannot create: %s", node_dir, strerror(errno));
        goto out;
    }
    if (r->dump && r->dump_unchanged) {
        /* Same bytes as last time: point at the file already written. */
        char *last_path = hp_xasprintf("%s/%s/last-dump", ds->dir, safe);
        char *prev = NULL;
        size_t plen = 0;
        if (hp_file_read(last_path, 4096, &prev, &plen, NULL) == 0 && plen > 0) {
            rel = prev;
            prev = NULL;
        }
        free(prev);
        free(last_path);
    }
    if (r->dump && !rel) {
        char t[40];
        iso_time(r->started_ms, t, sizeof(t), true);
        rel = hp_xasprintf("%s/%s.heap", safe, t);
        path = hp_xasprintf("%s/%s", ds->dir, rel);
        rc = write_file(path, r->dump, r->dump_len, err);
        if (rc < 0)
            goto out;
        char *last_path = hp_xasprintf("%s/%s/last-dump", ds->dir, safe);
        rc = write_file(last_path, rel, strlen(rel), err);
        free(last_path);
        if (rc < 0)
            goto out;
    }
    o = result_json(r, rel);
    line = json_dumps(o, JSON_COMPACT);
    if (!line) {
        rc = HP_EPARSE;
        hp_err_printf(err, "cannot encode the snapshot as JSON");
        goto out;
    }
    size_t n = strlen(line);
    line[n] = '\n'; /* one write per line: readers never see half a line */
    rc = write_all(ds->jsonl_fd, line, n + 1);
    line[n] = '\0';
    if (rc < 0) {
        hp_err_printf(err, "%s/snapshots.jsonl: write failed: %s", ds->dir, hp_strerror(rc));
        goto out;
    }
    last = hp_xasprintf("%s/last.json", node_dir);
    rc = write_file(last, line, n, err);
out:
    free(line);
    json_decref(o);
    free(last);
    free(path);
    free(rel);
    free(node_dir);
    free(safe);
    return rc;
}

static void dirsink_close(struct collector_sink *s)
{
    struct dirsink *ds = hp_container_of(s, struct dirsink, sink);
    if (ds->jsonl_fd >= 0)
        close(ds->jsonl_fd);
    free(ds->dir);
    free(ds);
}

int collector_dirsink_new(const char *dir, struct collector_sink **ret, struct hp_buf *err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        hp_err_printf(err, "%s: cannot create: %s", dir, strerror(errno));
        return HP_ERR(errno);
    }
    char *p = hp_xasprintf("%s/snapshots.jsonl", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        hp_err_printf(err, "%s: cannot open: %s", p, strerror(e));
        free(p);
        return HP_ERR(e);
    }
    free(p);
    struct dirsink *ds = hp_xcalloc(1, sizeof(*ds));
    ds->dir = hp_xstrdup(dir);
    ds->jsonl_fd = fd;
    ds->sink.record = dirsink_record;
    ds->sink.close = dirsink_close;
    *ret = &ds->sink;
    return 0;
}
