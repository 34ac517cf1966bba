/* Declarations shared by the files of store/ and by nothing else: the
 * connection object, the prepared statement table, the packing helpers and
 * the writer's caches. Only files in store/ (and store's own tests, which
 * check the on-disk format) include this. */
#ifndef HP_STORE_INTERNAL_H
#define HP_STORE_INTERNAL_H

#include <sqlite3.h>
#include <zstd.h>

#include "store/backend.h"
#ifdef STORE_BACKEND_PG
#include "store/pg-shim.h"
#endif
#include "store/store.h"

/* Delta chains (raw_dumps, sample_sets, function_totals_rest): each row of a node is compressed
 * against the node's previous row; after STORE_CHAIN_MAX links the next row
 * is compressed against the chain's keyframe (a standalone row) instead, so
 * reading any one row decompresses at most STORE_CHAIN_MAX + 1 blobs. A new
 * keyframe starts when a delta stops paying. Readers refuse chains longer
 * than STORE_CHAIN_GUARD as corrupt (loops, hostile files). */
#define STORE_CHAIN_MAX 24
#define STORE_CHAIN_GUARD 64

/* "HPFL": PRAGMA application_id of every heapfleet database. */
#define STORE_APPLICATION_ID 0x4850464c

struct store_migration {
    int version;
    const char *name;
    const char *sql;
};
/* Generated at build time from store/migrations/ (store/embed.c). */
extern const struct store_migration store_migrations[];
extern const int store_nmigrations;

/* The snapshot columns that come from a parsed profile, as named parameters
 * that SNAP_INSERT and SNAP_REDERIVE share (write.c binds them in one
 * place, snapshot_bind_profile). */
#define STORE_SNAP_PROFILE_VALUES                                                              \
    ":format, :scaling, :period, :has_alloc, :time_hint_ns, :hint, :inuse_objects,"          \
    " :inuse_space, :alloc_objects, :alloc_space, :nsamples, :samples_id"

/* Every statement the store runs, prepared once per connection on first use
 * and always with bound parameters. */
#define STORE_STMT_MAP(X)                                                                      \
    X(BEGIN, "BEGIN IMMEDIATE")                                                                \
    X(DATA_VERSION, "PRAGMA data_version")                                                     \
    X(COMMIT, "COMMIT")                                                                        \
    X(ROLLBACK, "ROLLBACK")                                                                    \
    X(SAVEPOINT, "SAVEPOINT hp_batch_item")                                                    \
    X(SAVEPOINT_RELEASE, "RELEASE hp_batch_item")                                              \
    X(SAVEPOINT_ROLLBACK, "ROLLBACK TO hp_batch_item")                                         \
    X(NODE_UPSERT,                                                                             \
      "INSERT INTO nodes(name, kind, address, labels, created_at, updated_at)"                 \
      " VALUES (?1, coalesce(?2, ''), coalesce(?3, ''), coalesce(?4, ''), ?5, ?5)"             \
      " ON CONFLICT(name) DO UPDATE SET kind = coalesce(?2, kind),"                            \
      " address = coalesce(?3, address), labels = coalesce(?4, labels), updated_at = ?5"       \
      " RETURNING id")                                                                         \
    X(NODE_FIND, "SELECT id FROM nodes WHERE name = ?1")                                       \
    X(RAW_FIND, "SELECT id, size FROM raw_dumps WHERE hash = ?1")                              \
    X(RAW_FIRST_HASH, "SELECT hash FROM raw_dumps ORDER BY id LIMIT 1")                        \
    X(RAW_INSERT, "INSERT INTO raw_dumps(hash, size, base_id, data) VALUES (?1, ?2, ?3, ?4)")  \
    X(RAW_GET, "SELECT size, base_id, data FROM raw_dumps WHERE id = ?1")                      \
    X(RAW_EXISTS, "SELECT 1 FROM raw_dumps WHERE id = ?1")                                     \
    X(SS_EXISTS, "SELECT 1 FROM sample_sets WHERE id = ?1")                                    \
    X(SS_INSERT, "INSERT INTO sample_sets(size, base_id, data) VALUES (?1, ?2, ?3)")           \
    X(SS_GET, "SELECT size, base_id, data FROM sample_sets WHERE id = ?1")                     \
    X(NODE_LAST_BLOBS,                                                                         \
      "SELECT raw_id, samples_id, (SELECT r.snapshot_id FROM function_totals_rest r"            \
      " WHERE r.snapshot_id = snapshots.id) FROM snapshots WHERE node_id = ?1"                 \
      " AND status = 'ok' ORDER BY taken_at DESC, id DESC LIMIT 1")                            \
    X(RAW_LINK, "SELECT base_id, length(data) FROM raw_dumps WHERE id = ?1")                   \
    X(SS_LINK, "SELECT base_id, length(data) FROM sample_sets WHERE id = ?1")                  \
    X(RAW_REFS, "SELECT EXISTS (SELECT 1 FROM snapshots WHERE raw_id = ?1)")                   \
    X(SS_REFS, "SELECT EXISTS (SELECT 1 FROM snapshots WHERE samples_id = ?1)")                \
    X(RAW_CHILDREN, "SELECT id FROM raw_dumps WHERE base_id = ?1")                             \
    X(SS_CHILDREN, "SELECT id FROM sample_sets WHERE base_id = ?1")                            \
    X(RAW_REBASE, "UPDATE raw_dumps SET base_id = ?2, data = ?3 WHERE id = ?1")                \
    X(SS_REBASE, "UPDATE sample_sets SET base_id = ?2, data = ?3 WHERE id = ?1")               \
    X(RAW_DELETE, "DELETE FROM raw_dumps WHERE id = ?1")                                       \
    X(SS_DELETE, "DELETE FROM sample_sets WHERE id = ?1")                                      \
    X(OBJECT_FIND, "SELECT id FROM objects WHERE key = ?1")                                    \
    X(OBJECT_INSERT, "INSERT INTO objects(key, build_id, path) VALUES (?1, ?2, ?3)")           \
    X(FUNCTION_FIND, "SELECT id FROM functions WHERE name = ?1")                               \
    X(FUNCTION_INSERT, "INSERT INTO functions(name) VALUES (?1)")                              \
    X(FILE_FIND, "SELECT id FROM files WHERE path = ?1")                                       \
    X(FILE_INSERT, "INSERT INTO files(path) VALUES (?1)")                                      \
    X(LOC_FIND, "SELECT id, flags, frames_packed IS NOT NULL FROM locations"                   \
                " WHERE object_id = ?1 AND address = ?2")                                      \
    X(LOC_INSERT, "INSERT INTO locations(object_id, address, flags, frames_packed)"            \
                  " VALUES (?1, ?2, ?3, ?4)")                                                  \
    X(LOC_UPDATE, "UPDATE locations SET flags = ?2, frames_packed = ?3 WHERE id = ?1")        \
    X(STACK_FIND, "SELECT id FROM stacks WHERE hash = ?1")                                     \
    X(STACK_RANGE, "SELECT id, hash FROM stacks WHERE id BETWEEN ?1 AND ?2")                   \
    X(STACK_INSERT, "INSERT INTO stacks(hash, depth, locs_packed) VALUES (?1, ?2, ?3)")        \
    X(SNAP_INSERT,                                                                             \
      "INSERT INTO snapshots(node_id, taken_at, status, error, format, scaling, period,"        \
      " has_alloc, time_hint_ns, hint, inuse_objects, inuse_space, alloc_objects,"             \
      " alloc_space, nsamples, samples_id, raw_id, raw_size, source, prof_active, fetch_ms,"    \
      " parse_ms, symbolize_ms, store_ms)"                                                     \
      " VALUES (:node_id, :taken_at, :status, :error, " STORE_SNAP_PROFILE_VALUES ","          \
      " :raw_id, :raw_size, :source, :prof_active, :fetch_ms, :parse_ms, :symbolize_ms,"       \
      " :store_ms)")                                                                           \
    X(SNAP_REDERIVE,                                                                           \
      "UPDATE snapshots SET status = 'ok', error = NULL, (format, scaling, period, has_alloc,"  \
      " time_hint_ns, hint, inuse_objects, inuse_space, alloc_objects, alloc_space, nsamples," \
      " samples_id) = (" STORE_SNAP_PROFILE_VALUES ") WHERE id = :id")                         \
    X(SNAP_GET_RAW, "SELECT raw_id, samples_id, node_id FROM snapshots WHERE id = ?1")        \
    X(FT_INSERT, "INSERT INTO function_totals(snapshot_id, function_id, flat_space,"           \
                 " cum_space, flat_objects, cum_objects) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")     \
    X(FT_DELETE, "DELETE FROM function_totals WHERE snapshot_id = ?1")                         \
    X(FTR_INSERT, "INSERT INTO function_totals_rest(snapshot_id, size, base_id, data)"         \
                  " VALUES (?1, ?2, ?3, ?4)")                                                  \
    X(FTR_DELETE, "DELETE FROM function_totals_rest WHERE snapshot_id = ?1")                   \
    X(FTR_GET, "SELECT size, base_id, data FROM function_totals_rest WHERE snapshot_id = ?1")  \
    X(FTR_EXISTS, "SELECT 1 FROM function_totals_rest WHERE snapshot_id = ?1")                 \
    X(FTR_LINK, "SELECT base_id, length(data) FROM function_totals_rest WHERE snapshot_id = ?1") \
    X(FTR_REFS, "SELECT EXISTS (SELECT 1 FROM snapshots WHERE id = ?1)")                       \
    X(FTR_CHILDREN, "SELECT snapshot_id FROM function_totals_rest WHERE base_id = ?1")         \
    X(FTR_REBASE, "UPDATE function_totals_rest SET base_id = ?2, data = ?3"                    \
                  " WHERE snapshot_id = ?1")                                                   \
    X(FUNCTION_NAME, "SELECT name FROM functions WHERE id = ?1")                               \
    X(FUNCTIONS_ALL, "SELECT id, name FROM functions ORDER BY id")                             \
    X(STAT_NAME_FIND, "SELECT id FROM stat_names WHERE name = ?1 AND unit = ?2")               \
    X(STAT_NAME_INSERT, "INSERT INTO stat_names(name, unit) VALUES (?1, ?2)")                  \
    X(STAT_INSERT, "INSERT INTO node_stats(snapshot_id, seq, stat_id, value)"                  \
                   " VALUES (?1, ?2, ?3, ?4)")                                                 \
    X(STAT_UPDATE, "UPDATE node_stats SET value = ?3 WHERE snapshot_id = ?1 AND stat_id = ?2"  \
                   " RETURNING seq")                                                           \
    X(STAT_APPEND, "INSERT INTO node_stats(snapshot_id, seq, stat_id, value)"                  \
                   " SELECT ?1, COALESCE(MAX(seq) + 1, 0), ?2, ?3 FROM node_stats"             \
                   " WHERE snapshot_id = ?1")                                                  \
    X(SNAP_PROFILE, "SELECT status, samples_id FROM snapshots WHERE id = ?1")                   \
    X(STACKS_RANGE, "SELECT id, locs_packed FROM stacks WHERE id BETWEEN ?1 AND ?2"            \
                    " ORDER BY id")                                                            \
    X(LOCS_RANGE, "SELECT id, object_id, address, flags, frames_packed FROM locations"         \
                  " WHERE id BETWEEN ?1 AND ?2 ORDER BY id")                                   \
    X(FUNCS_RANGE, "SELECT id, name FROM functions WHERE id BETWEEN ?1 AND ?2 ORDER BY id")    \
    X(FILES_RANGE, "SELECT id, path FROM files WHERE id BETWEEN ?1 AND ?2 ORDER BY id")        \
    X(OBJECT_GET, "SELECT key, build_id, path FROM objects WHERE id = ?1")                     \
    X(SNAP_INFO,                                                                               \
      "SELECT s.id, s.node_id, n.name, s.taken_at, s.status, s.error, s.format, s.period,"     \
      " s.inuse_objects, s.inuse_space, s.alloc_objects, s.alloc_space, s.nsamples,"           \
      " s.raw_size, s.prof_active, s.fetch_ms, s.parse_ms, s.symbolize_ms, s.store_ms"         \
      " FROM snapshots s JOIN nodes n ON n.id = s.node_id WHERE s.id = ?1")                    \
    X(SNAP_LIST,                                                                               \
      "SELECT s.id, s.node_id, n.name, s.taken_at, s.status, s.error, s.format, s.period,"     \
      " s.inuse_objects, s.inuse_space, s.alloc_objects, s.alloc_space, s.nsamples,"           \
      " s.raw_size, s.prof_active, s.fetch_ms, s.parse_ms, s.symbolize_ms, s.store_ms"         \
      " FROM snapshots s JOIN nodes n ON n.id = s.node_id"                                     \
      " WHERE s.node_id = ?1 AND s.taken_at BETWEEN ?2 AND ?3 AND (?4 OR s.status = 'ok')"    \
      " ORDER BY s.taken_at, s.id")                                                            \
    X(SNAP_LIST_OK,                                                                            \
      "SELECT s.id, s.taken_at, s.inuse_objects, s.inuse_space, s.alloc_objects,"             \
      " s.alloc_space FROM snapshots s WHERE s.node_id = ?1 AND s.status = 'ok'"              \
      " AND s.taken_at BETWEEN ?2 AND ?3 ORDER BY s.taken_at, s.id")                           \
    X(NODE_NAME, "SELECT name FROM nodes WHERE id = ?1")                                       \
    X(NODES_LIST,                                                                              \
      "SELECT n.id, n.name, n.kind, n.address, n.labels,"                                      \
      " (SELECT count(*) FROM snapshots WHERE node_id = n.id),"                                \
      " l.taken_at, l.status, l.error, o.taken_at, o.id, o.inuse_objects, o.inuse_space,"      \
      " o.alloc_objects, o.alloc_space FROM nodes n"                                           \
      " LEFT JOIN snapshots l ON l.id = (SELECT id FROM snapshots WHERE node_id = n.id"        \
      "   ORDER BY taken_at DESC, id DESC LIMIT 1)"                                            \
      " LEFT JOIN snapshots o ON o.id = (SELECT id FROM snapshots WHERE node_id = n.id"        \
      "   AND status = 'ok' ORDER BY taken_at DESC, id DESC LIMIT 1)"                          \
      " ORDER BY n.name")                                                                      \
    X(SNAP_AT,                                                                                 \
      "SELECT id FROM snapshots WHERE node_id = ?1 AND status = 'ok' AND taken_at <= ?2"       \
      " ORDER BY taken_at DESC, id DESC LIMIT 1")                                              \
    X(SNAP_OLDEST,                                                                             \
      "SELECT id, taken_at FROM snapshots WHERE node_id = ?1 AND status = 'ok'"                \
      " ORDER BY taken_at, id LIMIT 1")                                                        \
    X(SNAP_OK_EXISTS, "SELECT status FROM snapshots WHERE id = ?1")                            \
    X(SNAP_BY_RAW,                                                                             \
      "SELECT id, taken_at FROM snapshots WHERE node_id = ?1 AND raw_id = ?2"                  \
      " AND status = 'ok' ORDER BY id LIMIT 1")                                                \
    X(SERIES_NODE,                                                                             \
      "SELECT s.id, s.taken_at, s.inuse_objects, s.inuse_space, s.alloc_objects,"              \
      " s.alloc_space, (SELECT st.value FROM node_stats st WHERE st.snapshot_id = s.id"        \
      "   AND st.stat_id IN (SELECT id FROM stat_names WHERE name = ?4) LIMIT 1)"              \
      " FROM snapshots s WHERE s.node_id = ?1 AND s.status = 'ok'"                             \
      " AND s.taken_at BETWEEN ?2 AND ?3 ORDER BY s.taken_at, s.id")                           \
    X(SERIES_FUNC,                                                                             \
      "SELECT s.id, s.taken_at, t.flat_space, t.cum_space, t.flat_objects, t.cum_objects"     \
      " FROM snapshots s LEFT JOIN function_totals t"                                          \
      "   ON t.snapshot_id = s.id AND t.function_id = ?4"                                      \
      " WHERE s.node_id = ?1 AND s.status = 'ok' AND s.taken_at BETWEEN ?2 AND ?3"             \
      " ORDER BY s.taken_at, s.id")                                                            \
    X(SERIES_SNAPS,                                                                            \
      "SELECT id, taken_at FROM snapshots WHERE node_id = ?1 AND status = 'ok'"                \
      " AND taken_at BETWEEN ?2 AND ?3 ORDER BY taken_at, id")                                 \
    X(FT_BY_SNAP,                                                                              \
      "SELECT function_id, flat_space, cum_space, flat_objects, cum_objects"                   \
      " FROM function_totals WHERE snapshot_id = ?1 ORDER BY function_id")                     \
    X(FS_SPAN_AT,                                                                              \
      "SELECT first_id, last_id, n, closed FROM function_series_spans"                         \
      " WHERE node_id = ?1 AND first_id <= ?2 ORDER BY first_id DESC LIMIT 1")                 \
    X(FS_SPAN_OPEN, "INSERT INTO function_series_spans(node_id, first_id, last_id, n, closed)"  \
                    " VALUES (?1, ?2, ?2, 1, 0)")                                              \
    X(FS_SPAN_SET, "UPDATE function_series_spans SET last_id = ?3, n = ?4, closed = ?5"        \
                   " WHERE node_id = ?1 AND first_id = ?2")                                    \
    X(FS_SPAN_DELETE, "DELETE FROM function_series_spans WHERE node_id = ?1 AND first_id = ?2") \
    X(FS_SPAN_STALE, "UPDATE function_series_spans SET closed = 2"                             \
                     " WHERE node_id = ?1 AND first_id = ?2")                                  \
    X(FS_SPANS_STALE,                                                                          \
      "SELECT first_id, last_id FROM function_series_spans WHERE node_id = ?1 AND closed = 2") \
    X(FS_SPAN_MEMBERS,                                                                         \
      "SELECT id FROM snapshots WHERE node_id = ?1 AND status = 'ok' AND id BETWEEN ?2 AND ?3" \
      " ORDER BY id")                                                                          \
    X(FS_SPANS,                                                                                \
      "SELECT first_id, last_id FROM function_series_spans WHERE node_id = ?1 AND closed = 1"  \
      " ORDER BY first_id")                                                                    \
    X(FS_INSERT, "INSERT INTO function_series(node_id, first_id, function_id, data)"           \
                 " VALUES (?1, ?2, ?3, ?4)")                                                   \
    X(FS_DELETE, "DELETE FROM function_series WHERE node_id = ?1 AND first_id = ?2")           \
    X(FS_GET, "SELECT data FROM function_series WHERE node_id = ?1 AND first_id = ?2"          \
              " AND function_id = ?3")                                                         \
    X(SS_SERIES_INSERT, "INSERT INTO stack_series(node_id, first_id, last_id, size, data)"      \
                        " VALUES (?1, ?2, ?3, ?4, ?5)")                                        \
    X(FS_SPANS_ALL, "SELECT first_id, last_id FROM function_series_spans WHERE node_id = ?1"   \
                    " ORDER BY first_id")                                                      \
    X(FS_NODE_IDS, "SELECT id FROM nodes ORDER BY id")                                         \
    X(SS_SERIES_DELETE_IN, "DELETE FROM stack_series WHERE node_id = ?1"                       \
                           " AND first_id BETWEEN ?2 AND ?3")                                  \
    X(SS_SERIES_SPANS_IN, "SELECT first_id, last_id FROM stack_series WHERE node_id = ?1"      \
                          " AND first_id BETWEEN ?2 AND ?3 ORDER BY first_id")                 \
    X(SS_SERIES_DROP_AT, "DELETE FROM stack_series WHERE node_id = ?1 AND first_id <= ?2"     \
                         " AND last_id >= ?2")                                                 \
    X(SS_SERIES_HAS, "SELECT last_id FROM stack_series WHERE node_id = ?1 AND first_id = ?2")  \
    X(SS_SERIES_GET, "SELECT size, data FROM stack_series WHERE node_id = ?1 AND first_id = ?2") \
    X(VIEW_PUT, "INSERT INTO stack_views(node_id, first_id, last_id, size, data)"              \
                " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (node_id) DO UPDATE SET"             \
                " first_id = excluded.first_id, last_id = excluded.last_id,"                   \
                " size = excluded.size, data = excluded.data")                                 \
    X(VIEW_GET, "SELECT first_id, last_id, size, data FROM stack_views WHERE node_id = ?1")     \
    X(VIEW_RANGE, "SELECT first_id, last_id FROM stack_views WHERE node_id = ?1")              \
    X(VIEW_DROP, "DELETE FROM stack_views WHERE node_id = ?1")                                 \
    X(VIEW_DROP_AT, "DELETE FROM stack_views WHERE node_id = ?1 AND first_id <= ?2"            \
                    " AND last_id >= ?2")                                                      \
    X(LOC_GEN_BUMP, "INSERT INTO loc_gens(object_id, gen) VALUES (?1, 1)"                      \
                    " ON CONFLICT (object_id) DO UPDATE SET gen = loc_gens.gen + 1")           \
    X(LOC_GEN_GET, "SELECT gen FROM loc_gens WHERE object_id = ?1")                            \
    X(SS_SERIES_SPANS, "SELECT first_id, last_id FROM stack_series WHERE node_id = ?1"         \
                       " ORDER BY first_id")                                                   \
    X(FT_LIST,                                                                                 \
      "SELECT t.function_id, f.name, t.flat_space, t.cum_space, t.flat_objects,"              \
      " t.cum_objects FROM function_totals t JOIN functions f ON f.id = t.function_id"         \
      " WHERE t.snapshot_id = ?1 ORDER BY t.cum_space DESC, f.name")                           \
    X(NODE_STATS_LIST,                                                                         \
      "SELECT st.snapshot_id, st.seq, st.stat_id, st.value FROM snapshots s"                   \
      " JOIN node_stats st ON st.snapshot_id = s.id"                                           \
      " WHERE s.node_id = ?1 AND s.taken_at BETWEEN ?2 AND ?3")                                \
    X(STAT_NAMES_RANGE, "SELECT id, name, unit FROM stat_names WHERE id BETWEEN ?1 AND ?2"     \
                        " ORDER BY id")                                                        \
    /* A node's statistics of up to 28 names (ids ?4-?31, -1 where none): */                 \
    /* rows of other names stay in SQLite (store_node_stats' filter). */                       \
    X(NODE_STATS_SOME,                                                                         \
      "SELECT st.snapshot_id, st.seq, st.stat_id, st.value FROM snapshots s"                   \
      " JOIN node_stats st ON st.snapshot_id = s.id"                                           \
      " WHERE s.node_id = ?1 AND s.taken_at BETWEEN ?2 AND ?3"                                 \
      " AND st.stat_id IN (?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "        \
      "?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)")            \
    X(STAT_NAMES_ALL, "SELECT id, name, unit FROM stat_names")                                 \
    X(STATS_LIST,                                                                              \
      "SELECT n.name, n.unit, st.value FROM node_stats st JOIN stat_names n"                   \
      " ON n.id = st.stat_id WHERE st.snapshot_id = ?1 ORDER BY st.seq")                       \
    X(RETAIN_OLD, "SELECT id FROM snapshots WHERE taken_at < ?1 ORDER BY id LIMIT ?2")         \
    X(RETAIN_THIN,                                                                             \
      "SELECT id FROM (SELECT id, status, row_number() OVER (PARTITION BY node_id,"            \
      " taken_at / 86400000, status = 'ok' ORDER BY taken_at DESC, id DESC) AS rn"             \
      " FROM snapshots WHERE taken_at < ?1) WHERE NOT (status = 'ok' AND rn = 1) LIMIT ?2")   \
    X(SNAP_DELETE, "DELETE FROM snapshots WHERE id = ?1 RETURNING raw_id, samples_id")        \
    X(STATS_DELETE, "DELETE FROM node_stats WHERE snapshot_id = ?1")                           \
    X(KEEP_CREATE, "CREATE TEMP TABLE IF NOT EXISTS keep(kind INTEGER NOT NULL,"               \
                   " id INTEGER NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID")             \
    X(SS_ALL,                                                                                  \
      "SELECT id, size, base_id, data, CASE WHEN EXISTS (SELECT 1 FROM snapshots"              \
      " WHERE samples_id = sample_sets.id) THEN 1 ELSE 0 END FROM sample_sets ORDER BY id")    \
    X(STACKS_ALL, "SELECT id, locs_packed FROM stacks ORDER BY id")                            \
    X(LOCS_ALL, "SELECT id, object_id, address, frames_packed FROM locations ORDER BY id")     \
    X(SYMCACHE_GET,                                                                            \
      "SELECT frames_packed FROM symbol_cache WHERE build_id = ?1 AND address = ?2")           \
    X(SYMCACHE_PUT,                                                                            \
      "INSERT OR REPLACE INTO symbol_cache(build_id, address, frames_packed, created_at)"      \
      " VALUES (?1, ?2, ?3, ?4)")                                                              \
    X(SYMFILE_UNLIST, "DELETE FROM symbol_files WHERE build_id = ?1")                         \
    X(SYMFILE_CHUNKS_DELETE, "DELETE FROM symbol_file_chunks WHERE build_id = ?1")             \
    X(SYMFILE_CHUNK_PUT,                                                                       \
      "INSERT INTO symbol_file_chunks(build_id, seq, size, data) VALUES (?1, ?2, ?3, ?4)")     \
    X(SYMFILE_CHUNK_GET,                                                                       \
      "SELECT size, data FROM symbol_file_chunks WHERE build_id = ?1 AND seq = ?2")            \
    X(SYMFILE_LIST_PUT,                                                                        \
      "INSERT INTO symbol_files(build_id, name, size, has_debug, nchunks, added_at)"           \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6)")                                                      \
    X(SYMFILE_LIST,                                                                            \
      "SELECT build_id, name, size, has_debug, nchunks, added_at FROM symbol_files"            \
      " ORDER BY build_id")

enum store_stmt_id {
#define STORE_STMT_ENUM(name, sql) STMT_##name,
    STORE_STMT_MAP(STORE_STMT_ENUM)
#undef STORE_STMT_ENUM
        STMT_COUNT
};

struct store_writer; /* write.c */

/* Whether node_id's stack view is current: it decompresses as far as its
 * objects' generations and they are the store's (1), or not: its
 * locations changed since (a later symbolization), or its bytes are
 * damaged (0). HP_ENOTFOUND: the node has none. Reads the view's first
 * bytes only (the objects come first). */
int store_view_current(struct store *s, int64_t node_id, struct hp_buf *err);

/* The engine behind a struct store (backend.h): each compilation of the
 * store's logic fills one of these; backend.c dispatches through it. */
struct store_backend {
    const char *name; /* "sqlite", "postgresql" */
    __typeof__(store_close) *close;
    __typeof__(store_check) *check;
    __typeof__(store_ping) *ping;
    __typeof__(store_usage_get) *usage_get;
    __typeof__(store_node_upsert) *node_upsert;
    __typeof__(store_node_find) *node_find;
    __typeof__(store_snapshot_insert) *snapshot_insert;
    __typeof__(store_snapshot_find_dump) *snapshot_find_dump;
    __typeof__(store_snapshot_attempt_record) *snapshot_attempt_record;
    __typeof__(store_snapshot_reindex) *snapshot_reindex;
    __typeof__(store_snapshot_stat_set) *snapshot_stat_set;
    __typeof__(store_snapshot_load) *snapshot_load;
    __typeof__(store_snapshots_samples) *snapshots_samples;
    __typeof__(store_stacks_load) *stacks_load;
    __typeof__(store_stacks_resolve) *stacks_resolve;
    __typeof__(store_snapshot_load_top) *snapshot_load_top;
    __typeof__(store_snapshot_raw) *snapshot_raw;
    __typeof__(store_snapshot_info) *snapshot_info;
    __typeof__(store_selector_resolve) *selector_resolve;
    __typeof__(store_nodes_list) *nodes_list;
    __typeof__(store_snapshots_list) *snapshots_list;
    __typeof__(store_snapshots_ok) *snapshots_ok;
    __typeof__(store_series_node) *series_node;
    __typeof__(store_function_totals) *function_totals;
    __typeof__(store_series_function) *series_function;
    __typeof__(store_functions_list) *functions_list;
    __typeof__(store_series_functions) *series_functions;
    __typeof__(store_snapshot_stats) *snapshot_stats;
    __typeof__(store_node_stats) *node_stats;
    __typeof__(store_sseries_spans) *sseries_spans;
    __typeof__(store_sseries_get) *sseries_get;
    __typeof__(store_stack_view_get) *stack_view_get;
    __typeof__(store_view_current) *view_current;
    __typeof__(store_read_begin) *read_begin;
    __typeof__(store_read_end) *read_end;
    __typeof__(store_retain) *retain;
    __typeof__(store_symcache_get) *symcache_get;
    __typeof__(store_symcache_put) *symcache_put;
    __typeof__(store_symfile_put) *symfile_put;
    __typeof__(store_symfiles_list) *symfiles_list;
    __typeof__(store_symfile_export) *symfile_export;
    __typeof__(store_batch_begin) *batch_begin;
    __typeof__(store_batch_commit) *batch_commit;
    __typeof__(store_batch_open) *batch_open;
    /* PostgreSQL only (NULL: HP_EUSAGE) */
    __typeof__(store_fleet_heartbeat) *fleet_heartbeat;
    __typeof__(store_fleet_claim) *fleet_claim;
    __typeof__(store_fleet_list) *fleet_list;
    __typeof__(store_fleet_claim_owner) *fleet_claim_owner;
    __typeof__(store_fleet_leave) *fleet_leave;
};
extern const struct store_backend sqlstore_backend, pgstore_backend;

struct store_pg; /* pg.c: the libpq connection */

/* One value of a copied row (copy.c -> pg.c); type is SQLite's
 * (SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT NUL-terminated, SQLITE_BLOB,
 * SQLITE_NULL). */
struct store_copy_val {
    int type;
    int64_t i;
    double d;
    const void *p;
    size_t n;
};
/* pg.c, for copy.c: a multi-row INSERT ... ON CONFLICT DO NOTHING of nrows
 * rows of ncols values; one integer from a query; SQL without parameters;
 * tell the connection a transaction is open (BEGIN/COMMIT by exec_sql). */
int pgstore_copy_rows(struct store *s, const char *table, const char *cols, int ncols,
                      const struct store_copy_val *vals, size_t nrows, struct hp_buf *err);
int pgstore_query_int(struct store *s, const char *sql, int64_t *ret, struct hp_buf *err);
int pgstore_exec_sql(struct store *s, const char *sql, struct hp_buf *err);
void pgstore_set_in_tx(struct store *s, bool in_tx);

/* A reusable output buffer (store_zstd_compress_with). */
struct store_zbuf {
    void *data;
    size_t cap;
};

struct store {
    const struct store_backend *be;
    struct store_pg *pg; /* PostgreSQL only */
    sqlite3 *db;
    char *path;
    bool writer;
    int64_t data_version; /* at this connection's last write transaction */
    bool batch;           /* store_batch_begin: transactions are savepoints */
    bool batch_lost;      /* SQLite rolled the open batch back */
    bool read_tx;         /* store_read_begin opened a read transaction */
    int version;
    sqlite3_stmt *stmts[STMT_COUNT];
    struct store_writer *w;
    uint64_t writer_gen; /* store_writer_reset calls: ids looked up before stay valid while equal */
    struct store_write_counts counts;
    ZSTD_CCtx *cctx;
    ZSTD_CCtx *cctx_raw; /* the raw dump's, compressed on a thread of its own */
    struct store_zbuf raw_zbuf; /* and where it goes */
    ZSTD_DCtx *dctx;
};

/* ---- store.c: errors, statements, transactions ---- */

/* Translate an SQLite result into an HP_E* code and, for a person, a line
 * "PATH: what: sqlite's message". The one place SQLite errors are mapped. */
int store_sqlite_error(struct store *s, int rc, const char *what, struct hp_buf *err);
/* The prepared statement `id`, reset and with bindings cleared. */
int store_stmt(struct store *s, enum store_stmt_id id, sqlite3_stmt **ret, struct hp_buf *err);
/* Step a statement that must finish (INSERT/UPDATE/DELETE): 0 or error. */
int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct hp_buf *err);
/* Step a query: 1 row, 0 done, <0 error. */
int store_step_row(struct store *s, sqlite3_stmt *st, const char *what, struct hp_buf *err);
int store_exec(struct store *s, const char *sql, struct hp_buf *err);
int store_tx_begin(struct store *s, struct hp_buf *err);
int store_tx_commit(struct store *s, struct hp_buf *err);
/* Roll back and forget writer caches that may name rows now gone. */
void store_tx_rollback(struct store *s);
/* Copy a text column (NULL -> "") into a fixed buffer. */
void store_col_text(sqlite3_stmt *st, int col, char *out, size_t outsz);
int store_require_writer(struct store *s, const char *what, struct hp_buf *err);

/* Stacks in bulk, for the writer (store.c on SQLite, pg.c on PostgreSQL):
 * one statement per row costs nothing in SQLite's process but a round trip
 * to a PostgreSQL server, and a profile brings thousands of stacks.
 * store_stacks_find: ret_ids[i] is the id of the stack with hashes[i], 0
 * when there is none; the hashes are distinct. store_stacks_insert: insert
 * n stacks in this order (ids ascending like one INSERT after another):
 * hashes[i], depths[i] and locs_packed data[offs[i] .. offs[i + 1]); none
 * exists yet (the write lock is held). */
int store_stacks_find(struct store *s, const int64_t *hashes, size_t n, int64_t *ret_ids,
                      struct hp_buf *err);
int store_stacks_insert(struct store *s, const int64_t *hashes, const int64_t *depths,
                        const unsigned char *data, const size_t *offs, size_t n,
                        int64_t *ret_ids, struct hp_buf *err);
/* The hashes of stacks by id: ids ascending and distinct; ret_hashes[i] is
 * the hash of stack ids[i], 0 when there is none (a stored hash is never 0:
 * stack_hash keeps 63 bits, and 0 only by a 1-in-2^63 chance, which then
 * costs one index lookup). A node's stacks sit in runs of ids (inserted
 * together), so on SQLite this reads a few ranges of the table in rowid
 * order, where a lookup by hash lands on a random page of the hash index. */
int store_stacks_hashes(struct store *s, const int64_t *ids, size_t n, int64_t *ret_hashes,
                        struct hp_buf *err);

/* ---- pack.c: varints and zstd ---- */

struct store_pack {
    unsigned char *data;
    size_t len, cap;
};
void store_pack_release(struct store_pack *b);
/* Room for n more bytes. */
void store_pack_reserve(struct store_pack *b, size_t n);
/* Inline, through a local pointer: packing a steady snapshot's samples
 * and totals is a few hundred thousand varints, and a call each, with the
 * length written back and read again per byte, was most of it. */
static inline void store_pack_u64(struct store_pack *b, uint64_t v)
{
    if (b->cap - b->len < 10)
        store_pack_reserve(b, 10);
    unsigned char *w = b->data + b->len;
    while (v >= 0x80) {
        *w++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *w++ = (unsigned char)v;
    b->len = (size_t)(w - b->data);
}
static inline void store_pack_i64(struct store_pack *b, int64_t v) /* zigzag */
{
    store_pack_u64(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
void store_pack_bytes(struct store_pack *b, const void *data, size_t n);
void store_pack_str(struct store_pack *b, const char *s); /* NULL packs as length 0 */
/* A stack series in its packed form (sseries.c; store_sseries_unpack). */
void store_sseries_pack(const struct store_sseries *ss, struct store_pack *b);

/* ---- view.c: a closed span's stack view (the rows resolving its stacks) ---- */

struct store_view_frame {
    int64_t fid, file; /* 0: unknown */
    uint32_t line;
};
struct store_view_loc {
    int64_t id, object_id;
    uint64_t address;
    uint32_t flags, frame_off, nframes; /* frames[frame_off ..] */
};
struct store_view_name {
    int64_t id;
    const char *s; /* not NUL-terminated */
    size_t len;
};
struct store_view_stack {
    int64_t id;
    uint32_t off, n; /* stack_locs[off ..]: indexes into locs */
};
/* Arrays ascending by id, but stacks (in the packed order, view.c). */
struct store_view {
    struct store_view_obj {
        int64_t id;
        uint64_t gen; /* its loc_gens generation when the view was built */
    } *objs;
    size_t nobjs;
    struct store_view_name *fns, *files; /* names point into the packed bytes */
    size_t nfns, nfiles;
    struct store_view_loc *locs;
    size_t nlocs;
    struct store_view_frame *frames;
    size_t nframes;
    struct store_view_stack *stacks;
    size_t nstacks;
    uint32_t *stack_locs;
    size_t nstack_locs;
};
void store_view_pack(const struct store_view *v, struct store_pack *b);
/* The head of a packed view, its objects and their generations, from its
 * first bytes (view.c's own decoder of them): 1 read (*ret malloc'd), 0
 * the bytes end before they do (or count more than they hold), -1 not a
 * view (an unknown version). */
int store_view_objs(const void *data, size_t len, struct store_view_obj **ret, size_t *ret_n);
/* Names point into `data`, which must outlive *out. Checks every count,
 * id order and index against the bytes: HP_ECORRUPT saying what and at
 * which byte. */
int store_view_unpack(const void *data, size_t len, struct store_view *out,
                      struct hp_buf *err) HP_MUST_CHECK;
void store_view_release(struct store_view *v);
/* The view of stacks stack_ids[0..n) (read.c: their rows, as the loader
 * reads them) packed onto out: 1, or 0 when a row is missing or does not
 * decode (no view: readers fetch the rows and say what is wrong). */
int store_view_build(struct store *s, const int64_t *stack_ids, size_t n, struct store_pack *out,
                     struct hp_buf *err) HP_MUST_CHECK;

/* A reader over packed bytes; after any read past the end `bad` is set and
 * reads return 0, so decoders check once at the end. */
struct store_unpack {
    const unsigned char *p, *end;
    bool bad;
};
/* A reader over a blob column (NULL or empty reads as no bytes). */
struct store_unpack store_unpack_column(sqlite3_stmt *st, int col);
/* Inline, the longer forms too: decoding sample sets and stack series is
 * most of what `query leaks` does over the store, and with no call out of
 * the decoder the reader's cursor stays in a register (a call taking its
 * address kept it in memory, a tenth of unpacking a stack series). */
static inline uint64_t store_unpack_u64(struct store_unpack *u)
{
    const unsigned char *p = u->p;
    if (p < u->end && !(*p & 0x80)) { /* one byte: most of a sample set's numbers */
        u->p = p + 1;
        return *p;
    }
    uint64_t v = 0;
    int shift = 0;
    if (u->end - p >= 4) {
        /* Two to four bytes (ids, sizes): no bounds check a byte. */
        unsigned c = p[0];
        v = c & 0x7f;
        c = p[1];
        v |= (uint64_t)(c & 0x7f) << 7;
        if (c < 0x80) {
            u->p = p + 2;
            return v;
        }
        c = p[2];
        v |= (uint64_t)(c & 0x7f) << 14;
        if (c < 0x80) {
            u->p = p + 3;
            return v;
        }
        c = p[3];
        v |= (uint64_t)(c & 0x7f) << 21;
        if (c < 0x80) {
            u->p = p + 4;
            return v;
        }
        p += 4;
        shift = 28;
    }
    for (; shift < 64 && p < u->end; shift += 7) {
        unsigned char c = *p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            u->p = p;
            return v;
        }
    }
    u->p = p;
    u->bad = true;
    return 0;
}
static inline int64_t store_unpack_i64(struct store_unpack *u)
{
    uint64_t v = store_unpack_u64(u);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
/* Returns a pointer into the input (not NUL-terminated) and its length. */
const char *store_unpack_str(struct store_unpack *u, size_t *ret_len);

/* Compress src, against base (may be NULL). `text`: src is text like a raw
 * dump, which against a base becomes a line delta (ldelta.c); other data is
 * zstd-compressed with the base as a prefix. *ret is malloc'd. */
int store_zstd_compress(struct store *s, const void *src, size_t len, const void *base,
                        size_t base_len, bool text, void **ret, size_t *ret_len,
                        struct hp_buf *err);
/* The same, without a base, for blobs read on hot paths (stack series and
 * views, which `query leaks --db` decompresses a node at a time): plain
 * literals, a few more bytes, decoded faster. */
int store_zstd_compress_hot(struct store *s, const void *src, size_t len, void **ret,
                            size_t *ret_len, struct hp_buf *err);
/* The first bytes of zstd frame src (no base): up to cap into out, *ret_n
 * of them; fewer only where the frame ends. HP_ECORRUPT when it does not
 * decompress that far. */
int store_zstd_decompress_prefix(struct store *s, const void *src, size_t len, void *out,
                                 size_t cap, size_t *ret_n);
/* The same with a caller's context (one per thread), for work done off
 * the writer's thread; `path` names the store in errors. With `reuse`,
 * the output goes to that buffer (grown as needed; *ret points into it,
 * not to be freed): a fresh multi-MB buffer per dump, taken on another
 * thread, cost ~460 page faults a snapshot. `level`: zstd's, or 0 for
 * the rule compress_ctx (pack.c) explains. */
int store_zstd_compress_with(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                             const void *base, size_t base_len, bool text, int level,
                             struct store_zbuf *reuse, void **ret, size_t *ret_len,
                             struct hp_buf *err);
struct store_lines;
/* The same for text against a base, with the base's lines when known and
 * src's lines back (store_ldelta_encode). */
int store_text_compress_with(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                             const void *base, size_t base_len,
                             const struct store_lines *base_lines, struct store_lines *ret_lines,
                             struct store_zbuf *reuse, void **ret, size_t *ret_len,
                             struct hp_buf *err);
/* n bytes of room in b (its contents are not kept): b->data. */
void *store_zbuf_reserve(struct store_zbuf *b, size_t n);
/* Decompress exactly `size` bytes (the stored size), with the same base. */
int store_zstd_decompress(struct store *s, const void *src, size_t len, const void *base,
                          size_t base_len, size_t size, void **ret, struct hp_buf *err);

/* ---- ldelta.c: a raw dump as a line delta of the previous one ---- */

/* The lines of a text of `len` bytes: line i is [off[i], off[i + 1]),
 * newline included (off[n] == len), hash[i] its hp_hash_bytes_wide (seed
 * 0). `known` false: not computed (or too many lines for a line delta). */
struct store_lines {
    uint32_t *off;
    uint64_t *hash;
    uint32_t n;
    size_t len;
    bool known;
};
void store_lines_release(struct store_lines *l);
/* The lines of text (what the encoder computes for a base it has no table
 * for): false when they are too many and short for a line delta. */
bool store_lines_of(const void *text, size_t len, struct store_lines *out);

/* Encode text `src` against `base` (ldelta.c says how), into reuse's buffer
 * when given (as store_zstd_compress_with), else a new one. Returns 1 done,
 * 0 when the text's lines are too many and short for a line delta (nothing
 * written: compress it otherwise), <0 error. store_zstd_compress_with calls
 * it for text against a base; store_zstd_decompress decodes it.
 * base_lines (may be NULL): the base's lines when the caller has them (the
 * writer keeps those of a node's previous dump), else they are computed;
 * ret_lines (may be NULL): with 1, src's lines, to pass when src is the
 * next base (not known when src has too many). */
int store_ldelta_encode(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                        const void *base, size_t base_len, const struct store_lines *base_lines,
                        struct store_lines *ret_lines, struct store_zbuf *reuse, void **ret,
                        size_t *ret_len, struct hp_buf *err);
/* Whether stored bytes are a line delta (else a zstd frame). */
bool store_ldelta_is(const void *src, size_t len);
/* Decode exactly `size` bytes from a line delta against `base`:
 * HP_ECORRUPT saying what is wrong. */
int store_ldelta_decode(struct store *s, const void *src, size_t len, const void *base,
                        size_t base_len, size_t size, void **ret, struct hp_buf *err);

/* 16-byte content key of a raw dump (raw_dumps.hash): a 64-bit hash of the
 * bytes, then the length, both little-endian. Version 2 (what is written
 * now): hp_hash_bytes_wide, and the length's top bit set (no dump is 2^63
 * bytes). Version 1 (stores written before): hp_hash_bytes, a third of
 * the speed, the bit clear. Every version-2 row came after every version-1
 * row, so the row of the lowest id says whether any version-1 row is left. */
#define STORE_RAW_KEY_V2 (UINT64_C(1) << 63)
void store_content_hash(const void *data, size_t len, unsigned char ret[16]);
void store_content_hash_v1(const void *data, size_t len, unsigned char ret[16]);
/* The raw-dump row holding exactly these bytes (hash, size, then the bytes
 * compared): 1 found (*ret_id), 0 none, <0 error. ret_hash gets the content
 * hash either way, for an insert. */
int store_raw_find(struct store *s, const void *raw, size_t len, unsigned char ret_hash[16],
                   int64_t *ret_id, struct hp_buf *err);

/* ---- write.c ---- */
void store_writer_free(struct store_writer *w);
/* Forget every cached id (after a rollback or a deletion). */
void store_writer_reset(struct store *s);

/* The delta-chained blob tables and their statements (retain.c). A
 * function_totals_rest row is keyed by its snapshot's id, and its base_id
 * names another snapshot's row. */
enum store_blob_kind { STORE_BLOB_RAW, STORE_BLOB_SS, STORE_BLOB_FTR };
struct store_blob_table {
    enum store_stmt_id get, link, exists, refs, children, rebase, del;
    const char *what;
    bool text; /* raw dumps: their deltas are line deltas (store_zstd_compress) */
};
const struct store_blob_table *store_blob_table(enum store_blob_kind kind);

/* Delete a row of a blob table unless a snapshot (or, unless `drop`, for
 * the first row) or another row's delta still refers to it; then its own
 * base likewise. Rows compressed against a deleted row are re-encoded
 * against its base first. `drop` deletes row `id` even while its snapshot
 * refers to it (a reindex replacing a snapshot's packed totals). Returns
 * the number of rows deleted. The writer's keyframe cache must be reset by
 * the caller. (retain.c) */
int store_blob_release(struct store *s, enum store_blob_kind kind, int64_t id, bool drop,
                       struct hp_buf *err);
/* Delete a snapshot's function totals: its rows and its packed rest (rows
 * chained on the rest re-encoded first). `replace`: the snapshot stays and
 * gets new totals (reindex); else it is gone and a rest that is the
 * keyframe of several rows stays while they need it (as sample sets). */
int store_function_totals_delete(struct store *s, int64_t snap_id, bool replace,
                                 struct hp_buf *err);

/* ---- series.c: per-function series in spans (migrations/0006) ---- */
/* A span closes with this many of its node's ok snapshots. */
#define STORE_SPAN_SNAPSHOTS 128
/* Snapshots in a stack series row of the open span (series.c): its
 * members in groups of this many, each written when it is complete, so
 * that at most this many of a node's newest snapshots are read from their
 * sample sets. A closed span's series is one row. */
#define STORE_SSERIES_SNAPSHOTS 32
/* A snapshot's layout as store_snapshots_samples gives it (struct
 * store_samples): a hash of its mappings with their objects (mobj). */
uint64_t store_layout_hash(const struct profile *p, const int64_t *mobj);
/* The stack series builder the writer feeds each snapshot of a node it has
 * cached as it stores it (write.c), for series.c: with 1, *out holds the
 * series of exactly snapshots ids[0..n) of node_id, as built from their
 * sample sets (release it), and the builder starts over; 0 when it holds
 * other snapshots or none (series.c drops it at every group's end). */
int store_writer_group_take(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                            struct store_sseries *out);
/* Drop node_id's builder (every node's with 0): its members changed. */
void store_writer_group_drop(struct store *s, int64_t node_id);
/* A node's stack view (view.c) holds the stacks of its newest this many
 * closed spans: 768 hourly snapshots, 32 days, what `query leaks` reads
 * by default and more. */
#define STORE_VIEW_SPANS 6
/* One function's totals in one snapshot. */
struct store_fs_entry {
    int64_t snapshot_id, flat_space, cum_space, flat_objects, cum_objects;
};
/* After an ok snapshot's function totals are stored (same transaction):
 * count it into its node's open span, which closes when full. */
int store_fseries_add(struct store *s, int64_t node_id, int64_t snap_id, struct hp_buf *err);
/* Spans over every node's ok snapshots that none covers (a store written
 * before spans; history whose span a retention dropped), and closed spans
 * whose stack series is not one row packed into one, for at most
 * budget_ms (0: STORE_PACK_BUDGET_MS) and max_spans (0: no limit), then
 * the nodes' stack views that are missing or behind, in the same time:
 * retention's last step. *ret_closed: spans closed and packed;
 * *ret_pack_left: spans left to pack by a later retention; *ret_views:
 * views written, *ret_views_left: nodes whose view is left to write. One
 * transaction per span, and per view. */
#define STORE_PACK_BUDGET_MS 60000
int store_spans_fill(struct store *s, int64_t budget_ms, int64_t max_spans, int64_t *ret_closed,
                     int64_t *ret_pack_left, int64_t *ret_views, int64_t *ret_views_left,
                     struct hp_buf *err);
/* Before a snapshot's function totals change (reindex) or go (drop:
 * deletion): the span that holds it loses its packed rows; a reindexed
 * one turns stale, a deletion's goes. */
int store_fseries_dissolve(struct store *s, int64_t snap_id, bool drop, struct hp_buf *err);
/* After a reindexed snapshot's new totals are in: the last snapshot of a
 * stale span closes it again (a node reindexed in order); stale spans
 * also close again when their node's open span does. */
int store_fseries_reindexed(struct store *s, int64_t snap_id, struct hp_buf *err);
/* node_id's closed spans, ascending. *ret is malloc'd. */
int store_fseries_spans(struct store *s, int64_t node_id, struct store_span **ret,
                        size_t *ret_n, struct hp_buf *err);
/* 1 when span sp of node_id is still closed as read, else 0. */
int store_fseries_alive(struct store *s, int64_t node_id, const struct store_span *sp,
                        struct hp_buf *err);
/* Function fid's rows in span sp, ascending snapshot ids, into *e (grown,
 * *cap its capacity); none: *ret_n 0. */
int store_fseries_get(struct store *s, int64_t node_id, const struct store_span *sp,
                      int64_t fid, struct store_fs_entry **e, size_t *cap, size_t *ret_n,
                      struct hp_buf *err);

/* ---- read.c ---- */
/* Mark the stack ids and object ids a packed sample set refers to
 * (hp_map64 keys, value 1). For retention's sweep (retain.c). */
int store_sample_set_refs(struct store *s, int64_t ss_id, const void *blob, size_t len,
                          struct hp_map64 *stacks, struct hp_map64 *objects, struct hp_buf *err);
/* Load a packed, possibly delta-compressed row of raw_dumps (STMT_RAW_GET),
 * sample_sets (STMT_SS_GET) or function_totals_rest (STMT_FTR_GET; a
 * snapshot without a row: *ret NULL, *ret_len 0). *ret is malloc'd, *ret_len
 * its size. */
int store_blob_load(struct store *s, enum store_stmt_id get, int64_t id, void **ret,
                    size_t *ret_len, struct hp_buf *err);
/* One function's totals in a snapshot's packed rest (function_totals_rest). */
struct store_ft_entry {
    int64_t function_id, flat_space, cum_space, flat_objects, cum_objects;
};
/* The packed rest of a snapshot, ordered by function id; none: *ret NULL,
 * *ret_n 0. *ret is malloc'd. */
int store_ft_rest_load(struct store *s, int64_t snap_id, struct store_ft_entry **ret,
                       size_t *ret_n, struct hp_buf *err);

#endif
