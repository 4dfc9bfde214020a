-- tool-calls-by-tool: Tool calls per run, by tool name and normalized kind, with how many returned an error.
-- param run: restrict to this run_id (default: all runs)
select run_id, tool, kind, count(*) as calls,
       count(*) filter (where r.is_error) as errors,
       min(c.call_seq) as first_call, max(c.call_seq) as last_call
from tool_calls c
left join (select run_id as rid, call_seq as cseq, bool_or(is_error) as is_error
           from tool_results group by 1, 2) r on r.rid = c.run_id and r.cseq = c.call_seq
where ($run is null or run_id = $run)
group by run_id, tool, kind
order by run_id, calls desc, tool;
