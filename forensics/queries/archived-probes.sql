-- archived-probes: The auditors' probe logs archived in each run folder (audit_*.log, empirical_recompute_test*.log), each result once (copies of one log left out), with the log and line that state it, beside the run's archived grade and the deck's GPU against the regrade's. Written by the ingest (archived_probes, deck_hardware).
-- param run: restrict to this run_id (default: all runs)
-- param status: restrict to pass or fail (default: both)
select p.run_id, p.probe, p.status, p.n_bad, p.max_abs, p.path, p.line, p.result_line, p.probe_written,
       (select count(*) from archived_probes d where d.run_id = p.run_id and d.duplicate_of = p.path) as copies,
       r.correct as archived_correct, r.failure_reason, h.gpu_key as deck_gpu,
       r.regrade_json ->> 'gpu_name' as regrade_gpu
from archived_probes p
left join runs r using (run_id)
left join deck_hardware h on h.run_id = p.run_id and h.path = 'template_files/problem.yaml'
where p.duplicate_of is null
  and ($run is null or p.run_id = $run)
  and ($status is null or p.status = $status)
order by p.run_id, p.path
