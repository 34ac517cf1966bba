/* discrepancy: the node's own memory accounting next to its heap profile.
 *
 * Categories (query execution, metadata, caches, load, compaction, ...) each
 * name frame patterns and the tracker figures that should account for the
 * same memory. A stack belongs to the category of its innermost frame that
 * matches any category (the leaf-most code that asked for the memory decides,
 * as the trackers attribute consumption where it is made); frames matching
 * several categories go to the first in rule order. The ladder puts RSS,
 * jemalloc's resident/active/allocated, the heap profile total and the
 * tracked total in a row and names what lies in each gap.
 *
 * Rules are text (the built-in set is written in the same format and parsed
 * at start), documented in query/INTERNALS.md §6. Figure names are those the
 * collector stores (collector/poll/figures.c): Prometheus series as the node
 * wrote them, bvar names, Doris memory-tracker rows as
 * mem_tracker_current_bytes{type="...",label="..."}, agent figures as
 * proc_*. */
#include "query/analysis-internal.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define RULES_MAX_BYTES (1u << 20)
#define RULES_MAX_CATS 256
#define RULES_MAX_ALTS 64
#define RULES_MAX_TERMS 64
#define FIGURES_MAX 100000

struct rule_alt {
    char **terms;
    size_t nterms;
    char *text; /* as written, for the report */
};

struct rule_alts {
    struct rule_alt *v;
    size_t n;
};

struct rule_cat {
    char *name, *description, *pattern;
    regex_t re;
    bool has_re;
    bool idle; /* a near-zero tracker means the node is idle in this category */
    struct rule_alts trackers;
};

enum ladder_key { LK_RSS, LK_RESIDENT, LK_ACTIVE, LK_ALLOCATED, LK_METADATA, LK_TRACKED, LK_COUNT };
static const char *const ladder_keys[LK_COUNT] = { "rss", "jemalloc_resident", "jemalloc_active",
                                                   "jemalloc_allocated", "jemalloc_metadata",
                                                   "tracked" };

struct query_rules {
    struct rule_cat *cats;
    size_t ncats;
    struct rule_alts ladder[LK_COUNT];
    double tolerance;   /* consistent within this share of the larger side */
    double floor_bytes; /* ... or within floor_share of the process, at most this */
    double floor_share; /* the floor as a share of the process (RSS, else the heap) */
    double idle_share;  /* tracker under this share of the heap total: idle */
    const char *kind;   /* the database kind whose built-in rules these are, or NULL */
};

static const char builtin_head[] =
    "# Built-in settings and ladder for every kind; the first alternative present\n"
    "# wins.\n"
    "[settings]\n"
    "tolerance = 0.2\n"
    "floor_bytes = 1048576\n"
    "floor_share = 0.001\n"
    "idle_share = 0.01\n"
    "[ladder]\n"
    "rss = process_rss_bytes\n"
    "rss = doris_be_memory_allocated_bytes\n"
    "rss = mem_tracker_current_bytes{type=\"overview\",label=\"process resident memory\"}\n"
    "rss = databend_process_resident_memory_bytes\n"
    "rss = process_resident_memory_bytes\n"
    "rss = proc_rss_bytes\n"
    "jemalloc_resident = doris_be_memory_jemalloc_resident_bytes\n"
    "jemalloc_resident = starrocks_be_jemalloc_resident_bytes\n"
    "jemalloc_resident = jemalloc_resident_bytes\n"
    "jemalloc_active = doris_be_memory_jemalloc_active_bytes\n"
    "jemalloc_active = starrocks_be_jemalloc_active_bytes\n"
    "jemalloc_active = jemalloc_active_bytes\n"
    "jemalloc_allocated = doris_be_memory_jemalloc_allocated_bytes\n"
    "jemalloc_allocated = starrocks_be_jemalloc_allocated_bytes\n"
    "jemalloc_allocated = jemalloc_allocated_bytes\n"
    "jemalloc_allocated = proc_jemalloc_allocated\n"
    "jemalloc_metadata = doris_be_memory_jemalloc_metadata_bytes\n"
    "jemalloc_metadata = starrocks_be_jemalloc_metadata_bytes\n"
    "jemalloc_metadata = jemalloc_metadata_bytes\n"
    "tracked = memory_all_tracked_sum_bytes\n"
    "tracked = doris_be_memory_all_tracked_sum_bytes\n"
    "tracked = starrocks_be_process_mem_bytes\n"
    "tracked = mem_tracker_current_bytes{type=\"overview\",label=\"sum of all trackers\"}\n";

/* A node of no known kind: Doris' and StarRocks' names together.
 * Metadata before caches: a frame naming both (the Doris guide's
 * TabletSchema cache, tablet_schema_cache_grow) is metadata, which is the
 * tracker that counts it; a frame's category is the first in rule order
 * that matches it. */
static const char builtin_any[] =
    "[metadata]\n"
    "description = tablet and segment metadata (TabletSchema, Segment, ColumnReader, indexes)\n"
    "match = tablet_?schema|tablet_?meta|rowset_?meta|segment_v2::Segment::|Segment::open"
    "|segment_?meta|column_?reader|short_?key_?index|zone_?map|ordinal_?index"
    "|bloom_?filter_?index|primary_?key_?index\n"
    "tracker = memory_metadata_trackers_sum_bytes\n"
    "tracker = doris_be_memory_metadata_trackers_sum_bytes\n"
    "tracker = starrocks_be_metadata_mem_bytes\n"
    "[cache]\n"
    "description = caches (page, segment, schema, LRU caches)\n"
    "match = cache|lru_?cache|LRUCache|PageCache|page_?cache|StoragePageCache\n"
    "tracker = memory_cache_trackers_sum_bytes\n"
    "tracker = doris_be_memory_cache_trackers_sum_bytes\n"
    "tracker = starrocks_be_storage_page_cache_mem_bytes + starrocks_be_column_pool_mem_bytes\n"
    "tracker = starrocks_be_storage_page_cache_mem_bytes\n"
    "[load]\n"
    "description = loads (memtables, delta writers, stream load)\n"
    "match = memtable|mem_?table|delta_?writer|load_?channel|tablets_?channel|stream_?load"
    "|rowset_?writer|segment_?writer\n"
    "tracker = memory_load_trackers_sum_bytes\n"
    "tracker = doris_be_memory_load_trackers_sum_bytes\n"
    "tracker = starrocks_be_load_mem_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"load\"}\n"
    "idle = yes\n"
    "[compaction]\n"
    "description = compaction\n"
    "match = compaction\n"
    "tracker = memory_compaction_trackers_sum_bytes\n"
    "tracker = doris_be_memory_compaction_trackers_sum_bytes\n"
    "tracker = starrocks_be_compaction_mem_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"compaction\"}\n"
    "[schema_change]\n"
    "description = schema change\n"
    "match = schema_?change\n"
    "tracker = memory_schema_change_trackers_sum_bytes\n"
    "tracker = doris_be_memory_schema_change_trackers_sum_bytes\n"
    "tracker = starrocks_be_schema_change_mem_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"schema_change\"}\n"
    "[query]\n"
    "description = query execution (Agg, Join, Filter, Sort, Scan operators)\n"
    "match = agg|join|filter|sort|scan|exchange|hash_?table|pipeline|fragment_?executor"
    "|query_?execute|operator\n"
    "tracker = memory_query_trackers_sum_bytes\n"
    "tracker = doris_be_memory_query_trackers_sum_bytes\n"
    "tracker = starrocks_be_query_mem_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"query\"}\n"
    "idle = yes\n";

/* Each kind's categories, from its own trackers. */
static const char builtin_doris[] =
    /* Doris' MemTrackerLimiter types (bvar memory_*_trackers_sum_bytes and
     * their doris_be_ Prometheus names): the guide's wording, TabletSchema,
     * Segment, ColumnReader are metadata; Agg, Join, Filter, Sort, Scan
     * operators are query. */
    "[metadata]\n"
    "description = tablet and segment metadata (TabletSchema, Segment, ColumnReader, indexes)\n"
    "match = doris::TabletSchema|doris::segment_v2::Segment::|tablet_?schema|tablet_?meta"
    "|rowset_?meta|segment_v2::Segment::|Segment::open|segment_?meta|column_?reader"
    "|short_?key_?index|zone_?map|ordinal_?index|bloom_?filter_?index|primary_?key_?index\n"
    "tracker = memory_metadata_trackers_sum_bytes\n"
    "tracker = doris_be_memory_metadata_trackers_sum_bytes\n"
    "[cache]\n"
    "description = caches (StoragePageCache, segment, schema and LRU caches)\n"
    "match = cache|lru_?cache|LRUCache|PageCache|page_?cache|StoragePageCache\n"
    "tracker = memory_cache_trackers_sum_bytes\n"
    "tracker = doris_be_memory_cache_trackers_sum_bytes\n"
    "[load]\n"
    "description = loads (memtables, delta writers, load channels, stream load)\n"
    "match = memtable|mem_?table|delta_?writer|load_?channel|tablets_?channel|stream_?load"
    "|rowset_?writer|segment_?writer\n"
    "tracker = memory_load_trackers_sum_bytes\n"
    "tracker = doris_be_memory_load_trackers_sum_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"load\"}\n"
    "idle = yes\n"
    "[compaction]\n"
    "description = compaction\n"
    "match = compaction\n"
    "tracker = memory_compaction_trackers_sum_bytes\n"
    "tracker = doris_be_memory_compaction_trackers_sum_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"compaction\"}\n"
    "[schema_change]\n"
    "description = schema change\n"
    "match = schema_?change\n"
    "tracker = memory_schema_change_trackers_sum_bytes\n"
    "tracker = doris_be_memory_schema_change_trackers_sum_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"schema_change\"}\n"
    "[query]\n"
    "description = query execution (vectorized Agg, Join, Filter, Sort, Scan operators)\n"
    "match = agg|join|filter|sort|scan|exchange|hash_?table|pipeline|fragment_?executor"
    "|query_?execute|operator\n"
    "tracker = memory_query_trackers_sum_bytes\n"
    "tracker = doris_be_memory_query_trackers_sum_bytes\n"
    "tracker = mem_tracker_current_bytes{type=\"overview\",label=\"query\"}\n"
    "idle = yes\n";

static const char builtin_starrocks[] =
    /* StarRocks' process trackers (starrocks_be_*_mem_bytes). Its update
     * tracker counts the primary-key index and delete vectors, which are
     * metadata in Doris: here they come first and are "update". */
    "[update]\n"
    "description = primary-key tables' updates (PrimaryIndex, delete vectors, UpdateManager)\n"
    "match = primary_?index|PrimaryIndex|update_?manager|UpdateManager|del_?vector|DelVector\n"
    "tracker = starrocks_be_update_mem_bytes\n"
    "[metadata]\n"
    "description = tablet, rowset, segment and column metadata (TabletSchema, Segment, "
    "ColumnReader)\n"
    "match = starrocks::TabletSchema|starrocks::Segment::|tablet_?schema|tablet_?meta"
    "|rowset_?meta|Rowset::load|Segment::open|segment_?meta|column_?reader|short_?key_?index"
    "|zone_?map|ordinal_?index|bloom_?filter_?index\n"
    "tracker = starrocks_be_metadata_mem_bytes\n"
    "tracker = starrocks_be_tablet_metadata_mem_bytes + starrocks_be_rowset_metadata_mem_bytes"
    " + starrocks_be_segment_metadata_mem_bytes + starrocks_be_column_metadata_mem_bytes\n"
    "[cache]\n"
    "description = caches (StoragePageCache, column pools)\n"
    "match = cache|lru_?cache|LRUCache|PageCache|page_?cache|StoragePageCache|column_?pool"
    "|ColumnPool\n"
    "tracker = starrocks_be_storage_page_cache_mem_bytes + starrocks_be_column_pool_mem_bytes\n"
    "tracker = starrocks_be_storage_page_cache_mem_bytes\n"
    "[load]\n"
    "description = loads (memtables, delta writers, load channels)\n"
    "match = memtable|mem_?table|delta_?writer|load_?channel|tablets_?channel|stream_?load"
    "|rowset_?writer|segment_?writer\n"
    "tracker = starrocks_be_load_mem_bytes\n"
    "idle = yes\n"
    "[compaction]\n"
    "description = compaction\n"
    "match = compaction\n"
    "tracker = starrocks_be_compaction_mem_bytes\n"
    "[schema_change]\n"
    "description = schema change\n"
    "match = schema_?change\n"
    "tracker = starrocks_be_schema_change_mem_bytes\n"
    "[query]\n"
    "description = query execution (pipeline Agg, Join, Filter, Sort, Scan operators)\n"
    "match = agg|join|filter|sort|scan|exchange|hash_?table|pipeline|fragment_?executor"
    "|query_?execute|operator\n"
    "tracker = starrocks_be_query_mem_bytes\n"
    "idle = yes\n";

static const char builtin_databend[] =
    /* Databend counts one figure, the query memory (its global tracker);
     * its caches (SegmentInfoCache, table and block meta) have none. */
    "[cache]\n"
    "description = table, segment and block meta caches (SegmentInfoCache, ...)\n"
    "match = cache|Cache\n"
    "[query]\n"
    "description = query execution (pipelines: HashJoin, AggregateHashTable, sort, scan)\n"
    "match = pipelines|processors|join|aggregat|sort|scan|hash_?table|HashTable\n"
    "tracker = databend_query_memory_usage_bytes\n"
    "idle = yes\n";

static const char builtin_risingwave[] =
    /* RisingWave's stream_memory_usage counts the streaming executors'
     * state (join hash maps, agg groups); the storage caches stand apart. */
    "[cache]\n"
    "description = storage caches (block and meta caches)\n"
    "match = block_?cache|meta_?cache|BlockCache|MetaCache|hummock.*cache\n"
    "[stream]\n"
    "description = streaming executors (JoinHashMap, HashAggExecutor, ...)\n"
    "match = risingwave_stream|stream::executor|executor|JoinHashMap|HashAgg|join|agg\n"
    "tracker = stream_memory_usage\n";

static const struct {
    const char *kind, *text;
} builtin_kinds[] = {
    { "doris", builtin_doris },
    { "starrocks", builtin_starrocks },
    { "databend", builtin_databend },
    { "risingwave", builtin_risingwave },
};

static void alts_release(struct rule_alts *a)
{
    for (size_t i = 0; i < a->n; i++) {
        for (size_t k = 0; k < a->v[i].nterms; k++)
            free(a->v[i].terms[k]);
        free(a->v[i].terms);
        free(a->v[i].text);
    }
    free(a->v);
    a->v = NULL;
    a->n = 0;
}

static void cat_release(struct rule_cat *c)
{
    free(c->name);
    free(c->description);
    free(c->pattern);
    if (c->has_re)
        regfree(&c->re);
    alts_release(&c->trackers);
    memset(c, 0, sizeof(*c));
}

void query_rules_free(struct query_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ncats; i++)
        cat_release(&r->cats[i]);
    free(r->cats);
    for (int k = 0; k < LK_COUNT; k++)
        alts_release(&r->ladder[k]);
    free(r);
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = hp_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* "a + b + c" -> terms. */
static int alt_parse(const char *v, size_t n, struct rule_alts *dst, const char *origin,
                     size_t line, struct hp_buf *err)
{
    if (dst->n >= RULES_MAX_ALTS) {
        hp_err_printf(err, "%s:%zu: more than %d alternatives for one figure", origin, line,
                      RULES_MAX_ALTS);
        return HP_ETOOBIG;
    }
    struct rule_alt alt = { .text = xstrndup(v, n) };
    size_t cap = 0;
    const char *p = v, *end = v + n;
    while (p <= end) {
        const char *plus = memchr(p, '+', (size_t)(end - p));
        const char *q = plus ? plus : end;
        const char *t = p;
        size_t tn = (size_t)(q - p);
        trim(&t, &tn);
        if (!tn || alt.nterms >= RULES_MAX_TERMS) {
            hp_err_printf(err, "%s:%zu: %s in \"%s\" (expected NAME or NAME + NAME ...)",
                          origin, line, tn ? "too many terms" : "empty figure name", alt.text);
            for (size_t k = 0; k < alt.nterms; k++)
                free(alt.terms[k]);
            free(alt.terms);
            free(alt.text);
            return HP_EPARSE;
        }
        alt.terms = hp_xgrow(alt.terms, &cap, alt.nterms + 1, sizeof(*alt.terms));
        alt.terms[alt.nterms++] = xstrndup(t, tn);
        if (!plus)
            break;
        p = plus + 1;
    }
    dst->v = hp_xrealloc(dst->v, (dst->n + 1) * sizeof(*dst->v));
    dst->v[dst->n++] = alt;
    return 0;
}

static struct rule_cat *cat_find(struct query_rules *r, const char *name, size_t n)
{
    for (size_t i = 0; i < r->ncats; i++)
        if (strlen(r->cats[i].name) == n && memcmp(r->cats[i].name, name, n) == 0)
            return &r->cats[i];
    return NULL;
}

static int cat_compile(struct rule_cat *c, const char *origin, size_t line, struct hp_buf *err)
{
    if (!c->pattern)
        return 0;
    if (c->has_re)
        regfree(&c->re);
    c->has_re = false;
    int rc = regcomp(&c->re, c->pattern, REG_EXTENDED | REG_NOSUB | REG_ICASE);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &c->re, msg, sizeof(msg));
        hp_err_printf(err, "%s:%zu: [%s] match: invalid regular expression: %s", origin, line,
                      c->name, msg);
        return HP_EPARSE;
    }
    c->has_re = true;
    return 0;
}

int query_rules_parse(struct query_rules *r, const char *text, size_t len, const char *origin,
                      struct hp_buf *err)
{
    if (len > RULES_MAX_BYTES) {
        hp_err_printf(err, "%s: rules file larger than %u bytes", origin, RULES_MAX_BYTES);
        return HP_ETOOBIG;
    }
    enum { SEC_TOP, SEC_SETTINGS, SEC_LADDER, SEC_CAT } sec = SEC_TOP;
    struct rule_cat *cat = NULL;
    size_t cat_line = 0, inserted = 0;
    bool ladder_seen[LK_COUNT] = { false };
    const char *p = text, *end = text + len;
    size_t line = 0;
    int rc = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        const char *s = p;
        size_t n = (size_t)(le - p);
        p = nl ? nl + 1 : end;
        trim(&s, &n);
        if (!n || s[0] == '#' || s[0] == ';')
            continue;
        if (memchr(s, '\0', n)) {
            hp_err_printf(err, "%s:%zu: NUL byte in line", origin, line);
            rc = HP_EPARSE;
            goto out;
        }
        if (s[0] == '[') {
            if (n < 3 || s[n - 1] != ']') {
                hp_err_printf(err, "%s:%zu: malformed section header (expected [NAME])", origin,
                              line);
                rc = HP_EPARSE;
                goto out;
            }
            if (cat && (rc = cat_compile(cat, origin, cat_line, err)) < 0)
                goto out;
            cat = NULL;
            const char *name = s + 1;
            size_t nn = n - 2;
            trim(&name, &nn);
            for (size_t k = 0; k < nn; k++)
                if (!(isalnum((unsigned char)name[k]) || name[k] == '_' || name[k] == '-')) {
                    hp_err_printf(err, "%s:%zu: section name may hold letters, digits, '_' and "
                                       "'-' only",
                                  origin, line);
                    rc = HP_EPARSE;
                    goto out;
                }
            if (nn == 8 && memcmp(name, "settings", 8) == 0) {
                sec = SEC_SETTINGS;
            } else if (nn == 6 && memcmp(name, "ladder", 6) == 0) {
                sec = SEC_LADDER;
            } else {
                sec = SEC_CAT;
                cat_line = line;
                cat = cat_find(r, name, nn);
                if (cat) {
                    /* A section of an existing name replaces it. */
                    char *keep = xstrndup(name, nn);
                    cat_release(cat);
                    cat->name = keep;
                } else {
                    if (r->ncats >= RULES_MAX_CATS) {
                        hp_err_printf(err, "%s:%zu: more than %d categories", origin, line,
                                      RULES_MAX_CATS);
                        rc = HP_ETOOBIG;
                        goto out;
                    }
                    /* New categories go before the ones from earlier
                     * rules, in file order: a file's own (more specific)
                     * categories win frames that built-ins also match. */
                    r->cats = hp_xrealloc(r->cats, (r->ncats + 1) * sizeof(*r->cats));
                    memmove(&r->cats[inserted + 1], &r->cats[inserted],
                            (r->ncats - inserted) * sizeof(*r->cats));
                    r->ncats++;
                    cat = &r->cats[inserted++];
                    memset(cat, 0, sizeof(*cat));
                    cat->name = xstrndup(name, nn);
                }
            }
            continue;
        }
        const char *eq = memchr(s, '=', n);
        if (!eq) {
            hp_err_printf(err, "%s:%zu: expected KEY = VALUE or [SECTION]", origin, line);
            rc = HP_EPARSE;
            goto out;
        }
        const char *k = s, *v = eq + 1;
        size_t kn = (size_t)(eq - s), vn = (size_t)(s + n - v);
        trim(&k, &kn);
        trim(&v, &vn);
        char key[32];
        if (!kn || kn >= sizeof(key) || !vn) {
            hp_err_printf(err, "%s:%zu: %s", origin, line,
                          !vn ? "empty value" : "missing or overlong key");
            rc = HP_EPARSE;
            goto out;
        }
        memcpy(key, k, kn);
        key[kn] = '\0';
        switch (sec) {
        case SEC_TOP:
            if (strcmp(key, "builtin") == 0 && vn == 4 && memcmp(v, "none", 4) == 0) {
                for (size_t i = 0; i < r->ncats; i++)
                    cat_release(&r->cats[i]);
                r->ncats = 0;
                inserted = 0;
                continue;
            }
            hp_err_printf(err, "%s:%zu: \"%s\" outside a section (expected builtin = none, "
                               "or a [section] first)",
                          origin, line, key);
            rc = HP_EPARSE;
            goto out;
        case SEC_SETTINGS: {
            double d;
            char num[64];
            if (vn >= sizeof(num)) {
                hp_err_printf(err, "%s:%zu: value too long", origin, line);
                rc = HP_EPARSE;
                goto out;
            }
            memcpy(num, v, vn);
            num[vn] = '\0';
            double *dst = strcmp(key, "tolerance") == 0     ? &r->tolerance
                          : strcmp(key, "floor_bytes") == 0 ? &r->floor_bytes
                          : strcmp(key, "floor_share") == 0 ? &r->floor_share
                          : strcmp(key, "idle_share") == 0  ? &r->idle_share
                                                            : NULL;
            if (!dst) {
                hp_err_printf(err, "%s:%zu: unknown setting \"%s\" (expected tolerance, "
                                   "floor_bytes, floor_share, idle_share)",
                              origin, line, key);
                rc = HP_EPARSE;
                goto out;
            }
            if (hp_parse_double(num, &d) < 0 || d < 0 || !isfinite(d)) {
                hp_err_printf(err, "%s:%zu: %s expects a non-negative number, got \"%s\"",
                              origin, line, key, num);
                rc = HP_EPARSE;
                goto out;
            }
            *dst = d;
            continue;
        }
        case SEC_LADDER: {
            int lk = -1;
            for (int i = 0; i < LK_COUNT; i++)
                if (strcmp(key, ladder_keys[i]) == 0)
                    lk = i;
            if (lk < 0) {
                hp_err_printf(err, "%s:%zu: unknown ladder step \"%s\" (expected rss, "
                                   "jemalloc_resident, jemalloc_active, jemalloc_allocated, "
                                   "jemalloc_metadata, tracked)",
                              origin, line, key);
                rc = HP_EPARSE;
                goto out;
            }
            if (!ladder_seen[lk]) {
                /* The first line for a step in this file replaces the
                 * alternatives inherited from the base rules. */
                alts_release(&r->ladder[lk]);
                ladder_seen[lk] = true;
            }
            if ((rc = alt_parse(v, vn, &r->ladder[lk], origin, line, err)) < 0)
                goto out;
            continue;
        }
        case SEC_CAT:
            if (strcmp(key, "description") == 0) {
                free(cat->description);
                cat->description = xstrndup(v, vn);
            } else if (strcmp(key, "match") == 0) {
                /* Several match lines are alternatives. */
                char *np = cat->pattern ? hp_xasprintf("%s|(%.*s)", cat->pattern, (int)vn, v)
                                        : hp_xasprintf("(%.*s)", (int)vn, v);
                free(cat->pattern);
                cat->pattern = np;
            } else if (strcmp(key, "tracker") == 0) {
                if ((rc = alt_parse(v, vn, &cat->trackers, origin, line, err)) < 0)
                    goto out;
            } else if (strcmp(key, "idle") == 0) {
                bool yes = (vn == 3 && memcmp(v, "yes", 3) == 0) ||
                           (vn == 4 && memcmp(v, "true", 4) == 0);
                bool no = (vn == 2 && memcmp(v, "no", 2) == 0) ||
                          (vn == 5 && memcmp(v, "false", 5) == 0);
                if (!yes && !no) {
                    hp_err_printf(err, "%s:%zu: idle expects yes or no", origin, line);
                    rc = HP_EPARSE;
                    goto out;
                }
                cat->idle = yes;
            } else {
                hp_err_printf(err, "%s:%zu: unknown key \"%s\" in [%s] (expected description, "
                                   "match, tracker, idle)",
                              origin, line, key, cat->name);
                rc = HP_EPARSE;
                goto out;
            }
            continue;
        }
    }
    if (cat)
        rc = cat_compile(cat, origin, cat_line, err);
out:
    return rc;
}

static int rules_from(const char *cats, const char *origin, struct query_rules **ret,
                      struct hp_buf *err)
{
    struct query_rules *r = hp_xcalloc(1, sizeof(*r));
    int rc = query_rules_parse(r, builtin_head, sizeof(builtin_head) - 1, "(built-in rules)",
                               err);
    if (rc == 0)
        rc = query_rules_parse(r, cats, strlen(cats), origin, err);
    if (rc < 0) {
        query_rules_free(r);
        return rc;
    }
    *ret = r;
    return 0;
}

int query_rules_builtin(struct query_rules **ret, struct hp_buf *err)
{
    return rules_from(builtin_any, "(built-in rules)", ret, err);
}

const char *query_rules_kind_detect(const char *kind, const struct query_figure *figs,
                                    size_t nfigs)
{
    for (size_t i = 0; kind && i < HP_ARRAY_SIZE(builtin_kinds); i++)
        if (strcmp(kind, builtin_kinds[i].kind) == 0)
            return builtin_kinds[i].kind;
    /* An agent or a URL node does not say what it runs; its figures do. */
    static const struct {
        const char *prefix, *kind;
    } marks[] = {
        { "doris_be_", "doris" },          { "memory_query_trackers_sum_bytes", "doris" },
        { "starrocks_be_", "starrocks" },  { "databend_", "databend" },
        { "stream_memory_usage", "risingwave" },
    };
    for (size_t i = 0; i < nfigs; i++)
        for (size_t k = 0; k < HP_ARRAY_SIZE(marks); k++)
            if (figs[i].name && strncmp(figs[i].name, marks[k].prefix, strlen(marks[k].prefix)) == 0)
                return marks[k].kind;
    return NULL;
}

int query_rules_for_kind(const char *kind, const struct query_figure *figs, size_t nfigs,
                         struct query_rules **ret, struct hp_buf *err)
{
    const char *k = query_rules_kind_detect(kind, figs, nfigs);
    for (size_t i = 0; k && i < HP_ARRAY_SIZE(builtin_kinds); i++)
        if (strcmp(k, builtin_kinds[i].kind) == 0) {
            char origin[64];
            snprintf(origin, sizeof(origin), "(built-in %s rules)", k);
            int rc = rules_from(builtin_kinds[i].text, origin, ret, err);
            if (rc == 0)
                (*ret)->kind = builtin_kinds[i].kind;
            return rc;
        }
    return query_rules_builtin(ret, err);
}

/* ---- figures ---- */

int query_figures_parse(const char *text, size_t len, const char *origin, struct hp_arena *arena,
                        struct query_figure **ret, size_t *ret_n, struct hp_buf *err)
{
    struct query_figure *v = NULL;
    size_t n = 0, cap = 0, line = 0;
    struct hp_strtab names;
    struct hp_map64 index; /* interned name -> index in v */
    hp_strtab_init(&names, arena);
    hp_map64_init(&index);
    int rc = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        const char *s = p;
        size_t sn = (size_t)(le - p);
        p = nl ? nl + 1 : end;
        trim(&s, &sn);
        if (!sn || s[0] == '#')
            continue;
        /* Name: up to '{', ':', or whitespace. */
        size_t k = 0;
        while (k < sn && s[k] != '{' && s[k] != ':' && !isspace((unsigned char)s[k]))
            k++;
        size_t name_len = k;
        if (k < sn && s[k] == '{') {
            /* Label values are quoted and may hold '}' and escaped quotes. */
            bool quoted = false;
            for (k++; k < sn; k++) {
                if (quoted && s[k] == '\\') {
                    k++;
                    continue;
                }
                if (s[k] == '"')
                    quoted = !quoted;
                else if (!quoted && s[k] == '}')
                    break;
            }
            if (k >= sn) {
                hp_err_printf(err, "%s:%zu: unterminated label set (expected '}')", origin, line);
                rc = HP_EPARSE;
                goto out;
            }
            k++;
        }
        size_t series_len = k;
        while (k < sn && (isspace((unsigned char)s[k]) || s[k] == ':'))
            k++;
        const char *val = s + k;
        size_t vn = sn - k;
        /* Prometheus allows a timestamp after the value. */
        size_t vk = 0;
        while (vk < vn && !isspace((unsigned char)val[vk]))
            vk++;
        char num[64];
        double d;
        if (!name_len || !vk || vk >= sizeof(num)) {
            hp_err_printf(err, "%s:%zu: expected NAME VALUE, NAME{labels} VALUE or NAME : VALUE",
                          origin, line);
            rc = HP_EPARSE;
            goto out;
        }
        memcpy(num, val, vk);
        num[vk] = '\0';
        /* bvar pages hold non-numeric vars too; Prometheus holds NaN/Inf. */
        if (hp_parse_double(num, &d) < 0 || !isfinite(d))
            continue;
        if (n + 2 > FIGURES_MAX) {
            hp_err_printf(err, "%s:%zu: more than %d figures", origin, line, FIGURES_MAX);
            rc = HP_ETOOBIG;
            goto out;
        }
        /* The series as written (as the collector stores it, labels and
         * all) and, when it has labels, the bare metric name too. */
        size_t lens[2] = { series_len, name_len };
        for (int w = 0; w < (series_len > name_len ? 2 : 1); w++) {
            const char *name = hp_strtab_intern(&names, s, lens[w]);
            uint32_t i;
            if (!hp_map64_put(&index, (uint64_t)(uintptr_t)name, (uint32_t)n, &i)) {
                v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
                n++;
            }
            v[i] = (struct query_figure){ name, d }; /* later duplicates win */
        }
    }
    struct query_figure *res = hp_arena_alloc(arena, (n ? n : 1) * sizeof(*res));
    if (n)
        memcpy(res, v, n * sizeof(*res));
    *ret = res;
    *ret_n = n;
out:
    free(v);
    hp_map64_release(&index);
    hp_strtab_release(&names);
    return rc;
}

/* ---- the report ---- */

const char *query_verdict_name(enum query_verdict v)
{
    switch (v) {
    case QUERY_VERDICT_CONSISTENT:
        return "consistent";
    case QUERY_VERDICT_UNDER:
        return "tracker under-counts";
    case QUERY_VERDICT_OVER:
        return "tracker over-counts";
    case QUERY_VERDICT_IDLE_LEAK:
        return "possible leak: tracker says idle";
    case QUERY_VERDICT_NO_TRACKER:
        return "no tracker figure";
    }
    return "?";
}

/* First alternative whose terms are all present; its sum. */
static bool alts_eval(const struct rule_alts *a, const struct query_figure *figs, size_t nfigs,
                      double *ret, const char **ret_text)
{
    for (size_t i = 0; i < a->n; i++) {
        double sum = 0;
        size_t k;
        for (k = 0; k < a->v[i].nterms; k++) {
            double x;
            if (!query_figure_find(figs, nfigs, a->v[i].terms[k], &x))
                break;
            sum += x;
        }
        if (k == a->v[i].nterms) {
            *ret = sum;
            *ret_text = a->v[i].text;
            return true;
        }
    }
    return false;
}

struct disc_priv {
    struct hp_arena arena; /* copies of rule strings: the report outlives the rules */
};

static const char *keep(struct disc_priv *pv, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *d = hp_arena_alloc(&pv->arena, n + 1);
    memcpy(d, s, n + 1);
    return d;
}

static const char *keepf(struct disc_priv *pv, const char *fmt, ...) HP_PRINTF(2, 3);
static const char *keepf(struct disc_priv *pv, const char *fmt, ...)
{
    struct hp_buf b = HP_BUF_INIT(0);
    va_list ap;
    va_start(ap, fmt);
    hp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    const char *r = keep(pv, b.data ? b.data : "");
    hp_buf_release(&b);
    return r;
}

/* Each verdict in one sentence with the figures it rests on: what the API's
 * "why" carries for the UI (the same sentences as query/README.md). */
static const char *row_why(struct disc_priv *pv, const struct query_discrepancy *d,
                           const struct query_discrepancy_row *r, bool uncategorized)
{
    char h[40], t[40], g[40], s[40];
    hp_fmt_bytes(r->heap, h, sizeof(h));
    if (uncategorized)
        return keepf(pv, "%s of heap is in stacks no category's frame pattern matches, so no "
                         "tracker is compared with it.", h);
    if (r->verdict == QUERY_VERDICT_NO_TRACKER)
        return keepf(pv, "The node reported none of the figures the rules name for %s, so the "
                         "%s of heap in its stacks cannot be compared with a tracker.",
                     r->category, h);
    hp_fmt_bytes(r->tracker, t, sizeof(t));
    hp_fmt_bytes(fabs(r->gap), g, sizeof(g));
    hp_fmt_bytes(r->allowance, s, sizeof(s));
    const char *noise = d->heap_sigma > 0 ? "the heap figure's sampling noise"
                                          : "(no sampling noise: every allocation recorded)";
    switch (r->verdict) {
    case QUERY_VERDICT_CONSISTENT:
        return keepf(pv, "The tracker (%s) says %s and the heap holds %s: the gap of %s is within "
                         "the allowance of %s (%s, the tolerance share of the larger side, or the "
                         "floor scaled to the process), so they agree.",
                     r->tracker_name, t, h, g, s, noise);
    case QUERY_VERDICT_UNDER:
        return keepf(pv, "Stacks of this category hold %s of heap but the tracker (%s) counts "
                         "%s: %s more than it says, beyond the allowance of %s, so the tracker "
                         "misses allocations made on these paths.",
                     h, r->tracker_name, t, g, s);
    case QUERY_VERDICT_OVER:
        return keepf(pv, "The tracker (%s) says %s but stacks of this category hold only %s of "
                         "heap: %s more than the heap shows, beyond the allowance of %s (memory "
                         "allocated before profiling was active, outside jemalloc, or reserved "
                         "rather than used).",
                     r->tracker_name, t, h, g, s);
    case QUERY_VERDICT_IDLE_LEAK:
        return keepf(pv, "The tracker (%s) says this category is idle (%s) while its stacks hold "
                         "%s of heap: memory that stayed after the work ended, a possible leak.",
                     r->tracker_name, t, h);
    case QUERY_VERDICT_NO_TRACKER:
        break;
    }
    return NULL;
}

static void top_add(struct query_discrepancy_row *row, const char *name, double bytes)
{
    /* Keep the three frames holding the most; merge repeats. */
    for (int i = 0; i < 3; i++)
        if (row->top_frames[i] == name) {
            row->top_bytes[i] += bytes;
            goto sort;
        }
    if (row->top_frames[2] && row->top_bytes[2] >= bytes)
        return;
    row->top_frames[2] = name;
    row->top_bytes[2] = bytes;
sort:
    for (int i = 2; i > 0; i--)
        if (row->top_frames[i] &&
            (!row->top_frames[i - 1] || row->top_bytes[i] > row->top_bytes[i - 1])) {
            const char *tn = row->top_frames[i];
            double tb = row->top_bytes[i];
            row->top_frames[i] = row->top_frames[i - 1];
            row->top_bytes[i] = row->top_bytes[i - 1];
            row->top_frames[i - 1] = tn;
            row->top_bytes[i - 1] = tb;
        }
}

int query_discrepancy_build(const struct query_folded *f, const struct query_figure *figs,
                            size_t nfigs, const struct query_rules *rules,
                            struct query_discrepancy **ret, struct hp_buf *err)
{
    struct query_discrepancy *d = hp_xcalloc(1, sizeof(*d));
    struct disc_priv *pv = hp_xcalloc(1, sizeof(*pv));
    d->priv = pv;
    hp_arena_init(&pv->arena);
    d->rules_kind = rules->kind;
    size_t nc = rules->ncats;
    d->nrows = nc + 1;
    d->rows = hp_xcalloc(d->nrows, sizeof(*d->rows));
    double *var = hp_xcalloc(d->nrows, sizeof(*var));
    const int v = PV_INUSE_SPACE;

    /* Per distinct frame name: the first matching category (+1), 0 none.
     * Names are interned in f, so a pointer map caches the regex work. */
    struct hp_map64 memo;
    hp_map64_init(&memo);
    for (size_t ei = 0; ei < f->nentries; ei++) {
        const struct query_fold_entry *e = &f->entries[ei];
        const char *const *names = query_fold_frames(f, e);
        uint32_t cat = 0;
        const char *frame = e->n ? names[e->n - 1] : "";
        for (uint32_t k = e->n; k-- > 0 && !cat;) {
            uint32_t c;
            if (!hp_map64_get(&memo, (uint64_t)(uintptr_t)names[k], &c)) {
                c = 0;
                for (size_t i = 0; i < nc && !c; i++)
                    if (rules->cats[i].has_re &&
                        regexec(&rules->cats[i].re, names[k], 0, NULL, 0) == 0)
                        c = (uint32_t)i + 1;
                (void)hp_map64_put(&memo, (uint64_t)(uintptr_t)names[k], c, &c);
            }
            if (c) {
                cat = c;
                frame = names[k];
            }
        }
        size_t row = cat ? cat - 1 : nc;
        d->rows[row].heap += e->value[v];
        var[row] += e->var[v];
        top_add(&d->rows[row], frame, e->value[v]);
    }
    hp_map64_release(&memo);

    d->heap_total = f->total[v];
    double heap_var = 0;
    for (size_t i = 0; i < d->nrows; i++)
        heap_var += var[i];
    d->heap_sigma = sqrt(heap_var);

    double tracked = NAN;
    const char *tracked_name = NULL;
    if (!alts_eval(&rules->ladder[LK_TRACKED], figs, nfigs, &tracked, &tracked_name)) {
        /* No overall figure: the sum of the categories' trackers. */
        double sum = 0;
        bool any = false;
        for (size_t i = 0; i < nc; i++) {
            double x;
            const char *t;
            if (alts_eval(&rules->cats[i].trackers, figs, nfigs, &x, &t))
                sum += x, any = true;
        }
        if (any) {
            tracked = sum;
            tracked_name = "sum of category trackers";
        }
    }
    d->tracked_total = tracked;
    d->tracked_name = keep(pv, tracked_name);
    /* The floor under which a gap does not matter scales with the process:
     * 1 MiB is noise on a 60 GiB BE and everything on a 2 MiB one. */
    double process = d->heap_total, rss;
    const char *rss_name;
    if (alts_eval(&rules->ladder[LK_RSS], figs, nfigs, &rss, &rss_name) && rss > process)
        process = rss;
    double floor = HP_MIN(rules->floor_bytes, rules->floor_share * process);

    for (size_t i = 0; i < d->nrows; i++) {
        struct query_discrepancy_row *r = &d->rows[i];
        r->heap_sigma = sqrt(var[i]);
        r->heap_share = d->heap_total > 0 ? r->heap / d->heap_total : 0;
        r->tracker = NAN;
        r->tracker_share = NAN;
        r->gap = NAN;
        r->allowance = NAN;
        if (i == nc) {
            r->category = "uncategorized";
            r->description = "stacks matching no category";
            r->verdict = QUERY_VERDICT_NO_TRACKER;
            continue;
        }
        const struct rule_cat *c = &rules->cats[i];
        r->category = keep(pv, c->name);
        r->description = c->description ? keep(pv, c->description) : "";
        double x;
        const char *t;
        if (!alts_eval(&c->trackers, figs, nfigs, &x, &t)) {
            r->verdict = QUERY_VERDICT_NO_TRACKER;
            continue;
        }
        r->tracker = x;
        r->tracker_name = keep(pv, t);
        r->tracker_share = tracked > 0 ? x / tracked : NAN;
        r->gap = r->heap - x;
        /* Consistent when the gap is within the heap figure's sampling
         * noise (none for a profile that records every allocation), the
         * tolerance, or the process-scaled floor. */
        double slack = HP_MAX(3 * r->heap_sigma,
                              HP_MAX(rules->tolerance * HP_MAX(r->heap, x), floor));
        r->allowance = slack;
        if (c->idle && x <= rules->idle_share * d->heap_total && r->heap > slack &&
            r->heap >= 5 * rules->idle_share * d->heap_total)
            r->verdict = QUERY_VERDICT_IDLE_LEAK;
        else if (fabs(r->gap) <= slack)
            r->verdict = QUERY_VERDICT_CONSISTENT;
        else
            r->verdict = r->gap > 0 ? QUERY_VERDICT_UNDER : QUERY_VERDICT_OVER;
    }
    free(var);
    for (size_t i = 0; i < d->nrows; i++)
        d->rows[i].why = row_why(pv, d, &d->rows[i], i == nc);
    const struct query_discrepancy_row *q = query_discrepancy_find(d, "query");
    if (q && q->verdict == QUERY_VERDICT_UNDER) {
        char a[40], b[40];
        d->query_tracker_inaccurate = q;
        d->finding_why = keepf(pv,
                               "The query tracker (%s) accounts for %s while stacks with "
                               "query-operator frames (Agg, Join, Filter, Sort, Scan) hold %s of "
                               "heap, beyond noise: the Doris guide's test says the query tracker "
                               "is inaccurate.",
                               q->tracker_name ? q->tracker_name : "-",
                               hp_fmt_bytes(q->tracker, a, sizeof(a)),
                               hp_fmt_bytes(q->heap, b, sizeof(b)));
    }

    /* The ladder. */
    static const char *const gap_names[] = {
        NULL,
        "memory outside jemalloc (other allocators, mmap, code and stacks)",
        "dirty pages not yet purged and allocator metadata",
        "fragmentation inside active pages (size classes, partly used slabs)",
        NULL, /* heap profile: sampled or exact, below */
        "untracked allocations (memory no tracker counts)",
    };
    struct {
        const char *name;
        int key; /* ladder key, or -1 for the heap profile */
    } steps[] = { { "rss", LK_RSS },
                  { "jemalloc_resident", LK_RESIDENT },
                  { "jemalloc_active", LK_ACTIVE },
                  { "jemalloc_allocated", LK_ALLOCATED },
                  { "heap_profile", -1 },
                  { "tracked", LK_TRACKED } };
    double prev = NAN;
    size_t prev_i = 0;
    for (size_t i = 0; i < HP_ARRAY_SIZE(steps); i++) {
        struct query_ladder_step *st = &d->ladder[d->nladder++];
        st->name = steps[i].name;
        st->value = NAN;
        st->gap = NAN;
        if (steps[i].key < 0) {
            st->value = d->heap_total;
            st->figure = "heap profile total (un-sampled)";
        } else if (steps[i].key == LK_TRACKED) {
            st->value = tracked;
            st->figure = d->tracked_name;
        } else {
            const char *t;
            double x;
            if (alts_eval(&rules->ladder[steps[i].key], figs, nfigs, &x, &t)) {
                st->value = x;
                st->figure = keep(pv, t);
            }
        }
        if (isnan(st->value))
            continue;
        if (!isnan(prev)) {
            st->gap = prev - st->value;
            /* Steps without a figure in between: the gap holds all of
             * theirs. */
            struct hp_buf names = HP_BUF_INIT(0);
            for (size_t k = prev_i + 1; k <= i; k++) {
                /* Only a sampled profile has sampling error; one that
                 * records every allocation misses only what was allocated
                 * before profiling was activated. */
                const char *gn = gap_names[k]
                                     ? gap_names[k]
                                     : d->heap_sigma > 0
                                           ? "sampling error, and allocations made before "
                                             "profiling was active"
                                           : "allocations made before profiling was active (this "
                                             "profile records every allocation: no sampling error)";
                hp_buf_printf(&names, "%s%s", k > prev_i + 1 ? "; " : "", gn);
            }
            /* Each step holds the one below it (RSS >= resident >= active
             * >= allocated >= the profile; the trackers count a part of
             * the heap). A lower step larger than its upper one, beyond the
             * heap's noise and 1% of jitter, means figures that cannot both
             * be right: taken at different moments, or a metric that is
             * not what its name says. */
            bool heapish = steps[i].key < 0 || steps[prev_i].key < 0;
            double allow = (heapish ? 2 * d->heap_sigma : 0) + 0.01 * HP_MAX(prev, st->value);
            st->inconsistent = st->gap < -allow;
            char *dst = hp_arena_alloc(&pv->arena, names.len + 1);
            memcpy(dst, names.data, names.len);
            dst[names.len] = '\0';
            st->gap_name = dst;
            hp_buf_release(&names);
        }
        prev = st->value;
        prev_i = i;
    }
    {
        double x;
        const char *t;
        if (alts_eval(&rules->ladder[LK_METADATA], figs, nfigs, &x, &t)) {
            struct query_ladder_step *st = &d->ladder[d->nladder++];
            st->name = "jemalloc_metadata";
            st->figure = keep(pv, t);
            st->value = x;
            st->gap_name = "part of jemalloc_resident: the allocator's own bookkeeping";
            st->gap = NAN;
        }
    }
    (void)err;
    *ret = d;
    return 0;
}

void query_discrepancy_free(struct query_discrepancy *d)
{
    if (!d)
        return;
    struct disc_priv *pv = d->priv;
    if (pv) {
        hp_arena_release(&pv->arena);
        free(pv);
    }
    free(d->rows);
    free(d);
}

const struct query_discrepancy_row *query_discrepancy_find(const struct query_discrepancy *d,
                                                          const char *category)
{
    for (size_t i = 0; i < d->nrows; i++)
        if (strcmp(d->rows[i].category, category) == 0)
            return &d->rows[i];
    return NULL;
}

static const char *fmt_opt(double x, char *buf, size_t n)
{
    if (isnan(x))
        return "-";
    return hp_fmt_bytes(x, buf, n);
}

static const char *fmt_pct(double x, char *buf, size_t n)
{
    if (isnan(x))
        return "-";
    snprintf(buf, n, "%.1f%%", 100.0 * x);
    return buf;
}

int query_render_discrepancy_text(const struct query_discrepancy *d, const char *node,
                                  struct hp_buf *out)
{
    char a[40], b[40], c[40], e[40], g[40];
    if (d->snap.id > 0 || d->snap.path) {
        char lb[400];
        hp_buf_printf(out, "%s\n", query_snapref_label(&d->snap, lb, sizeof(lb)));
    }
    hp_buf_printf(out, "Node %s: heap profile %s (+/-%s at 2 sigma), tracked %s%s%s%s\n",
                  node ? node : "(file)", hp_fmt_bytes(d->heap_total, a, sizeof(a)),
                  hp_fmt_bytes(2 * d->heap_sigma, b, sizeof(b)),
                  fmt_opt(d->tracked_total, c, sizeof(c)), d->tracked_name ? " (" : "",
                  d->tracked_name ? d->tracked_name : "", d->tracked_name ? ")" : "");
    hp_buf_printf(out, "Rules: %s\n\n",
                  d->rules_kind ? d->rules_kind : "Doris and StarRocks names (no kind known)");
    hp_buf_printf(out, "%-14s %12s %8s %12s %8s %12s  %s\n", "category", "tracker", "share",
                  "heap", "share", "gap", "verdict");
    for (size_t i = 0; i < d->nrows; i++) {
        const struct query_discrepancy_row *r = &d->rows[i];
        if (i == d->nrows - 1 && r->heap == 0)
            continue;
        char gap[40];
        if (isnan(r->gap))
            snprintf(gap, sizeof(gap), "-");
        else
            qa_fmt_signed(PV_INUSE_SPACE, r->gap, gap, sizeof(gap));
        hp_buf_printf(out, "%-14s %12s %8s %12s %8s %12s  %s\n", r->category,
                      fmt_opt(r->tracker, a, sizeof(a)), fmt_pct(r->tracker_share, b, sizeof(b)),
                      hp_fmt_bytes(r->heap, c, sizeof(c)), fmt_pct(r->heap_share, e, sizeof(e)),
                      gap, i == d->nrows - 1 ? "" : query_verdict_name(r->verdict));
        if (r->top_frames[0] && r->heap > 0) {
            hp_buf_puts(out, "               held in:");
            for (int k = 0; k < 3 && r->top_frames[k]; k++)
                hp_buf_printf(out, "%s %s %s", k ? "," : "", r->top_frames[k],
                              hp_fmt_bytes(r->top_bytes[k], g, sizeof(g)));
            hp_buf_puts(out, "\n");
        }
    }
    if (d->query_tracker_inaccurate) {
        const struct query_discrepancy_row *q = d->query_tracker_inaccurate;
        hp_buf_printf(out,
                      "\nFinding: the query tracker is inaccurate: it accounts for %s (%s) while "
                      "stacks with query-operator frames hold %s of heap (the Doris guide's "
                      "test)\n",
                      hp_fmt_bytes(q->tracker, a, sizeof(a)),
                      q->tracker_name ? q->tracker_name : "-", hp_fmt_bytes(q->heap, b, sizeof(b)));
    }
    hp_buf_puts(out, "\nLadder (each gap is what lies between a step and the one above):\n");
    for (size_t i = 0; i < d->nladder; i++) {
        const struct query_ladder_step *st = &d->ladder[i];
        hp_buf_printf(out, "  %-20s %12s", st->name, fmt_opt(st->value, a, sizeof(a)));
        if (st->figure)
            hp_buf_printf(out, "  (%s)", st->figure);
        else if (isnan(st->value))
            hp_buf_puts(out, "  (no figure)");
        hp_buf_puts(out, "\n");
        /* The gap to the step above, printed between the two; figures
         * that cannot both be right are flagged, not subtracted. */
        if (!isnan(st->gap) && st->inconsistent) {
            const struct query_ladder_step *up = &d->ladder[i - 1];
            for (size_t k = i; k-- > 0;)
                if (!isnan(d->ladder[k].value)) {
                    up = &d->ladder[k];
                    break;
                }
            hp_buf_printf(out,
                          "  %-20s %12s  INCONSISTENT: %s %s (%s) is above %s %s (%s); these "
                          "figures cannot both be right (taken at different moments, or a "
                          "metric that is not what its name says)\n",
                          "  gap above", "?", st->name, hp_fmt_bytes(st->value, b, sizeof(b)),
                          st->figure ? st->figure : "-", up->name,
                          hp_fmt_bytes(up->value, c, sizeof(c)), up->figure ? up->figure : "-");
        } else if (!isnan(st->gap)) {
            hp_buf_printf(out, "  %-20s %12s  %s\n", "  gap above",
                          hp_fmt_bytes(st->gap, b, sizeof(b)), st->gap_name);
        }
    }
    return 0;
}

static json_t *jnum(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

int query_render_discrepancy_json(const struct query_discrepancy *d, const char *node,
                                  struct hp_buf *out)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *root = json_object();
    json_object_set_new(root, "node", node ? json_string(query_utf8_clean(&tmp, node))
                                           : json_null());
    if (d->snap.id > 0 || d->snap.path)
        json_object_set_new(root, "snapshot", query_snapref_json(&d->snap));
    json_object_set_new(root, "rules_kind",
                        d->rules_kind ? json_string(d->rules_kind) : json_null());
    json_object_set_new(root, "heap_total", json_real(d->heap_total));
    json_object_set_new(root, "heap_sigma", json_real(d->heap_sigma));
    json_object_set_new(root, "tracked_total", jnum(d->tracked_total));
    json_t *cats = json_array();
    for (size_t i = 0; i < d->nrows; i++) {
        const struct query_discrepancy_row *r = &d->rows[i];
        json_t *j = json_object();
        json_object_set_new(j, "category", json_string(r->category));
        json_object_set_new(j, "description", json_string(query_utf8_clean(&tmp, r->description)));
        json_object_set_new(j, "tracker_figure",
                            r->tracker_name ? json_string(query_utf8_clean(&tmp, r->tracker_name))
                                            : json_null());
        json_object_set_new(j, "tracker", jnum(r->tracker));
        json_object_set_new(j, "tracker_share", jnum(r->tracker_share));
        json_object_set_new(j, "heap", json_real(r->heap));
        json_object_set_new(j, "heap_sigma", json_real(r->heap_sigma));
        json_object_set_new(j, "heap_share", json_real(r->heap_share));
        json_object_set_new(j, "gap", jnum(r->gap));
        json_object_set_new(j, "verdict", json_string(query_verdict_name(r->verdict)));
        json_object_set_new(j, "why", r->why ? json_string(query_utf8_clean(&tmp, r->why))
                                             : json_null());
        json_object_set_new(j, "allowance", jnum(r->allowance));
        json_t *top = json_array();
        for (int k = 0; k < 3 && r->top_frames[k]; k++) {
            json_t *t = json_object();
            json_object_set_new(t, "frame", json_string(query_utf8_clean(&tmp, r->top_frames[k])));
            json_object_set_new(t, "bytes", json_real(r->top_bytes[k]));
            json_array_append_new(top, t);
        }
        json_object_set_new(j, "held_in", top);
        json_array_append_new(cats, j);
    }
    json_object_set_new(root, "categories", cats);
    json_t *lad = json_array();
    for (size_t i = 0; i < d->nladder; i++) {
        const struct query_ladder_step *st = &d->ladder[i];
        json_t *j = json_object();
        json_object_set_new(j, "step", json_string(st->name));
        json_object_set_new(j, "figure",
                            st->figure ? json_string(query_utf8_clean(&tmp, st->figure))
                                       : json_null());
        json_object_set_new(j, "value", jnum(st->value));
        json_object_set_new(j, "gap_from_previous", jnum(st->gap));
        json_object_set_new(j, "gap_is", st->gap_name ? json_string(st->gap_name) : json_null());
        json_object_set_new(j, "inconsistent", json_boolean(st->inconsistent));
        if (st->inconsistent && i > 0) {
            /* The step above with a figure: what this one cannot exceed. */
            const struct query_ladder_step *up = &d->ladder[i - 1];
            for (size_t k = i; k-- > 0;)
                if (!isnan(d->ladder[k].value)) {
                    up = &d->ladder[k];
                    break;
                }
            char a[40], b[40];
            struct hp_buf w = HP_BUF_INIT(0);
            hp_buf_printf(&w, "%s %s (%s) is above %s %s (%s), which holds it: the two figures "
                              "cannot both be right (taken at different moments, or a metric "
                              "that is not what its name says), so no gap is computed.",
                          st->name, hp_fmt_bytes(st->value, a, sizeof(a)),
                          st->figure ? st->figure : "-", up->name,
                          hp_fmt_bytes(up->value, b, sizeof(b)), up->figure ? up->figure : "-");
            json_object_set_new(j, "why", json_string(query_utf8_clean(&tmp, w.data)));
            hp_buf_release(&w);
        }
        json_array_append_new(lad, j);
    }
    json_object_set_new(root, "ladder", lad);
    json_t *findings = json_array();
    if (d->query_tracker_inaccurate) {
        const struct query_discrepancy_row *q = d->query_tracker_inaccurate;
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string("query_tracker_inaccurate"));
        json_object_set_new(j, "tracker_figure",
                            q->tracker_name ? json_string(query_utf8_clean(&tmp, q->tracker_name))
                                            : json_null());
        json_object_set_new(j, "tracker", jnum(q->tracker));
        json_object_set_new(j, "heap", json_real(q->heap));
        json_object_set_new(j, "why", json_string(query_utf8_clean(&tmp, d->finding_why)));
        json_array_append_new(findings, j);
    }
    json_object_set_new(root, "findings", findings);
    int r = qa_json_emit(root, out);
    hp_arena_release(&tmp); /* after: names may point into it */
    return r;
}
