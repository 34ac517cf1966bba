-- heapfleet schema version 3 on PostgreSQL: SQLite's 0002 (store/migrations/
-- 0002-function-totals-rest.sql says why): function_totals keeps the
-- functions holding 1/100 of a snapshot, the rest is one packed zstd blob per
-- snapshot. Citus: distributed with snapshots (docs/DESIGN.md).
CREATE TABLE function_totals_rest (
    snapshot_id bigint PRIMARY KEY,
    size        bigint NOT NULL,
    data        bytea NOT NULL
);
