-- function_totals_rest chained like sample_sets (issue 18): a snapshot's
-- packed long tail repeats most of its node's previous one, so it is
-- zstd-compressed against that row (base_id: the snapshot_id of the row it
-- is compressed against; NULL: standalone), with the same bounded chains and
-- keyframes as raw_dumps and sample_sets (store/store-internal.h,
-- STORE_CHAIN_MAX). Rows written before this migration have no base and
-- read as before. No REFERENCES: a reindexed snapshot's row is written again
-- under its own (older) key, compressed against a newer row, so a base may
-- follow its row in key order (query migrate copies in key order).
ALTER TABLE function_totals_rest ADD COLUMN base_id INTEGER;
CREATE INDEX function_totals_rest_base ON function_totals_rest(base_id)
    WHERE base_id IS NOT NULL;
