-- session-end-reasons: How each run's agent session ended (terminal record, provider error status such as 402/429, cut-off) beside the archived failure_reason, plus deduplicated token usage.
-- param run: restrict to this run_id (default: all runs)
select s.run_id, r.harness, r.transcript_format, s.end_reason, s.terminal_type, s.terminal_line,
       s.api_error_status, s.api_error_line, left(s.api_error_text, 80) as api_error_text,
       s.cut_off, s.truncated_last_line, s.num_turns, s.output_tokens, s.usage_source,
       r.failure_reason as archived_failure_reason, r.session_complete
from session_end s join runs r using (run_id)
where ($run is null or s.run_id = $run)
order by s.end_reason, s.run_id;
