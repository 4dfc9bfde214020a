-- largest-transcripts: The largest transcripts in the store, with their record mix (records by type) and tool-call counts.
-- param limit: how many runs to show (default 20)
with mix as (
  select run_id, string_agg(rtype || '=' || n, ', ' order by n desc) as record_mix
  from (select run_id, coalesce(rtype, '?') as rtype, count(*) as n from records group by 1, 2)
  group by 1
)
select r.run_id, r.transcript_format, r.transcript_bytes, r.transcript_lines, r.n_records,
       r.n_tool_calls, r.n_parse_errors, m.record_mix
from runs r left join mix m using (run_id)
order by r.transcript_bytes desc nulls last
limit coalesce(try_cast($limit as integer), 20);
