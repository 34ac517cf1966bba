-- heapfleet schema version 2, PostgreSQL only: collectors sharing a fleet
-- (store/pg-fleet.c, docs/DESIGN.md).
--
-- collectors: one row per collector identity, its heartbeat and health as
-- it last reported them; alive while heartbeat_at is within lease_ms.
CREATE TABLE collectors (
    id           text COLLATE "C" PRIMARY KEY,
    host         text COLLATE "C" NOT NULL DEFAULT '',
    pid          bigint NOT NULL DEFAULT 0,
    started_at   bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    lease_ms     bigint NOT NULL,
    interval_ms  bigint NOT NULL,
    round_key    bigint NOT NULL DEFAULT 0,
    claimed      bigint NOT NULL DEFAULT 0,
    polls_ok     bigint NOT NULL DEFAULT 0,
    polls_failed bigint NOT NULL DEFAULT 0,
    store_errors bigint NOT NULL DEFAULT 0,
    last_error   text COLLATE "C" NOT NULL DEFAULT ''
);

-- poll_claims: who polls which node in which round (round_key: the round's
-- start in units of the interval). The primary key is the "never twice in a
-- round" guarantee; old rounds are deleted as collectors claim new ones.
CREATE TABLE poll_claims (
    node       text COLLATE "C" NOT NULL,
    round_key  bigint NOT NULL,
    collector  text COLLATE "C" NOT NULL,
    claimed_at bigint NOT NULL,
    PRIMARY KEY (node, round_key)
);
CREATE INDEX poll_claims_round ON poll_claims(round_key);
