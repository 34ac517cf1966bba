-- heapfleet schema version 11 on PostgreSQL: SQLite's 0009 (store/migrations/
-- 0009-stack-views.sql says why): a node's stack view, the rows that resolve
-- the stacks of its newest closed spans in one blob, and each object's
-- location generation, which says when such a copy went stale.
CREATE TABLE stack_views (
    node_id  bigint PRIMARY KEY,
    first_id bigint NOT NULL,
    last_id  bigint NOT NULL,
    size     bigint NOT NULL,
    data     bytea NOT NULL
);
CREATE TABLE loc_gens (
    object_id bigint PRIMARY KEY,
    gen       bigint NOT NULL
);
