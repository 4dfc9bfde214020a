-- superseded-passes: In-session PASS records (check.py or a wrapper that calls it) that are not evidence for the archived solution.py, because the solution version they ran on is not the archived final (it was edited afterwards, or the archive holds a file no recorded call wrote). One row per PASS, with the version it ran on, the archived final version, the number of solution edits after it, and whether the final version was ever checked. Written by the timeline analyzer (check_runs, file_versions).
-- param run: restrict to this run_id (default: all runs)
with sol as (
  select run_id, version, call_seq, sha256, matches_final
  from file_versions where is_solution
), finals as (
  select run_id, max(version) filter (where matches_final) as final_version, max(version) as n_versions
  from sol group by run_id
), checked as (
  select run_id, bool_or(is_final_version) as final_checked,
         bool_or(is_final_version and outcome = 'PASS') as final_passed
  from check_runs where script in ('check', 'wrapper') group by run_id
)
select p.run_id, p.call_seq, p.line as transcript_line, p.script, p.solution_version,
       f.final_version, f.n_versions,
       (select count(*) from sol s where s.run_id = p.run_id and s.call_seq > p.call_seq) as edits_after,
       coalesce(k.final_checked, false) as final_checked, coalesce(k.final_passed, false) as final_passed,
       r.check_verdict as post_session_check, r.peak_fraction as archived_peak_fraction,
       p.command
from check_runs p
left join finals f using (run_id)
left join checked k using (run_id)
left join runs r using (run_id)
where p.outcome = 'PASS' and p.script in ('check', 'wrapper') and p.superseded
  and ($run is null or p.run_id = $run)
order by p.run_id, p.call_seq
