-- skipped-folders: Folders that look like runs but were not taken as runs (a name that is not a valid run id, no runner file), with the reason.
-- param reason: restrict to one reason (invalid_run_id, not_run_id, no_runner_files, unrecognised)
select archive, path, reason, detail
from skipped_folders
where ($reason is null or reason = $reason)
order by archive, reason, path;
