-- heapfleet schema version 4 on PostgreSQL: SQLite's 0003 (store/migrations/
-- 0003-symbol-files.sql says why): files uploaded by `query symbols add`,
-- zstd chunks of at most 4 MiB, listed once complete. Citus: reference
-- tables, like symbol_cache (docs/DESIGN.md).
CREATE TABLE symbol_files (
    build_id  text COLLATE "C" PRIMARY KEY,
    name      text NOT NULL,
    size      bigint NOT NULL,
    has_debug bigint NOT NULL,
    nchunks   bigint NOT NULL,
    added_at  bigint NOT NULL
);

CREATE TABLE symbol_file_chunks (
    build_id text COLLATE "C" NOT NULL,
    seq      bigint NOT NULL,
    size     bigint NOT NULL,
    data     bytea NOT NULL,
    PRIMARY KEY (build_id, seq)
);
