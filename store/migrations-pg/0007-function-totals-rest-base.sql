-- heapfleet schema version 7 on PostgreSQL: SQLite's 0005 (store/migrations/
-- 0005-function-totals-rest-base.sql says why): a snapshot's packed function
-- totals are compressed against its node's previous row (base_id, a
-- snapshot_id; NULL: standalone), chained like sample_sets.
ALTER TABLE function_totals_rest ADD COLUMN base_id bigint;
CREATE INDEX function_totals_rest_base ON function_totals_rest(base_id)
    WHERE base_id IS NOT NULL;
