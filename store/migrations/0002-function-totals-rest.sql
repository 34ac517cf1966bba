-- function_totals keeps a row only for the functions that hold at least
-- 1/100 of the snapshot's in-use bytes or objects (cumulative): those a
-- top list or a trend reads. The long tail of small functions (most of a
-- 20k-stack profile's functions, and ~120 KB per snapshot as rows) is packed
-- here, one zstd-compressed blob per snapshot: varint count, the id deltas
-- of the functions (ordered by id), then column by column flat_space,
-- cum_space, flat_objects, cum_objects of all of them (zigzag varints). Readers merge both (store_function_totals,
-- store_series_function), so the answers are those of rows for everything.
CREATE TABLE function_totals_rest (
    snapshot_id INTEGER PRIMARY KEY,
    size        INTEGER NOT NULL,
    data        BLOB NOT NULL
);
