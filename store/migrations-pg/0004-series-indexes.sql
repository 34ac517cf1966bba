-- heapfleet schema version 4 on PostgreSQL: SQLite's 0003 (store/migrations/
-- 0003-series-indexes.sql says why): a node's ok snapshots in time order,
-- for the series readers (trends).
CREATE INDEX snapshots_node_ok_time ON snapshots(node_id, taken_at) WHERE status = 'ok';
