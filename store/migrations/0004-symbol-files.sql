-- Executables and separate debug files uploaded by `query symbols add`, by
-- their GNU build-id, so every collector and `query` sharing the database
-- symbolizes with them (issue 15). The bytes are zstd-compressed in chunks
-- of at most 4 MiB (symbol_file_chunks, seq from 0): a 2 GB binary is
-- written and read a chunk at a time, never whole in memory, and stays
-- under SQLite's and PostgreSQL's 1 GB value limits. A file is listed
-- (symbol_files) only after its last chunk was written, so a reader never
-- sees half a file. name: the uploaded file's name (a separate debug file's
-- ".debug" dropped), for dumps that record no build-id; has_debug: 1 when
-- the file carries DWARF.
CREATE TABLE symbol_files (
    build_id  TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    size      INTEGER NOT NULL,
    has_debug INTEGER NOT NULL,
    nchunks   INTEGER NOT NULL,
    added_at  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE symbol_file_chunks (
    build_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (build_id, seq)
) WITHOUT ROWID;
