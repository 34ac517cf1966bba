-- heapfleet schema version 1.
--
-- Times are Unix milliseconds. Sample values are un-sampled estimates unless
-- a column says raw. Blobs named *_packed use the store's own varint format
-- (store/pack.c) and are zstd-compressed, optionally against a base row of the
-- same table (zstd "patch-from": a steady node's hourly dumps differ little,
-- so each is stored as a delta against its node's keyframe).
--
-- Plain SQL works for the questions a person asks by hand, e.g.
--   SELECT n.name, datetime(s.taken_at/1000,'unixepoch'), s.inuse_space
--     FROM snapshots s JOIN nodes n ON n.id = s.node_id ORDER BY s.taken_at;
--   SELECT f.name, t.cum_space FROM function_totals t
--     JOIN functions f ON f.id = t.function_id
--    WHERE t.snapshot_id = 42 ORDER BY t.cum_space DESC LIMIT 20;

CREATE TABLE nodes (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL DEFAULT '',
    address    TEXT NOT NULL DEFAULT '',
    labels     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Dumps exactly as fetched, content-addressed by a 128-bit hash of the
-- uncompressed bytes (a hash match is confirmed byte by byte before a dump
-- is shared). base_id: the keyframe this row was
-- compressed against (NULL: standalone). A keyframe is kept while any row
-- refers to it.
CREATE TABLE raw_dumps (
    id      INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL,
    size    INTEGER NOT NULL,
    base_id INTEGER REFERENCES raw_dumps(id),
    data    BLOB NOT NULL
);
CREATE INDEX raw_dumps_hash ON raw_dumps(hash);
CREATE INDEX raw_dumps_base ON raw_dumps(base_id) WHERE base_id IS NOT NULL;

-- Executables and libraries, by build-id when the dump names it, else by
-- path (qualified by node and inode so two builds at one path never mix).
CREATE TABLE objects (
    id       INTEGER PRIMARY KEY,
    key      TEXT NOT NULL UNIQUE,
    build_id TEXT,
    path     TEXT NOT NULL
);

CREATE TABLE functions (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE files (
    id   INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE
);

-- One code address, deduplicated across snapshots and nodes: `address` is
-- relative to the object's file (runtime address - mapping start + mapping
-- offset) when object_id > 0, else absolute. Name-only locations (collapsed
-- input) have object_id = -1 and address = their function id.
-- frames_packed: varint count, then (function id, file id, line) per frame,
-- innermost first; 0 ids mean unknown.
CREATE TABLE locations (
    id            INTEGER PRIMARY KEY,
    object_id     INTEGER NOT NULL,
    address       INTEGER NOT NULL,
    flags         INTEGER NOT NULL,
    frames_packed BLOB,
    UNIQUE (object_id, address)
);

-- Call stacks, deduplicated across snapshots and nodes by a 64-bit hash of
-- their location ids. locs_packed: varint count, then location ids, leaf
-- first.
CREATE TABLE stacks (
    id          INTEGER PRIMARY KEY,
    hash        INTEGER NOT NULL UNIQUE,
    depth       INTEGER NOT NULL,
    locs_packed BLOB NOT NULL
);

-- Per snapshot: header fields (period, scaling, header totals, value units,
-- hint), mappings, threads, samples (stack id + the four raw values)
-- and per-thread samples, packed. Un-sampled values are recomputed on load
-- from raw values, scaling and period, with the same code that made them.
CREATE TABLE sample_sets (
    id      INTEGER PRIMARY KEY,
    size    INTEGER NOT NULL,
    base_id INTEGER REFERENCES sample_sets(id),
    data    BLOB NOT NULL
);
CREATE INDEX sample_sets_base ON sample_sets(base_id) WHERE base_id IS NOT NULL;

CREATE TABLE snapshots (
    id            INTEGER PRIMARY KEY,
    node_id       INTEGER NOT NULL REFERENCES nodes(id),
    taken_at      INTEGER NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT,
    format        TEXT,
    scaling       INTEGER,
    period        INTEGER,
    has_alloc     INTEGER,
    time_hint_ns  INTEGER,
    hint          TEXT,
    inuse_objects REAL,
    inuse_space   REAL,
    alloc_objects REAL,
    alloc_space   REAL,
    nsamples      INTEGER,
    raw_id        INTEGER REFERENCES raw_dumps(id),
    raw_size      INTEGER,
    samples_id    INTEGER REFERENCES sample_sets(id),
    source        TEXT,
    prof_active   INTEGER,
    fetch_ms      INTEGER,
    parse_ms      INTEGER,
    symbolize_ms  INTEGER,
    store_ms      INTEGER
);
CREATE INDEX snapshots_node_time ON snapshots(node_id, taken_at);
CREATE INDEX snapshots_raw ON snapshots(raw_id) WHERE raw_id IS NOT NULL;
CREATE INDEX snapshots_samples ON snapshots(samples_id) WHERE samples_id IS NOT NULL;

-- Per snapshot per function (symbolized frames only), for fast trends.
CREATE TABLE function_totals (
    snapshot_id  INTEGER NOT NULL,
    function_id  INTEGER NOT NULL,
    flat_space   INTEGER NOT NULL,
    cum_space    INTEGER NOT NULL,
    flat_objects INTEGER NOT NULL,
    cum_objects  INTEGER NOT NULL,
    PRIMARY KEY (snapshot_id, function_id)
) WITHOUT ROWID;

CREATE TABLE stat_names (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    unit TEXT NOT NULL DEFAULT '',
    UNIQUE (name, unit)
);

-- Figures the node reported next to the profile (memory tracker, RSS,
-- jemalloc stats.*), in the order reported (seq).
CREATE TABLE node_stats (
    snapshot_id INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    stat_id     INTEGER NOT NULL,
    value       REAL,
    PRIMARY KEY (snapshot_id, seq)
) WITHOUT ROWID;

-- The symbolizer's persistent cache: (build-id, relative address) -> frames.
-- frames_packed: varint count, then per frame: function, file (length-
-- prefixed strings, length 0 = unknown) and line.
CREATE TABLE symbol_cache (
    build_id      TEXT NOT NULL,
    address       INTEGER NOT NULL,
    frames_packed BLOB NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (build_id, address)
) WITHOUT ROWID;
