-- Per-function series in spans (issue 18). function_totals is keyed by
-- snapshot, so one function's values over a year of hourly snapshots sit on
-- 8,760 different pages: a trend read them with one index seek each (11 ms).
-- A span is a run of a node's ok snapshots (ids first_id..last_id, all of the
-- node's ok snapshots in that range); once closed (closed = 1, n snapshots),
-- function_series holds, per function with a function_totals row in any of
-- them, the rows of the whole span packed in one blob (store/series.c), so a
-- trend reads one row per function and span. A node's newest span is open
-- (closed = 0) while it fills up; its snapshots read from function_totals. A
-- snapshot whose totals change (reindex) makes its span stale (closed = 2:
-- packed rows gone, those snapshots read from function_totals) until it
-- closes again; a deletion (retention) drops the span. The rows are derived:
-- function_totals stays the truth, and a database without them reads the
-- same, by index seeks.
CREATE TABLE function_series_spans (
    node_id  INTEGER NOT NULL,
    first_id INTEGER NOT NULL,
    last_id  INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    closed   INTEGER NOT NULL,
    PRIMARY KEY (node_id, first_id)
) WITHOUT ROWID;
-- A rowid table with its key in an index: a series of a span's 128
-- snapshots takes a kilobyte or more, which a WITHOUT ROWID row (an index
-- entry, at most ~1 KB in place on a 4 KB page) would spill to an overflow
-- page of its own, tripling the table on disk.
CREATE TABLE function_series (
    id          INTEGER PRIMARY KEY,
    node_id     INTEGER NOT NULL,
    first_id    INTEGER NOT NULL,
    function_id INTEGER NOT NULL,
    data        BLOB NOT NULL
);
CREATE UNIQUE INDEX function_series_key ON function_series(node_id, first_id, function_id);
