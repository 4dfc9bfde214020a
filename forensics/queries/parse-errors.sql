-- parse-errors: Every line or file the ingest could not read as expected, with file, line number, reason and an excerpt.
-- param run: restrict to this run_id (default: all runs)
-- param reason: restrict to one reason (invalid_json, invalid_utf8, truncated_line, huge_line, ...)
select run_id, source, line, byte_offset, reason, detail, excerpt
from parse_errors
where ($run is null or run_id = $run) and ($reason is null or reason = $reason)
order by run_id, source, line nulls first;
