-- Stack series in spans (issue 18). `query leaks` over a store read every
-- sample of every snapshot (100 nodes x 720 hourly snapshots x 1,000 stacks:
-- 72 M samples, most of its 3.6 s). When a node's span of snapshots closes
-- (0006), the span's samples are also kept here as one row: per stack, the
-- runs of snapshots over which its raw values hold still (store/sseries.c),
-- so a reader's work follows the changes. The row lists its member
-- snapshots; it goes with its span (a reindex or a deletion of a member
-- removes it, a re-close writes it again), and a reader uses it only when
-- its members are exactly the node's snapshots it reads there. Derived:
-- sample_sets stay the truth, and a database without these rows reads the
-- same, from the sample sets. data: zstd of `size` packed bytes.
CREATE TABLE stack_series (
    id       INTEGER PRIMARY KEY,
    node_id  INTEGER NOT NULL,
    first_id INTEGER NOT NULL,
    last_id  INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    data     BLOB NOT NULL
);
CREATE UNIQUE INDEX stack_series_key ON stack_series(node_id, first_id);
