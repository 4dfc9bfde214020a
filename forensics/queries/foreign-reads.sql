-- foreign-reads: Every reference a run made to another run (from tool calls, their results, command text or a reassembled token stream), classified benign_exposure / deliberate_read / copy by the provenance analyzer, with the foreign run's problem, whether it is the same problem and started earlier, which file and artifact, the tool-call number and transcript line, and the reason. Deliberate reads and copies first; benign exposure only with include_benign.
-- param run: restrict to this run_id (default: all runs)
-- param foreign: restrict to references to this foreign run id (default: all)
-- param include_benign: any value also lists benign exposures (default: only deliberate reads and copies)
select f.run_id, f.classification, f.foreign_run_id, f.foreign_problem, f.same_problem,
       f.foreign_started_before, f.foreign_in_archive, f.foreign_file, f.artifact,
       f.call_seq, f.source, f.line as transcript_line, f."where", f.reason, f.excerpt
from foreign_refs f
where ($run is null or f.run_id = $run)
  and ($foreign is null or f.foreign_run_id = $foreign)
  and ($include_benign is not null or f.classification in ('deliberate_read', 'copy'))
order by case f.classification when 'copy' then 0 when 'deliberate_read' then 1 else 2 end,
         f.same_problem desc nulls last, f.run_id, f.call_seq nulls last, f.line;
