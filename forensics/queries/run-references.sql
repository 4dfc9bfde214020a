-- run-references: Every reference to another run's archive seen in a tool call or its result (file_accesses with owner=foreign), as found at ingest, before classification (see foreign-reads for the classified view).
-- param run: restrict to this run_id (default: all runs)
-- param foreign: restrict to references to this foreign run id (default: all)
select a.run_id, a.call_seq, a.line as transcript_line, c.tool, a.access, a.via,
       a.foreign_run_id, a.foreign_file, a.path_written, a.resolved_path
from file_accesses a
left join tool_calls c on c.run_id = a.run_id and c.call_seq = a.call_seq
where a.owner = 'foreign'
  and ($run is null or a.run_id = $run)
  and ($foreign is null or a.foreign_run_id = $foreign)
order by a.run_id, a.call_seq, a.foreign_run_id;
