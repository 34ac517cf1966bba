-- heapfleet schema version 4, PostgreSQL only: a collector that stops
-- cleanly (SIGTERM, SIGINT) says so (store_fleet_leave): stopped_at is when,
-- 0 while it runs. A stopped collector is not alive whatever its last
-- heartbeat, so the others' next round takes its nodes at once instead of
-- after its lease. A heartbeat (the same id started again) sets it to 0.
ALTER TABLE collectors ADD COLUMN stopped_at bigint NOT NULL DEFAULT 0;
