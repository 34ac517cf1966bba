-- heapfleet schema version 9 on PostgreSQL: SQLite's 0007 (store/migrations/
-- 0007-stack-series.sql says why): a closed span's samples as per-stack runs
-- in one row, so `query leaks` reads the changes, not every sample.
CREATE TABLE stack_series (
    node_id  bigint NOT NULL,
    first_id bigint NOT NULL,
    last_id  bigint NOT NULL,
    size     bigint NOT NULL,
    data     bytea NOT NULL,
    PRIMARY KEY (node_id, first_id)
);
