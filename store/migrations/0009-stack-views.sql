-- Stack views (issue 18; store/view.c). `query leaks` over a store resolves
-- each node's stacks from the rows of stacks, locations and names: about
-- 13,000 rows a node on the leaks bench, a third of the command. A node's
-- view holds those rows for the stacks of its newest closed spans
-- (snapshots first_id..last_id), packed in one blob, written again when a
-- span closes (data: zstd of `size` bytes); a deletion or reindex of a
-- snapshot it covers drops it. A
-- location is the one kind of row that changes (symbolized later, or
-- reindexed): each change bumps its object's generation in loc_gens, and a
-- view whose objects' generations moved is not used. Derived, like the
-- stack series: a database without views reads the same.
CREATE TABLE stack_views (
    node_id  INTEGER PRIMARY KEY,
    first_id INTEGER NOT NULL,
    last_id  INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    data     BLOB NOT NULL
);
CREATE TABLE loc_gens (
    object_id INTEGER PRIMARY KEY,
    gen       INTEGER NOT NULL
);
