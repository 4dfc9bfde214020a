-- agent-check-runs: The agent's own check.py / benchmark.py runs inside the transcript (the shell calls that ran them), with the outcome read from the linked result: a check is PASS only for a line that is exactly PASS and FAIL on a FAIL: line; a benchmark is OK when it printed a peak_fraction: value; UNKNOWN when the output (cut by tail/grep) shows neither. Also the first FAIL: line, the peak_fraction, and the exit code. Read-only inspections (cat/sed/rg of check.py) are excluded. The timeline analyzer's check_runs table adds the solution version each ran on.
-- param run: restrict to this run_id (default: all runs)
with calls as (
  select c.run_id, c.call_seq, c.line, c.command,
         case when regexp_matches(c.command, '(^|[\s;&|(/])(python3?|uv run( python3?)?)\s+(\S*/)?check\.py') then 'check'
              when regexp_matches(c.command, '(^|[\s;&|(/])(python3?|uv run( python3?)?)\s+(\S*/)?benchmark\.py') then 'benchmark'
         end as script
  from tool_calls c
  where c.kind = 'exec' and c.command is not null
    and ($run is null or c.run_id = $run)
)
select k.run_id, k.call_seq, k.line as transcript_line, k.script,
       case when r.text is null then 'NO_RESULT'
            when regexp_matches(r.text, '(^|\n)\s*(FAIL|benchmark error:|Traceback)') then 'FAIL'
            when k.script = 'check' and regexp_matches(r.text, '(^|\n)\s*PASS\s*(\n|$)') then 'PASS'
            when k.script = 'benchmark' and regexp_matches(r.text, '(^|\n)\s*peak_fraction:\s*[0-9]') then 'OK'
            else 'UNKNOWN' end as outcome,
       regexp_extract(r.text, '(FAIL[^\n]*)', 1) as fail_line,
       try_cast(regexp_extract(r.text, 'peak_fraction:\s*([0-9.eE+-]+)', 1) as double) as peak_fraction,
       r.exit_code, r.line as result_line, k.command
from calls k
left join tool_results r on r.run_id = k.run_id and r.call_seq = k.call_seq
where k.script is not null
order by k.run_id, k.call_seq;
