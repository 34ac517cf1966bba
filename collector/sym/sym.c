/* The symbolizer's public API (sym.h): finds the file for every object of a
 * profile, verifies it, resolves each distinct address once per object
 * identity (memory cache, then the optional persistent cache, then DWARF and
 * the symbol table), writes the frames into the profile and flags the
 * allocator's own frames at the leaf end of each stack as jeprof trims them.
 *
 * Objects (struct sym_obj) outlive a profile: they are keyed by the file's
 * build-id (or path, size and mtime when it has none) and keep their open
 * DWARF reader and every address resolved so far, so the next profile of the
 * same binary costs one hash lookup per address. Where a path resolved to is
 * remembered too, re-validated by stat() on every profile. */
#include "collector/sym/sym-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct cached {
    uint32_t off, n;
    /* CACHED_ALLOC_*: whether a frame names an allocator entry point
     * (trim_allocator), worked out once per address. */
    uint8_t alloc;
};
#define CACHED_ALLOC_ANY 1u   /* some frame does */
#define CACHED_ALLOC_OUTER 2u /* the outermost does (what --no-inline keeps) */

struct sym_obj {
    char *key;
    char build_id[2 * SYM_BUILD_ID_MAX + 1];
    char *used, *debug;
    char *alt;      /* dwz common file attached to dw, or NULL */
    char *alt_note; /* why it is missing, or NULL */
    const char *note; /* e.g. "no debug info: symbol table only" (static string) */
    struct sym_elf *elf;    /* image: PT_LOADs and symbols */
    struct sym_elf *dbgelf; /* separate debug file, for its .symtab */
    struct sym_dw *dw;
    bool dw_tried;
    struct hp_map64 cache; /* vaddr -> index into entries */
    struct cached *entries;
    size_t nentries, entries_cap;
    struct profile_frame *frames;
    size_t nframes, frames_cap;
    struct hp_arena arena;
    struct hp_strtab strings;
    struct hp_map64 is_alloc; /* interned function name -> allocator entry point? */
};

/* Where a (profile path, expected build-id, main?) resolved to last time. */
struct sym_route {
    char *key;
    uint64_t retry_ns; /* failed after asking remote sources: try again after this */
    struct sym_obj *obj; /* NULL: failed */
    char *image;
    struct stat st;
    char *message;
    char *tried; /* every source asked and its answer (sym_object_status.tried) */
    int status;
};

struct symbolizer {
    struct sym_options opt;
    char *binary, *symbols_dir, *dbgd_urls, *cache_dir;
    struct sym_obj **objs;
    size_t nobjs, objs_cap;
    struct sym_route *routes;
    size_t nroutes, routes_cap;
    /* per-call status */
    struct sym_object_status *status;
    size_t nstatus, status_cap;
    struct hp_arena call_arena;
    struct sym_dbgd_backoff backoff;
    /* Remote sources: --debuginfod servers and $DEBUGINFOD_URLS (owned
     * copies), and per call the node's agent in front of them. */
    struct sym_server *servers;
    size_t nservers, servers_cap;
    struct sym_server *call_servers;
    size_t ncall_servers, call_servers_cap;
    const struct sym_node *node; /* during sym_profile_node, when it has an agent */
    const struct sym_node *call_node; /* during sym_profile_node, any */
    /* agent|path -> build-id, asked at most once a minute per path */
    struct ident {
        char *key;
        char build_id[2 * SYM_BUILD_ID_MAX + 1];
        uint64_t until_ns;
        int status;
    } *idents;
    size_t nidents, idents_cap;
};

static char *dup_or_null(const char *s)
{
    return s ? hp_xstrdup(s) : NULL;
}

struct symbolizer *sym_new(const struct sym_options *opt)
{
    struct symbolizer *s = hp_xcalloc(1, sizeof(*s));
    if (opt)
        s->opt = *opt;
    s->binary = dup_or_null(s->opt.binary);
    s->symbols_dir = dup_or_null(s->opt.symbols_dir);
    const char *urls = s->opt.debuginfod_urls;
    if (!urls)
        urls = getenv("DEBUGINFOD_URLS");
    s->dbgd_urls = dup_or_null(urls);
    if (s->opt.cache_dir) {
        s->cache_dir = hp_xstrdup(s->opt.cache_dir);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            s->cache_dir = hp_xasprintf("%s/heapfleet/debuginfod", xdg);
        else if (home && *home)
            s->cache_dir = hp_xasprintf("%s/.cache/heapfleet/debuginfod", home);
    }
    s->opt.binary = s->binary;
    s->opt.symbols_dir = s->symbols_dir;
    s->opt.debuginfod_urls = s->dbgd_urls;
    s->opt.cache_dir = s->cache_dir;
    for (size_t i = 0; i < s->opt.nservers; i++) {
        const struct sym_server *v = &s->opt.servers[i];
        if (!v->url || !*v->url)
            continue;
        s->servers = hp_xgrow(s->servers, &s->servers_cap, s->nservers + 1, sizeof(*s->servers));
        s->servers[s->nservers++] = (struct sym_server){
            hp_xstrdup(v->url), dup_or_null(v->bearer), dup_or_null(v->header_file),
            dup_or_null(v->ca_file), NULL, NULL
        };
    }
    sym_dbgd_servers_parse(s->dbgd_urls, &s->servers, &s->nservers, &s->servers_cap);
    s->opt.servers = NULL;
    s->opt.nservers = 0;
    if (s->opt.threads <= 0)
        s->opt.threads = 2;
    hp_arena_init(&s->call_arena);
    return s;
}

static void obj_free(struct sym_obj *o)
{
    if (!o)
        return;
    sym_elf_free(o->elf);
    sym_elf_free(o->dbgelf);
    sym_dw_free(o->dw);
    hp_map64_release(&o->cache);
    hp_map64_release(&o->is_alloc);
    free(o->entries);
    free(o->frames);
    hp_strtab_release(&o->strings);
    hp_arena_release(&o->arena);
    free(o->key);
    free(o->used);
    free(o->debug);
    free(o->alt);
    free(o->alt_note);
    free(o);
}

void sym_free(struct symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nobjs; i++)
        obj_free(s->objs[i]);
    free(s->objs);
    for (size_t i = 0; i < s->nroutes; i++) {
        free(s->routes[i].key);
        free(s->routes[i].image);
        free(s->routes[i].message);
        free(s->routes[i].tried);
    }
    free(s->routes);
    for (size_t i = 0; i < s->nservers; i++) {
        free((char *)s->servers[i].url);
        free((char *)s->servers[i].bearer);
        free((char *)s->servers[i].header_file);
        free((char *)s->servers[i].ca_file);
    }
    free(s->servers);
    free(s->call_servers);
    for (size_t i = 0; i < s->nidents; i++)
        free(s->idents[i].key);
    free(s->idents);
    free(s->status);
    hp_arena_release(&s->call_arena);
    free(s->binary);
    free(s->symbols_dir);
    free(s->dbgd_urls);
    free(s->cache_dir);
    free(s);
}

static const char *arena_printf(struct hp_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *arena_printf(struct hp_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct hp_buf b = HP_BUF_INIT(0);
    hp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    const char *r = hp_arena_strdup(a, b.data ? b.data : "");
    hp_buf_release(&b);
    return r;
}

/* ---- finding files --------------------------------------------------------- */

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *base_name(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static char *dir_name(const char *p)
{
    const char *b = strrchr(p, '/');
    if (!b)
        return hp_xstrdup(".");
    if (b == p)
        return hp_xstrdup("/");
    return hp_xstrndup(p, (size_t)(b - p));
}

static char *build_id_path(const char *root, const char *bid)
{
    return hp_xasprintf("%s/.build-id/%.2s/%s.debug", root, bid, bid + 2);
}

/* The remote sources of this call: the node's agent first, then the
 * configured debuginfod servers. */
static void call_servers_set(struct symbolizer *s, const struct sym_node *node)
{
    s->node = node && node->agent.url && *node->agent.url ? node : NULL;
    s->call_node = node;
    s->ncall_servers = 0;
    size_t need = s->nservers + 1;
    s->call_servers = hp_xgrow(s->call_servers, &s->call_servers_cap, need,
                               sizeof(*s->call_servers));
    if (s->node)
        s->call_servers[s->ncall_servers++] = s->node->agent;
    for (size_t i = 0; i < s->nservers; i++)
        s->call_servers[s->ncall_servers++] = s->servers[i];
}

static struct sym_dbgd_options dbgd_opts(struct symbolizer *s)
{
    return (struct sym_dbgd_options){
        .backoff = &s->backoff,
        .servers = s->call_servers,
        .nservers = s->ncall_servers,
        .cache_dir = s->opt.cache_dir,
        .timeout_ms = s->opt.debuginfod_timeout_ms,
        .max_bytes = s->opt.debuginfod_max_bytes,
        .cache_max_bytes = s->opt.debuginfod_cache_max_bytes,
    };
}

static struct sym_obj *obj_lookup(struct symbolizer *s, const char *key)
{
    for (size_t i = 0; i < s->nobjs; i++)
        if (strcmp(s->objs[i]->key, key) == 0)
            return s->objs[i];
    return NULL;
}

/* dwz moved shared DIEs and strings of this debug file into a common file:
 * find it and hand it to the DWARF reader. Without it the names dwz moved
 * are lost (the rest still resolves), and the object's note says why. */
static void attach_alt(struct symbolizer *s, struct sym_obj *o, const char *file,
                       const struct sym_elf_identity *id)
{
    if (!id->altlink[0])
        return;
    struct sym_dbgd_options d = dbgd_opts(s);
    struct sym_alt_where w = {
        .debug_file = file,
        .altlink = id->altlink,
        .build_id = id->altlink_build_id,
        .symbols_dir = s->opt.symbols_dir,
        .system_debug = !s->opt.no_system_debug,
        .dbgd = &d,
    };
    struct hp_buf why = HP_BUF_INIT(0);
    char *alt = NULL;
    if (sym_alt_find(&w, &alt, &why) == 0 && sym_dw_set_alt(o->dw, alt, &why) == 0)
        o->alt = alt;
    else {
        free(alt);
        o->alt_note = hp_xasprintf("dwz common file %s (build-id %s) not found%s%s: names dwz "
                                   "moved there are missing",
                                   id->altlink, id->altlink_build_id, why.len ? ": " : "",
                                   why.len ? why.data : "");
    }
    hp_buf_release(&why);
}

/* Try a debug file candidate for image `img`; on success set o->dw etc. */
static bool try_debug(struct symbolizer *s, struct sym_obj *o, const char *cand,
                      struct hp_buf *why)
{
    if (!file_exists(cand))
        return false;
    struct sym_elf *de = NULL;
    struct hp_buf tmp = HP_BUF_INIT(0);
    if (sym_elf_open_lazy(cand, &de, &tmp) < 0) {
        hp_err_printf(why, "%s%s: unusable (%s)", why->len ? "; " : "", cand,
                      tmp.len ? tmp.data : "?");
        hp_buf_release(&tmp);
        return false;
    }
    hp_buf_release(&tmp);
    if (o->build_id[0] && strcmp(de->id.build_id, o->build_id) != 0) {
        hp_err_printf(why, "%s%s: build-id mismatch (file %s, expected %s)", why->len ? "; " : "",
                      cand, de->id.build_id[0] ? de->id.build_id : "none", o->build_id);
        sym_elf_free(de);
        return false;
    }
    if (!de->id.has_debug_info) {
        sym_elf_free(de);
        return false;
    }
    struct sym_dw *dw = NULL;
    if (sym_dw_open(cand, &dw, why) < 0) {
        sym_elf_free(de);
        return false;
    }
    o->dbgelf = de;
    o->dw = dw;
    o->debug = hp_xstrdup(cand);
    attach_alt(s, o, cand, &de->id);
    return true;
}

/* Find DWARF for an object whose image has none (or whose image is the
 * debug file itself). */
static void obj_find_debug(struct symbolizer *s, struct sym_obj *o, const char *maps_path,
                           struct hp_buf *why)
{
    o->dw_tried = true;
    if (o->elf->id.has_debug_info) {
        if (sym_dw_open(o->used, &o->dw, why) == 0) {
            attach_alt(s, o, o->used, &o->elf->id);
            return;
        }
    }
    char *cand = NULL;
    const char *link = o->elf->id.debuglink;
    const char *dirs_of[2] = { o->used, maps_path };
    for (int k = 0; k < 2 && link[0]; k++) {
        if (!dirs_of[k])
            continue;
        char *dir = dir_name(dirs_of[k]);
        char *c[3] = {
            hp_xasprintf("%s/%s", dir, link),
            hp_xasprintf("%s/.debug/%s", dir, link),
            s->opt.no_system_debug ? NULL : hp_xasprintf("/usr/lib/debug%s/%s", dir, link),
        };
        bool ok = false;
        for (int i = 0; i < 3 && !ok; i++)
            if (c[i] && strcmp(c[i], o->used) != 0)
                ok = try_debug(s, o, c[i], why);
        for (int i = 0; i < 3; i++)
            free(c[i]);
        free(dir);
        if (ok)
            return;
    }
    if (o->build_id[0]) {
        if (s->opt.symbols_dir) {
            cand = build_id_path(s->opt.symbols_dir, o->build_id);
            bool ok = strcmp(cand, o->used) != 0 && try_debug(s, o, cand, why);
            free(cand);
            if (ok)
                return;
        }
        if (!s->opt.no_system_debug) {
            cand = build_id_path("/usr/lib/debug", o->build_id);
            bool ok = try_debug(s, o, cand, why);
            free(cand);
            if (ok)
                return;
        }
        struct sym_dbgd_options d = dbgd_opts(s);
        char *got = NULL;
        int r = sym_debuginfod_fetch(&d, o->build_id, "debuginfo", &got, why);
        if (r == 0) {
            bool ok = try_debug(s, o, got, why);
            free(got);
            if (ok)
                return;
        }
    }
    o->note = sym_elf_nsyms(o->elf) ? "no debug info found: function names from the symbol table only"
                            : "no debug info and no symbols";
}

static struct sym_obj *obj_for_image(struct symbolizer *s, struct sym_elf *e,
                                     const char *maps_path, struct hp_buf *why)
{
    char *key;
    struct stat st;
    if (e->id.build_id[0]) {
        key = hp_xasprintf("b:%s", e->id.build_id);
    } else {
        if (stat(e->path, &st) != 0)
            memset(&st, 0, sizeof(st));
        key = hp_xasprintf("p:%s:%llu:%lld", e->path, (unsigned long long)e->id.size,
                           (long long)st.st_mtime);
    }
    struct sym_obj *o = obj_lookup(s, key);
    if (o) {
        free(key);
        sym_elf_free(e);
        return o;
    }
    o = hp_xcalloc(1, sizeof(*o));
    o->key = key;
    memcpy(o->build_id, e->id.build_id, sizeof(o->build_id));
    o->elf = e;
    o->used = hp_xstrdup(e->path);
    hp_map64_init(&o->cache);
    hp_map64_init(&o->is_alloc);
    hp_arena_init(&o->arena);
    hp_strtab_init(&o->strings, &o->arena);
    obj_find_debug(s, o, maps_path, why);
    s->objs = hp_xgrow(s->objs, &s->objs_cap, s->nobjs + 1, sizeof(*s->objs));
    s->objs[s->nobjs++] = o;
    return o;
}

struct want {
    const char *path;     /* profile's path, " (deleted)" removed */
    const char *build_id; /* expected, or NULL */
    bool main;
    bool deleted;         /* the node had replaced the file after mapping it */
    bool exec;            /* check this mapping against PT_LOAD */
    uint64_t offset, len;
};

/* Try one image candidate. 1 accepted (*ret set), 0 not present, -1 rejected
 * (reason appended to why). */
static int try_image(const struct want *w, const char *cand, const char *source,
                     struct sym_elf **ret, struct hp_buf *why)
{
    if (!file_exists(cand))
        return 0;
    struct sym_elf *e = NULL;
    struct hp_buf tmp = HP_BUF_INIT(0);
    int r = sym_elf_open_lazy(cand, &e, &tmp);
    if (r < 0) {
        hp_err_printf(why, "%s%s (%s): %s", why->len ? "; " : "", cand, source,
                      tmp.len ? tmp.data : hp_strerror(r));
        hp_buf_release(&tmp);
        return -1;
    }
    if (w->build_id && *w->build_id && strcmp(e->id.build_id, w->build_id) != 0) {
        hp_err_printf(why, "%s%s (%s): build-id mismatch (file %s, expected %s)",
                      why->len ? "; " : "", cand, source,
                      e->id.build_id[0] ? e->id.build_id : "none", w->build_id);
        sym_elf_free(e);
        return -1;
    }
    if (w->exec && sym_elf_check_mapping(e, w->offset, w->len, &tmp) < 0) {
        hp_err_printf(why, "%s%s (%s): does not match the profile's mapping: %s",
                      why->len ? "; " : "", cand, source, tmp.data);
        hp_buf_release(&tmp);
        sym_elf_free(e);
        return -1;
    }
    hp_buf_release(&tmp);
    *ret = e;
    return 1;
}

/* One source's answer into the route's list: "SOURCE: SAID", " | " between
 * answers; neither part may hold the separators (sym.h's grammar). */
static void tried_add(struct hp_buf *tried, const char *source, const char *said)
{
    hp_buf_puts(tried, tried->len ? " | " : "");
    for (const char *p = source; *p; p++) {
        char c = *p == '|' || *p == '\n' ? '/' : *p == ':' && p[1] == ' ' ? '.' : *p;
        (void)hp_buf_append(tried, &c, 1);
    }
    hp_buf_puts(tried, ": ");
    for (const char *p = said; *p; p++) {
        char c = *p == '|' || *p == '\n' ? '/' : *p;
        (void)hp_buf_append(tried, &c, 1);
    }
}

/* try_image, with the answer noted in `tried`. */
static int try_source(const struct want *w, const char *cand, const char *source,
                      struct sym_elf **ret, struct hp_buf *why, struct hp_buf *tried)
{
    size_t before = why->len;
    int got = try_image(w, cand, source, ret, why);
    char *label = hp_xasprintf("%s %s", source, cand);
    if (got == 0) {
        tried_add(tried, label, "no such file");
    } else if (got < 0) {
        /* The reason try_image added: after "CAND (SOURCE): ". */
        const char *add = why->data + before + (before ? 2 : 0);
        const char *r = strstr(add, "): ");
        tried_add(tried, label, r ? r + 3 : add);
    } else {
        tried_add(tried, label, "ok");
    }
    free(label);
    return got;
}

/* A path means a different file on each node with an agent. */
static char *route_key(const struct symbolizer *s, const struct want *w)
{
    return hp_xasprintf("%d|%s|%s|%llx|%s", w->main, w->path, w->build_id ? w->build_id : "",
                        (unsigned long long)w->offset, s->node ? s->node->agent.url : "");
}

/* Forget a failed route's outcome so the next lookup asks its sources
 * again (a route that found an image keeps it). */
static void route_forget(struct sym_route *rt)
{
    free(rt->message);
    rt->message = NULL;
    free(rt->tried);
    rt->tried = NULL;
    rt->status = 0;
    rt->retry_ns = 0;
}

static struct sym_route *route_get(struct symbolizer *s, const struct want *w)
{
    char *key = route_key(s, w);
    for (size_t i = 0; i < s->nroutes; i++) {
        struct sym_route *rt = &s->routes[i];
        if (strcmp(rt->key, key) != 0)
            continue;
        free(key);
        if (!rt->image && (!rt->retry_ns || hp_now_ns() < rt->retry_ns))
            return rt; /* local failures: until sym_forget_failures */
        if (!rt->image) {
            /* A remote source may answer now (an agent back, a server up). */
            route_forget(rt);
            return NULL;
        }
        struct stat st;
        if (stat(rt->image, &st) == 0 && st.st_size == rt->st.st_size &&
            st.st_mtime == rt->st.st_mtime && st.st_ino == rt->st.st_ino)
            return rt;
        /* The file changed under us: resolve again. */
        free(rt->image);
        rt->image = NULL;
        free(rt->message);
        rt->message = NULL;
        free(rt->tried);
        rt->tried = NULL;
        rt->obj = NULL;
        return NULL;
    }
    s->routes = hp_xgrow(s->routes, &s->routes_cap, s->nroutes + 1, sizeof(*s->routes));
    struct sym_route *rt = &s->routes[s->nroutes++];
    memset(rt, 0, sizeof(*rt));
    rt->key = key;
    return NULL;
}

static struct sym_route *route_find(struct symbolizer *s, const struct want *w)
{
    char *key = route_key(s, w);
    struct sym_route *found = NULL;
    for (size_t i = 0; i < s->nroutes && !found; i++)
        if (strcmp(s->routes[i].key, key) == 0)
            found = &s->routes[i];
    free(key);
    return found;
}

/* Resolve an object. Returns the route (obj NULL on failure, with message). */
static struct sym_route *resolve_object(struct symbolizer *s, const struct want *w)
{
    struct sym_route *rt = route_get(s, w);
    if (rt && (rt->obj || rt->message))
        return rt;
    rt = route_find(s, w);
    struct hp_buf why = HP_BUF_INIT(0), answers = HP_BUF_INIT(0);
    struct sym_elf *e = NULL;
    int got = 0;
    if (w->main && s->opt.binary)
        got = try_source(w, s->opt.binary, "--binary", &e, &why, &answers);
    if (got <= 0 && s->opt.symbols_dir) {
        char *c = hp_xasprintf("%s/%s", s->opt.symbols_dir, base_name(w->path));
        got = try_source(w, c, "--symbols", &e, &why, &answers);
        free(c);
        if (got <= 0 && w->build_id && *w->build_id) {
            c = build_id_path(s->opt.symbols_dir, w->build_id);
            got = try_source(w, c, "--symbols build-id", &e, &why, &answers);
            free(c);
        }
    }
    if (got <= 0 && !s->opt.no_local_paths)
        got = try_source(w, w->path, "maps path", &e, &why, &answers);
    /* Remote sources, each asked for the debug file (a whole image's worth
     * of headers and symbols, and the DWARF), then the executable. */
    struct hp_buf tried = HP_BUF_INIT(0);
    bool remote = false;
    if (got <= 0 && s->ncall_servers && (!w->build_id || !*w->build_id))
        tried_add(&answers, s->node ? "agent" : "debuginfod",
                  "not asked: no build-id known for this file");
    if (got <= 0 && w->build_id && *w->build_id) {
        for (size_t i = 0; i < s->ncall_servers && got <= 0; i++) {
            const struct sym_server *sv = &s->call_servers[i];
            bool agent = s->node && i == 0;
            char *label = hp_xasprintf("%s %s", agent ? "agent" : "debuginfod", sv->url);
            struct sym_dbgd_options d = dbgd_opts(s);
            d.servers = sv;
            d.nservers = 1;
            remote = true;
            static const char *const kinds[] = { "debuginfo", "executable" };
            struct hp_buf said = HP_BUF_INIT(0);
            for (int k = 0; k < 2 && got <= 0; k++) {
                char *p = NULL;
                struct hp_buf fw = HP_BUF_INIT(0);
                int fr = sym_debuginfod_fetch(&d, w->build_id, kinds[k], &p, &fw);
                if (fr == 0) {
                    size_t before = why.len;
                    got = try_image(w, p, label, &e, &why);
                    free(p);
                    const char *r = got < 0 ? strstr(why.data + before, "): ") : NULL;
                    hp_buf_printf(&said, "%s%s %s", said.len ? ", " : "", kinds[k],
                                  got > 0 ? "ok" : r ? r + 3 : "unusable");
                } else {
                    const char *what = fr == HP_ENOTFOUND ? "not found"
                                                          : (fw.len ? fw.data : hp_strerror(fr));
                    hp_err_printf(&tried, "%s%s: %s %s", tried.len ? "; " : "", label, kinds[k],
                                  what);
                    hp_buf_printf(&said, "%s%s %s", said.len ? ", " : "", kinds[k], what);
                }
                hp_buf_release(&fw);
            }
            tried_add(&answers, label, said.len ? said.data : "?");
            hp_buf_release(&said);
            free(label);
        }
    }
    rt->tried = answers.len ? hp_xstrdup(answers.data) : NULL;
    hp_buf_release(&answers);
    if (got <= 0) {
        rt->status = why.len ? HP_EMISMATCH : HP_ENOTFOUND;
        if (remote)
            rt->retry_ns = hp_now_ns() + UINT64_C(60) * 1000000000;
        if (why.len)
            rt->message = hp_xasprintf("unusable: %s%s%s", why.data, tried.len ? "; asked " : "",
                                       tried.len ? tried.data : "");
        else if (tried.len)
            rt->message = hp_xasprintf("no file found here; asked %s", tried.data);
        else
            rt->message = hp_xstrdup(s->node ? "no file found (the node's agent knows no build-id "
                                               "for this path; try --binary or --symbols DIR)"
                                             : "no file found (try --binary or --symbols DIR)");
        hp_buf_release(&tried);
        hp_buf_release(&why);
        return rt;
    }
    hp_buf_release(&tried);
    rt->image = hp_xstrdup(e->path);
    if (stat(rt->image, &rt->st) != 0)
        memset(&rt->st, 0, sizeof(rt->st));
    /* Candidates rejected before this one (a wrong --binary, say) are told,
     * not dropped: the user asked for them. */
    char *rejected = why.len ? hp_xstrdup(why.data) : NULL;
    hp_buf_reset(&why);
    rt->obj = obj_for_image(s, e, w->path, &why);
    struct sym_obj *o = rt->obj;
    if (w->deleted && !w->build_id && strcmp(o->used, w->path) == 0)
        rt->message = hp_xasprintf("the node had replaced this file after mapping it; using %s "
                                   "as found here (segments checked, no build-id to compare)%s%s",
                                   o->used, o->note ? "; " : "", o->note ? o->note : "");
    else if (o->note)
        rt->message = hp_xasprintf("%s%s%s", o->note, why.len ? ": " : "", why.len ? why.data : "");
    else if (!w->build_id && !o->build_id[0])
        rt->message = hp_xstrdup("ok (unverified: neither the dump nor the file has a build-id)");
    else if (!w->build_id)
        rt->message = hp_xstrdup("ok (the dump records no build-id; checked segments only)");
    else
        rt->message = hp_xstrdup("ok (build-id verified)");
    if (o->alt_note) {
        char *m = hp_xasprintf("%s; %s", rt->message, o->alt_note);
        free(rt->message);
        rt->message = m;
    }
    if (rejected) {
        char *m = hp_xasprintf("%s; used %s; not used: %s", rt->message, o->used, rejected);
        free(rt->message);
        rt->message = m;
        free(rejected);
    }
    hp_buf_release(&why);
    return rt;
}

/* ---- resolving addresses -------------------------------------------------- */

/* jeprof's test for taking nm's name over addr2line's: the symbol's full
 * demangled name starts with the short form of the DWARF name. It holds for
 * C clones ("f.constprop.0") and plain C++ functions ("ns::f(int) [clone
 * .isra.0]"), not for members of templates, exactly as jeprof shows them. */
static bool starts_with_short(const char *sym, const char *dw)
{
    char b[512];
    sym_function_short(dw, b, sizeof(b));
    return b[0] && strncmp(sym, b, strlen(b)) == 0;
}

static const char *intern(struct sym_obj *o, const char *str)
{
    return str ? hp_strtab_intern(&o->strings, str, strlen(str)) : NULL;
}

static const char *display(struct sym_obj *o, const char *raw)
{
    char *owned = NULL;
    const char *d = sym_display_name(raw, &owned);
    const char *r = intern(o, d);
    free(owned);
    return r;
}

/* Is an interned function name (jeprof's test, on its short form) an
 * allocator entry point? Once per name per object. */
static bool name_is_alloc(struct sym_obj *o, const char *fn)
{
    if (!fn)
        return false;
    uint32_t v;
    if (!hp_map64_get(&o->is_alloc, (uint64_t)(uintptr_t)fn, &v)) {
        char buf[512];
        v = sym_is_allocator_function(sym_function_short(fn, buf, sizeof(buf)));
        (void)hp_map64_put(&o->is_alloc, (uint64_t)(uintptr_t)fn, v, &v);
    }
    return v != 0;
}

/* Strings of a cache whose load_cb pointers are stable (sym_cache_ops
 * stable_strings), interned once each: pointer -> index in vals, with the
 * name's allocator test alongside. */
struct intern_memo {
    struct hp_map64 idx;
    const char **vals;
    uint8_t *alloc; /* 0 not worked out (seen as a file name only), 1 no, 2 yes */
    size_t n, cap, alloc_cap;
};

static const char *intern_memo(struct sym_obj *o, struct intern_memo *m, const char *str,
                               bool function, bool *ret_alloc)
{
    if (!m || !str) {
        const char *r = intern(o, str);
        if (function)
            *ret_alloc = name_is_alloc(o, r);
        return r;
    }
    uint32_t i;
    if (!hp_map64_get(&m->idx, (uint64_t)(uintptr_t)str, &i)) {
        m->vals = hp_xgrow(m->vals, &m->cap, m->n + 1, sizeof(*m->vals));
        m->alloc = hp_xgrow(m->alloc, &m->alloc_cap, m->n + 1, sizeof(*m->alloc));
        m->vals[m->n] = intern(o, str);
        m->alloc[m->n] = 0;
        (void)hp_map64_put(&m->idx, (uint64_t)(uintptr_t)str, (uint32_t)m->n, &i);
        i = (uint32_t)m->n++;
    }
    if (function) {
        if (!m->alloc[i])
            m->alloc[i] = name_is_alloc(o, m->vals[i]) ? 2 : 1;
        *ret_alloc = m->alloc[i] == 2;
    }
    return m->vals[i];
}

static void cache_put_memo(struct sym_obj *o, uint64_t vaddr, const struct profile_frame *f,
                           uint32_t n, struct intern_memo *m)
{
    o->frames = hp_xgrow(o->frames, &o->frames_cap, o->nframes + n, sizeof(*o->frames));
    struct cached c = { (uint32_t)o->nframes, n, 0 };
    for (uint32_t i = 0; i < n; i++) {
        bool a = false;
        o->frames[o->nframes + i] = (struct profile_frame){ intern_memo(o, m, f[i].function,
                                                                        true, &a),
                                                            intern_memo(o, m, f[i].file,
                                                                        false, NULL),
                                                            f[i].line };
        if (a)
            c.alloc |= CACHED_ALLOC_ANY | (i == n - 1 ? CACHED_ALLOC_OUTER : 0);
    }
    o->nframes += n;
    o->entries = hp_xgrow(o->entries, &o->entries_cap, o->nentries + 1, sizeof(*o->entries));
    o->entries[o->nentries] = c;
    uint32_t idx;
    (void)hp_map64_put(&o->cache, vaddr, (uint32_t)o->nentries, &idx);
    o->nentries++;
}

static void cache_put(struct sym_obj *o, uint64_t vaddr, const struct profile_frame *f, uint32_t n)
{
    cache_put_memo(o, vaddr, f, n, NULL);
}

/* Resolve one vaddr without caches: DWARF frames, named by the symbol table
 * where DWARF has no name, the outermost renamed to the symbol when the
 * symbol extends the DWARF name (".constprop.0" clones, as jeprof shows). */
static uint32_t resolve_vaddr(struct sym_obj *o, uint64_t vaddr, struct profile_frame *out)
{
    struct sym_dw_frame raw[SYM_MAX_INLINE_DEPTH];
    int n = o->dw ? sym_dw_lookup(o->dw, vaddr, raw, SYM_MAX_INLINE_DEPTH) : 0;
    const struct sym_symbol *sy = NULL;
    bool exact = false;
    if (o->dbgelf && sym_elf_nsyms(o->dbgelf))
        sy = sym_elf_symbol_at(o->dbgelf, vaddr, &exact);
    if (!sy)
        sy = sym_elf_symbol_at(o->elf, vaddr, &exact);
    const char *symname = sy ? display(o, sy->name) : NULL;
    for (int i = 0; i < n; i++)
        out[i] = (struct profile_frame){ display(o, raw[i].name), raw[i].file, raw[i].line };
    if (n == 0) {
        if (!symname)
            return 0;
        out[0] = (struct profile_frame){ symname, NULL, 0 };
        return 1;
    }
    /* The physical frame: the linkage name, demangled; else the symbol that
     * covers the address and starts at the function's entry (GCC gives
     * lambdas, members of templates over local types and functions in
     * anonymous namespaces no linkage name, but their symbols carry the
     * whole name: std::thread::_State_impl<...>::_M_run(), as
     * llvm-symbolizer, jeprof and addr2line -C print it); else DW_AT_name
     * qualified by its enclosing scopes, as gdb prints it. */
    struct profile_frame *outer = &out[n - 1];
    const struct sym_dw_frame *rw = &raw[n - 1];
    bool sym_here = sy && exact && symname;
    if (!outer->function) {
        outer->function = symname;
    } else if (!rw->linkage) {
        if (sym_here && sy->addr == rw->entry)
            outer->function = symname;
        else if (rw->qualified)
            outer->function = display(o, rw->qualified);
    } else if (symname && symname != outer->function &&
               starts_with_short(symname, outer->function)) {
        outer->function = symname;
    }
    return (uint32_t)n;
}

struct loc_job {
    uint32_t loc;
    uint64_t vaddr;
};

static int job_cmp(const void *a, const void *b)
{
    const struct loc_job *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* Resolve vaddrs of one object into its cache (misses only). */
static void obj_fill(struct symbolizer *s, struct sym_obj *o, const uint64_t *vaddrs, size_t n,
                     size_t *ret_hits)
{
    uint64_t *miss = hp_xmalloc((n ? n : 1) * sizeof(*miss));
    size_t nmiss = 0, hits = 0;
    const struct sym_cache_ops *ops = s->opt.cache_ops;
    struct intern_memo memo = { 0 };
    hp_map64_init(&memo.idx);
    hp_map64_reserve(&o->cache, o->nentries + n);
    for (size_t i = 0; i < n; i++) {
        uint32_t idx;
        if (hp_map64_get(&o->cache, vaddrs[i], &idx)) {
            hits++;
            continue;
        }
        if (ops && ops->load_cb && o->build_id[0]) {
            const struct profile_frame *f = NULL;
            uint32_t fn = 0;
            if (ops->load_cb(ops->ctx, o->build_id, vaddrs[i], &f, &fn) == 1) {
                cache_put_memo(o, vaddrs[i], f, fn, ops->stable_strings ? &memo : NULL);
                hits++;
                continue;
            }
        }
        miss[nmiss++] = vaddrs[i];
    }
    hp_map64_release(&memo.idx);
    free(memo.vals);
    free(memo.alloc);
    if (nmiss && o->dw)
        sym_dw_prepare(o->dw, miss, nmiss, s->opt.threads);
    /* Only answers made with the object's whole debug info outlive the
     * process: a run that found no DWARF (or not dwz's common file) must not
     * leave its poorer names for a later run that has them. */
    bool persist = ops && ops->save_cb && o->build_id[0] && o->dw && !o->alt_note;
    bool saved = false;
    struct profile_frame fr[SYM_MAX_INLINE_DEPTH];
    for (size_t i = 0; i < nmiss; i++) {
        uint32_t idx;
        if (hp_map64_get(&o->cache, miss[i], &idx))
            continue; /* duplicate in the input */
        uint32_t fn = resolve_vaddr(o, miss[i], fr);
        cache_put(o, miss[i], fr, fn);
        if (persist) {
            (void)ops->save_cb(ops->ctx, o->build_id, miss[i], fr, fn);
            saved = true;
        }
    }
    if (saved && ops->flush_cb)
        ops->flush_cb(ops->ctx);
    free(miss);
    if (ret_hits)
        *ret_hits = hits;
}

static const struct cached *obj_get(const struct sym_obj *o, uint64_t vaddr)
{
    uint32_t idx;
    if (!hp_map64_get(&o->cache, vaddr, &idx))
        return NULL;
    return &o->entries[idx];
}

/* ---- profiles -------------------------------------------------------------- */

static bool mapping_is_anon(const struct profile_mapping *m)
{
    return (m->flags & (PROFILE_MAP_ANON | PROFILE_MAP_SPECIAL)) || !m->path[0] ||
           m->path[0] == '[';
}

static const char *strip_deleted(struct hp_arena *a, const char *path)
{
    static const char suffix[] = " (deleted)";
    size_t n = strlen(path), k = sizeof(suffix) - 1;
    if (n > k && strcmp(path + n - k, suffix) == 0)
        return hp_arena_strndup(a, path, n - k);
    return path;
}

/* The main executable: the mapping whose file has --binary's basename, else
 * the lowest file-backed one (maps list the executable first). */
static const char *main_path(const struct symbolizer *s, const struct profile *p)
{
    const char *first = NULL;
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if (mapping_is_anon(m))
            continue;
        if (!first)
            first = m->path;
        if (s->opt.binary && strcmp(base_name(m->path), base_name(s->opt.binary)) == 0)
            return m->path;
    }
    return first;
}

/* The first executable mapping of the same file, for the PT_LOAD check. */
static const struct profile_mapping *exec_mapping_of(const struct profile *p, const char *path)
{
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if ((m->flags & PROFILE_MAP_EXEC) && strcmp(m->path, path) == 0)
            return m;
    }
    return NULL;
}

struct group {
    const char *path; /* profile's path */
    struct loc_job *jobs;
    size_t njobs, cap;
    const struct profile_mapping *m;
};

static struct sym_object_status *status_add(struct symbolizer *s)
{
    s->status = hp_xgrow(s->status, &s->status_cap, s->nstatus + 1, sizeof(*s->status));
    struct sym_object_status *st = &s->status[s->nstatus++];
    memset(st, 0, sizeof(*st));
    return st;
}

/* Is this object the allocator itself (a shared jemalloc or tcmalloc)?
 * Stripped allocator libraries name their internal code after the nearest
 * exported symbol, so names alone do not find every frame. */
static bool allocator_object(const struct profile *p, const struct profile_location *l)
{
    if (!l->mapping || l->mapping > p->nmappings)
        return false;
    const char *b = base_name(p->mappings[l->mapping - 1].path);
    return strncmp(b, "libjemalloc", 11) == 0 || strncmp(b, "libtcmalloc", 11) == 0;
}

/* jeprof's RemoveUninterestingFrames: everything up to the last location
 * that is an allocator entry point goes. A location counts when any of its
 * frames is one (jeprof names an address by addr2line's outermost frame when
 * it inlines, by the innermost when it does not), or when it lies in the
 * leading run of frames inside the allocator library. */
static void trim_allocator(struct profile *p, struct sym_stats *st, uint8_t *is_alloc)
{
    char buf[512];
    /* Whether a location is an allocator entry point, worked out once per
     * location (0 unknown, 1 no, 2 yes) and once per distinct function
     * string (frames are interned, so the pointer identifies the name):
     * stacks share most of their locations. Locations resolved through an
     * object's cache come with the answer (struct cached's alloc, worked
     * out when the address was cached): reading each one's frames again
     * here, scattered over the profile, cost a tenth of a warm `query top`
     * in cache misses. */
    struct hp_map64 byname;
    hp_map64_init(&byname);
    for (size_t si = 0; si < p->nstacks; si++) {
        const uint32_t *locs = profile_stack_locs(p, (uint32_t)si);
        uint32_t n = p->stacks[si].n;
        int64_t cut = -1;
        bool leading = true;
        for (uint32_t i = 0; i < n; i++) {
            const struct profile_location *l = &p->locs[locs[i]];
            if (leading && allocator_object(p, l)) {
                cut = i;
                continue;
            }
            leading = false;
            if (!is_alloc[locs[i]]) {
                is_alloc[locs[i]] = 1;
                for (uint32_t k = 0; k < l->nframes; k++) {
                    const char *f = p->frames[l->frame_off + k].function;
                    if (!f)
                        continue;
                    uint32_t v;
                    if (!hp_map64_get(&byname, (uint64_t)(uintptr_t)f, &v)) {
                        v = sym_is_allocator_function(sym_function_short(f, buf, sizeof(buf)));
                        (void)hp_map64_put(&byname, (uint64_t)(uintptr_t)f, v, &v);
                    }
                    if (v) {
                        is_alloc[locs[i]] = 2;
                        break;
                    }
                }
            }
            if (is_alloc[locs[i]] == 2)
                cut = i;
        }
        for (int64_t i = 0; i <= cut; i++) {
            struct profile_location *l = &p->locs[locs[i]];
            if (!(l->flags & PROFILE_LOC_ALLOCATOR)) {
                l->flags |= PROFILE_LOC_ALLOCATOR;
                st->allocator++;
            }
        }
    }
    hp_map64_release(&byname);
}

/* Which build the node has at `path`, through its agent (cached a minute:
 * a node upgraded in place gets a new build-id, and a new route). 1 found,
 * 0 not. */
static int agent_build_id(struct symbolizer *s, const char *path, char *ret_id)
{
    if (!s->node || path[0] != '/')
        return 0;
    char *key = hp_xasprintf("%s|%s", s->node->agent.url, path);
    uint64_t now = hp_now_ns();
    struct ident *id = NULL;
    for (size_t i = 0; i < s->nidents && !id; i++)
        if (strcmp(s->idents[i].key, key) == 0)
            id = &s->idents[i];
    if (id) {
        free(key);
    } else {
        s->idents = hp_xgrow(s->idents, &s->idents_cap, s->nidents + 1, sizeof(*s->idents));
        id = &s->idents[s->nidents++];
        memset(id, 0, sizeof(*id));
        id->key = key;
    }
    if (now >= id->until_ns) {
        struct hp_buf e = HP_BUF_INIT(0);
        id->status = sym_agent_identity(&s->node->agent, path, s->opt.debuginfod_timeout_ms,
                                        id->build_id, &e);
        if (id->status == HP_EHTTP || id->status == HP_EPARSE)
            hp_log_debug("sym", "node=%s path=%s msg=\"agent identity: %s\"",
                         s->node->name ? s->node->name : "?", path, e.len ? e.data : "");
        hp_buf_release(&e);
        id->until_ns = now + UINT64_C(60) * 1000000000;
    }
    if (id->status != 0 || !id->build_id[0])
        return 0;
    memcpy(ret_id, id->build_id, sizeof(id->build_id));
    return 1;
}

struct svc_ctx {
    struct profile *p;
    struct hp_map64 by_addr; /* address -> location */
    size_t named;
};

static void svc_cb(void *ctx, uint64_t addr, const char *name, size_t len)
{
    struct svc_ctx *c = ctx;
    uint32_t loc;
    if (!hp_map64_get(&c->by_addr, addr, &loc))
        return;
    struct profile_location *l = &c->p->locs[loc];
    if (l->flags & PROFILE_LOC_NAMED)
        return;
    char *raw = hp_xstrndup(name, len);
    char *owned = NULL;
    const char *disp = sym_display_name(raw, &owned);
    struct profile_frame f = { .function = profile_intern(c->p, disp, strlen(disp)) };
    free(owned);
    free(raw);
    profile_location_set_frames(c->p, loc, &f, 1);
    l->flags |= PROFILE_LOC_SYMBOLIZED | PROFILE_LOC_NAMED;
    c->named++;
}

/* The node's own symbol service names what no file could: names only,
 * flagged PROFILE_LOC_NAMED, and the profile's hint (printed by the text,
 * JSON and pprof outputs and stored with the snapshot) says so. */
static void names_from_service(struct symbolizer *s, struct profile *p, const uint32_t *locs,
                               size_t n, const char *objs, struct sym_stats *st,
                               struct hp_buf *err)
{
    struct svc_ctx c = { .p = p };
    hp_map64_init(&c.by_addr);
    uint64_t *addrs = hp_xmalloc(n * sizeof(*addrs));
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t prev;
        if (hp_map64_put(&c.by_addr, p->locs[locs[i]].address, locs[i], &prev) == 0 ||
            prev == locs[i])
            addrs[na++] = p->locs[locs[i]].address;
    }
    struct hp_buf why = HP_BUF_INIT(0);
    const struct sym_server *svc = &s->call_node->symbol_service;
    int r = sym_pprof_symbol(svc, addrs, na, s->opt.debuginfod_timeout_ms, svc_cb, &c, &why);
    if (r < 0)
        hp_err_printf(err, "%s: %s\n", svc->url,
                      why.len ? why.data : hp_strerror(r));
    if (c.named) {
        st->resolved += c.named;
        st->no_binary -= HP_MIN(st->no_binary, c.named);
        const char *mark = arena_printf(
            &s->call_arena,
            "%s%snames only for %s: from the node's /pprof/symbol (no file:line, no inlined "
            "frames) for %zu of %zu addresses",
            p->hint ? p->hint : "", p->hint ? "; " : "", objs, c.named, na);
        p->hint = profile_intern(p, mark, strlen(mark));
        for (size_t i = 0; i < s->nstatus; i++)
            if (!s->status[i].used && s->status[i].addresses)
                s->status[i].message = arena_printf(
                    &s->call_arena, "%s; names only from the node's /pprof/symbol",
                    s->status[i].message);
    }
    /* The service is a source like the others: its answer goes with each
     * object it was asked for. */
    struct hp_buf said = HP_BUF_INIT(0);
    if (r < 0)
        hp_buf_puts(&said, why.len ? why.data : hp_strerror(r));
    else
        hp_buf_printf(&said, "names only for %zu of %zu addresses", c.named, na);
    for (size_t i = 0; i < s->nstatus; i++) {
        struct sym_object_status *os = &s->status[i];
        if (os->used || !os->addresses)
            continue;
        struct hp_buf t = HP_BUF_INIT(0);
        if (os->tried && *os->tried)
            hp_buf_puts(&t, os->tried);
        char *label = hp_xasprintf("symbol service %s", svc->url);
        tried_add(&t, label, said.data);
        free(label);
        os->tried = hp_arena_strdup(&s->call_arena, t.data);
        hp_buf_release(&t);
    }
    hp_buf_release(&said);
    hp_buf_release(&why);
    free(addrs);
    hp_map64_release(&c.by_addr);
}

/* A location whose frames came with the file (pprof Function names): the
 * reader marked it symbolized and gave it at least one named frame. */
static bool file_named(const struct profile *p, const struct profile_location *l)
{
    if (!(l->flags & PROFILE_LOC_SYMBOLIZED) || !l->nframes)
        return false;
    for (uint32_t k = 0; k < l->nframes; k++)
        if (p->frames[l->frame_off + k].function)
            return true;
    return false;
}

int sym_profile(struct symbolizer *s, struct profile *p, struct sym_stats *ret_stats,
                struct hp_buf *err)
{
    return sym_profile_node(s, p, NULL, ret_stats, err);
}

int sym_profile_node(struct symbolizer *s, struct profile *p, const struct sym_node *node,
                     struct sym_stats *ret_stats, struct hp_buf *err)
{
    struct sym_stats st = { 0 };
    call_servers_set(s, node);
    /* Locations no source had a file for, for the node's symbol service. */
    uint32_t *nameless = NULL;
    size_t nnameless = 0;
    const char *nameless_objs = "";
    if (node && node->symbol_service.url && *node->symbol_service.url)
        nameless = hp_xmalloc((p->nlocs ? p->nlocs : 1) * sizeof(*nameless));
    s->nstatus = 0;
    hp_arena_release(&s->call_arena);
    hp_arena_init(&s->call_arena);
    const char *mainp = main_path(s, p);

    /* Group address locations by object file. */
    struct group *groups = NULL;
    size_t ngroups = 0, gcap = 0;
    struct hp_map64 gidx; /* mapping index -> group */
    hp_map64_init(&gidx);
    bool *from_file = hp_xcalloc(p->nlocs ? p->nlocs : 1, sizeof(*from_file));
    uint8_t *is_alloc = hp_xcalloc(p->nlocs ? p->nlocs : 1, 1); /* trim_allocator's */
    for (size_t i = 0; i < p->nlocs; i++) {
        struct profile_location *l = &p->locs[i];
        if (l->flags & PROFILE_LOC_NAMED)
            continue;
        st.locations++;
        /* Names the file already carries (pprof from Go, Node.js, Pyroscope,
         * Parca, jemalloc_pprof) are kept. Only a binary whose build-id
         * matches the mapping's may replace them; without a build-id in the
         * profile there is nothing to prove a local file is the one that
         * ran, so the file's names stand. */
        bool named = file_named(p, l);
        if (named && (!l->mapping || l->mapping > p->nmappings ||
                      !p->mappings[l->mapping - 1].build_id ||
                      !*p->mappings[l->mapping - 1].build_id)) {
            st.resolved++;
            continue;
        }
        from_file[i] = named;
        if (!l->mapping || l->mapping > p->nmappings || mapping_is_anon(&p->mappings[l->mapping - 1])) {
            if (!named)
                profile_location_set_frames(p, (uint32_t)i, NULL, 0);
            l->flags |= PROFILE_LOC_SYMBOLIZED;
            st.anonymous++;
            continue;
        }
        const struct profile_mapping *m = &p->mappings[l->mapping - 1];
        uint32_t g;
        if (!hp_map64_get(&gidx, l->mapping, &g)) {
            /* One group per file, even over several mappings. */
            g = UINT32_MAX;
            for (size_t k = 0; k < ngroups; k++)
                if (strcmp(groups[k].path, m->path) == 0)
                    g = (uint32_t)k;
            if (g == UINT32_MAX) {
                groups = hp_xgrow(groups, &gcap, ngroups + 1, sizeof(*groups));
                g = (uint32_t)ngroups++;
                memset(&groups[g], 0, sizeof(groups[g]));
                groups[g].path = m->path;
                groups[g].m = m;
            }
            uint32_t dummy;
            (void)hp_map64_put(&gidx, l->mapping, g, &dummy);
        }
        struct group *gr = &groups[g];
        gr->jobs = hp_xgrow(gr->jobs, &gr->cap, gr->njobs + 1, sizeof(*gr->jobs));
        /* File offset now; the vaddr once the file's PT_LOADs are known. */
        gr->jobs[gr->njobs++] = (struct loc_job){ (uint32_t)i, l->address - m->start + m->offset };
    }
    hp_map64_release(&gidx);

    for (size_t g = 0; g < ngroups; g++) {
        struct group *gr = &groups[g];
        struct sym_object_status *os = status_add(s);
        os->path = gr->path;
        os->addresses = (uint32_t)gr->njobs;
        struct want w = { .path = strip_deleted(&s->call_arena, gr->path),
                          .build_id = gr->m->build_id,
                          .deleted = (gr->m->flags & PROFILE_MAP_DELETED) != 0,
                          .main = gr->path == mainp || (mainp && strcmp(gr->path, mainp) == 0) };
        /* Dumps carry no build-id. When the mapped file is on this host
         * (same path, same inode as the maps line says), it is the file
         * the process ran, and its build-id is the identity every other
         * candidate (--binary, --symbols, debuginfod) must have. */
        char local_id[2 * SYM_BUILD_ID_MAX + 1] = "";
        struct stat lst;
        /* A node with an agent says itself which build it mapped; a file
         * at the same path here may be another build. */
        if ((!w.build_id || !*w.build_id) && agent_build_id(s, w.path, local_id))
            w.build_id = local_id;
        else if ((!w.build_id || !*w.build_id) && !w.deleted && gr->m->inode &&
            stat(w.path, &lst) == 0 && (uint64_t)lst.st_ino == gr->m->inode) {
            struct sym_elf_identity lid;
            if (sym_elf_identity_read(w.path, &lid, NULL) == 0 && lid.build_id[0]) {
                memcpy(local_id, lid.build_id, sizeof(local_id));
                w.build_id = local_id;
            }
        }
        const struct profile_mapping *xm = exec_mapping_of(p, gr->path);
        if (xm) {
            w.exec = true;
            w.offset = xm->offset;
            w.len = xm->limit - xm->start;
        }
        struct sym_route *rt = resolve_object(s, &w);
        os->message = hp_arena_strdup(&s->call_arena, rt->message ? rt->message : "ok");
        os->build_id = hp_arena_strdup(&s->call_arena, rt->obj ? rt->obj->build_id
                                                       : w.build_id ? w.build_id : "");
        os->tried = rt->tried ? hp_arena_strdup(&s->call_arena, rt->tried) : "";
        if (!rt->obj) {
            os->status = rt->status;
            st.no_binary += gr->njobs;
            hp_err_printf(err, "%s: %s\n", gr->path, os->message);
            for (size_t j = 0; j < gr->njobs; j++) {
                if (!from_file[gr->jobs[j].loc])
                    profile_location_set_frames(p, gr->jobs[j].loc, NULL, 0);
                p->locs[gr->jobs[j].loc].flags |= PROFILE_LOC_SYMBOLIZED;
                if (nameless && !from_file[gr->jobs[j].loc])
                    nameless[nnameless++] = gr->jobs[j].loc;
            }
            if (nameless)
                nameless_objs = arena_printf(&s->call_arena, "%s%s%s", nameless_objs,
                                                 *nameless_objs ? ", " : "", base_name(gr->path));
            continue;
        }
        struct sym_obj *o = rt->obj;
        os->used = hp_arena_strdup(&s->call_arena, o->used);
        os->debug = o->debug ? hp_arena_strdup(&s->call_arena, o->debug) : NULL;
        if (o->note || o->alt_note)
            hp_err_printf(err, "%s: %s\n", gr->path, os->message);
        uint64_t *va = hp_xmalloc(gr->njobs * sizeof(*va));
        size_t nva = 0;
        for (size_t j = 0; j < gr->njobs; j++) {
            uint64_t v;
            if (sym_elf_offset_to_vaddr(o->elf, gr->jobs[j].vaddr, &v))
                gr->jobs[j].vaddr = v;
            else
                gr->jobs[j].vaddr = UINT64_MAX; /* outside the file's segments */
        }
        hp_qsort(gr->jobs, gr->njobs, sizeof(*gr->jobs), job_cmp);
        /* Ascending, so a cache's lookups walk its file in order. */
        for (size_t j = 0; j < gr->njobs; j++)
            if (gr->jobs[j].vaddr != UINT64_MAX)
                va[nva++] = gr->jobs[j].vaddr;
        size_t hits = 0;
        obj_fill(s, o, va, nva, &hits);
        st.cache_hits += hits;
        free(va);
        for (size_t j = 0; j < gr->njobs; j++) {
            uint32_t loc = gr->jobs[j].loc;
            const struct cached *c =
                gr->jobs[j].vaddr == UINT64_MAX ? NULL : obj_get(o, gr->jobs[j].vaddr);
            if (c && c->n) {
                const struct profile_frame *f = &o->frames[c->off];
                if (s->opt.no_inline)
                    profile_location_set_frames(p, loc, &f[c->n - 1], 1);
                else
                    profile_location_set_frames(p, loc, f, c->n);
                is_alloc[loc] = c->alloc & (s->opt.no_inline ? CACHED_ALLOC_OUTER
                                                             : CACHED_ALLOC_ANY) ? 2 : 1;
                st.resolved++;
                os->resolved++;
            } else if (from_file[loc]) {
                st.resolved++; /* the file's own names stand */
            } else {
                profile_location_set_frames(p, loc, NULL, 0);
                st.unresolved++;
            }
            p->locs[loc].flags |= PROFILE_LOC_SYMBOLIZED;
        }
    }
    for (size_t g = 0; g < ngroups; g++)
        free(groups[g].jobs);
    free(groups);
    if (nnameless)
        names_from_service(s, p, nameless, nnameless, nameless_objs, &st, err);
    free(nameless);
    free(from_file);

    trim_allocator(p, &st, is_alloc);
    free(is_alloc);
    st.nobjects = s->nstatus;
    st.objects = s->status;
    if (ret_stats)
        *ret_stats = st;
    return 0;
}

void sym_forget_failures(struct symbolizer *s)
{
    for (size_t i = 0; i < s->nroutes; i++) {
        struct sym_route *rt = &s->routes[i];
        if (rt->image)
            continue;
        route_forget(rt);
        rt->obj = NULL;
    }
    /* Build-ids the agents did not know may be known now. */
    for (size_t i = 0; i < s->nidents; i++)
        s->idents[i].until_ns = 0;
    /* Objects whose image was found without debug info: their debug file
     * may be there now (a debuginfod server that answered 404 serves it, a
     * folder got it). Drop them and forget the routes to them, so the next
     * lookup opens the image again and asks for its debug info; what they
     * resolved is resolved again. */
    size_t k = 0;
    for (size_t i = 0; i < s->nobjs; i++) {
        struct sym_obj *o = s->objs[i];
        if (o->dw) {
            s->objs[k++] = o;
            continue;
        }
        for (size_t j = 0; j < s->nroutes; j++) {
            struct sym_route *rt = &s->routes[j];
            if (rt->obj != o)
                continue;
            free(rt->image);
            rt->image = NULL;
            route_forget(rt);
            rt->obj = NULL;
        }
        obj_free(o);
    }
    s->nobjs = k;
    /* Servers skipped after a transport failure (a node's agent that was
     * down, a debuginfod server unreachable) are asked again at once. */
    memset(&s->backoff, 0, sizeof(s->backoff));
}

/* ---- batch API --------------------------------------------------------------- */

int sym_batch_resolve(struct symbolizer *s, const char *path, const uint64_t *vaddrs, size_t n,
                      struct sym_batch *ret, struct hp_buf *err)
{
    struct want w = { .path = path };
    call_servers_set(s, NULL);
    struct sym_route *rt = resolve_object(s, &w);
    if (!rt->obj) {
        hp_err_printf(err, "%s: %s", path, rt->message ? rt->message : "not found");
        return rt->status ? rt->status : HP_ENOTFOUND;
    }
    struct sym_obj *o = rt->obj;
    if (o->note || o->alt_note)
        hp_err_printf(err, "%s: %s", path, rt->message);
    obj_fill(s, o, vaddrs, n, NULL);
    struct sym_batch b;
    memset(&b, 0, sizeof(b));
    hp_arena_init(&b.arena);
    b.build_id = hp_arena_strdup(&b.arena, o->build_id);
    b.results = hp_xcalloc(n ? n : 1, sizeof(*b.results));
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const struct cached *c = obj_get(o, vaddrs[i]);
        total += c ? c->n : 0;
    }
    b.frames = hp_xcalloc(total ? total : 1, sizeof(*b.frames));
    for (size_t i = 0; i < n; i++) {
        const struct cached *c = obj_get(o, vaddrs[i]);
        uint32_t cn = c ? c->n : 0;
        if (s->opt.no_inline && cn > 1) {
            b.results[i] = (struct sym_batch_result){ (uint32_t)b.nframes, 1 };
            b.frames[b.nframes++] = o->frames[c->off + cn - 1];
            continue;
        }
        b.results[i] = (struct sym_batch_result){ (uint32_t)b.nframes, cn };
        for (uint32_t k = 0; k < cn; k++)
            b.frames[b.nframes++] = o->frames[c->off + k];
    }
    /* The object's strings may outlive nothing the caller holds: copy. */
    for (size_t i = 0; i < b.nframes; i++) {
        if (b.frames[i].function)
            b.frames[i].function = hp_arena_strdup(&b.arena, b.frames[i].function);
        if (b.frames[i].file)
            b.frames[i].file = hp_arena_strdup(&b.arena, b.frames[i].file);
    }
    *ret = b;
    return 0;
}

void sym_batch_release(struct sym_batch *b)
{
    if (!b)
        return;
    free(b->results);
    free(b->frames);
    hp_arena_release(&b->arena);
    memset(b, 0, sizeof(*b));
}
