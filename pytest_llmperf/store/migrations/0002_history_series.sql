-- Schema version 2: the series drift detection reads, fast by key and date, and a view of
-- them for Apache Otava's PostgreSQL importer (docs/examples/otava.yaml): the lines whose
-- value is a measurement (baselines/history.py's MEASURED_OUTCOMES), one series per
-- target, server, concurrency and metric.

CREATE INDEX llmperf_history_by_series
    ON llmperf_history (target, server, concurrency, metric, workload, recorded_at);

CREATE VIEW llmperf_history_series AS
SELECT h.recorded_at AS time,
       h.target || '/' || h.server || '/c' || h.concurrency || '/' || h.metric AS series,
       h.target, h.server, h.concurrency, h.metric, h.workload,
       h.value, h.outcome,
       s.git_commit AS commit, s.image, s.session_group, s.id AS session_id
  FROM llmperf_history h
  JOIN llmperf_sessions s ON s.id = h.session_id
 WHERE h.outcome IN ('pass', 'improved', 'regressed', 'suspect', 'inconclusive', 'missing-baseline', 'recorded');
