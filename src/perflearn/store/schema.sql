-- perflearn results store, schema version 1. docs/store.md describes every column.
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE SEQUENCE experiment_ids START 1;
CREATE TABLE experiments (
    experiment_id     INTEGER PRIMARY KEY,
    name              VARCHAR NOT NULL UNIQUE,
    description       VARCHAR,
    source            VARCHAR NOT NULL,          -- 'run' (measured here) or 'import' (a CSV)
    spec_path         VARCHAR,
    spec_text         VARCHAR,
    spec_hash         VARCHAR,
    created           TIMESTAMP NOT NULL,
    host              JSON,                      -- CPU model, cores, NUMA nodes, kernel, versions
    perflearn_version VARCHAR
);
CREATE TABLE knobs (
    experiment_id INTEGER NOT NULL,
    name          VARCHAR NOT NULL,
    position      INTEGER NOT NULL,
    role          VARCHAR NOT NULL,              -- 'knob' or 'context'
    kind          VARCHAR NOT NULL,              -- 'numeric' or 'categorical'
    actuator      VARCHAR,
    domain        JSON,
    unit          VARCHAR,
    PRIMARY KEY (experiment_id, name)
);
CREATE TABLE metrics (
    experiment_id INTEGER NOT NULL,
    name          VARCHAR NOT NULL,
    position      INTEGER NOT NULL,
    source        VARCHAR,
    unit          VARCHAR,
    PRIMARY KEY (experiment_id, name)
);
CREATE TABLE points (
    experiment_id INTEGER NOT NULL,
    point_id      INTEGER NOT NULL,
    point_key     VARCHAR NOT NULL,              -- canonical JSON of the knob values
    knob_values   JSON NOT NULL,
    PRIMARY KEY (experiment_id, point_id)
);
CREATE TABLE runs (
    run_id        BIGINT PRIMARY KEY,
    experiment_id INTEGER NOT NULL,
    point_id      INTEGER NOT NULL,
    rep           INTEGER NOT NULL,
    seq           INTEGER,                       -- position in the run order
    status        VARCHAR NOT NULL,              -- ok | failed | timeout | skipped
    exit_code     INTEGER,
    signal        INTEGER,
    started       TIMESTAMP,
    wall_s        DOUBLE,
    error         VARCHAR,                       -- why it failed, one line
    stderr_tail   VARCHAR,
    notes         VARCHAR,
    UNIQUE (experiment_id, point_id, rep)
);
CREATE TABLE measurements (
    run_id         BIGINT NOT NULL,
    metric         VARCHAR NOT NULL,
    value          DOUBLE,                       -- NULL when missing, never 0
    missing_reason VARCHAR,                      -- why it is NULL
    PRIMARY KEY (run_id, metric)
);
CREATE TABLE samples (
    run_id BIGINT NOT NULL,
    metric VARCHAR NOT NULL,
    t      DOUBLE NOT NULL,                      -- seconds since the run started
    value  DOUBLE
);
