-- heapfleet schema version 8 on PostgreSQL: SQLite's 0006 (store/migrations/
-- 0006-function-series.sql says why): one function's stored totals over a
-- run of a node's snapshots packed in one row, so a trend reads a row per
-- function and span instead of an index seek per snapshot.
CREATE TABLE function_series_spans (
    node_id  bigint NOT NULL,
    first_id bigint NOT NULL,
    last_id  bigint NOT NULL,
    n        bigint NOT NULL,
    closed   bigint NOT NULL,
    PRIMARY KEY (node_id, first_id)
);
CREATE TABLE function_series (
    node_id     bigint NOT NULL,
    first_id    bigint NOT NULL,
    function_id bigint NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (node_id, first_id, function_id)
);
