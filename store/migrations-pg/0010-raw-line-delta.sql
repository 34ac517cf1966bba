-- Raw dumps as line deltas (issue 18). A raw dump stored against its node's
-- previous one (raw_dumps.base_id set) is now a line delta of it
-- (store/ldelta.c; its bytes start "HFL" 0x01) where it used to be a zstd
-- frame with the base as a prefix: a third of the time to write, and smaller.
-- Rows written before read as before. No table changes: the new version
-- tells an older heapfleet that this file is newer than it, instead of
-- letting it call the new rows corrupted.
SELECT 1;
