-- pytest-llmperf result store, schema version 1: sessions, their runs and verdicts, the
-- history lines drift detection reads, and the baseline files a recording session wrote. Every row has a natural key, so a row written
-- twice (a spool pushed again, a retry) is one row.

CREATE TABLE llmperf_sessions (
    id             text PRIMARY KEY,           -- one pytest session (one shard of a night)
    session_group  text NOT NULL,              -- the night: the shards that belong together
    shard          integer NOT NULL,           -- K of --llmperf-shard K/N (1 when unsharded)
    shards         integer NOT NULL,           -- N
    host           text,
    ci_job_url     text,
    git_commit     text,
    target         text,
    image          text,
    digest         text,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz,                -- NULL: started and never finished
    exit_status    integer,
    report_dir     text,                       -- where the shard's raw records are (its artifact)
    document       jsonb                       -- the session's report document, raw records left out
);
CREATE INDEX llmperf_sessions_group ON llmperf_sessions (session_group);

CREATE TABLE llmperf_runs (
    session_id         text NOT NULL REFERENCES llmperf_sessions (id),
    position           integer NOT NULL,       -- the run's place in the session
    server             text NOT NULL,
    concurrency        integer,
    workload_identity  jsonb,
    repetitions        integer,
    summary            jsonb,                  -- median per metric
    samples            jsonb,                  -- the figures per repetition
    requests           jsonb,                  -- one line per request: what the verdict rule pairs
    provenance         jsonb,
    artifact           text,                   -- the report folder that keeps its raw records
    PRIMARY KEY (session_id, position)
);

CREATE TABLE llmperf_verdicts (
    session_id   text NOT NULL REFERENCES llmperf_sessions (id),
    test         text NOT NULL,
    metric       text NOT NULL,
    server       text NOT NULL,
    concurrency  integer,
    baseline     double precision,
    measured     double precision,
    change       double precision,
    noise        double precision,
    allowed      text,                       -- the tolerance as shown: "-5%", "-0.03"
    outcome      text NOT NULL,
    PRIMARY KEY (session_id, test, metric)
);

CREATE TABLE llmperf_history (
    session_id   text NOT NULL REFERENCES llmperf_sessions (id),
    target       text NOT NULL,
    server       text NOT NULL,
    concurrency  integer NOT NULL,
    metric       text NOT NULL,
    workload     text NOT NULL DEFAULT '',
    recorded_at  timestamptz,
    value        double precision NOT NULL,
    outcome      text NOT NULL,
    line         jsonb NOT NULL,               -- the line as history.jsonl holds it
    PRIMARY KEY (session_id, target, server, concurrency, metric, workload)
);

CREATE TABLE llmperf_baselines (
    session_id   text NOT NULL REFERENCES llmperf_sessions (id),
    path         text NOT NULL,                -- from the checkout's root: baselines/<folder>/<server>.json
    content      text NOT NULL,                -- the file as the session wrote it
    PRIMARY KEY (session_id, path)
);
