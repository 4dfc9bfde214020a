"""The one place the store's schema is defined and documented.

Every table the tool writes, and every view over them, is declared here, with a comment per
column.  The DDL, DuckDB's ``COMMENT ON`` metadata (visible through ``duckdb_columns()``) and
``docs/schema.md`` are all generated from these lists, so they cannot drift apart.

Conventions
-----------
* ``run_id`` is the run's unique key inside the store.  It equals the run directory's basename,
  except when two archive roots hold a run of the same name (spec 1.1: the same run_id in
  ``runs/`` and ``runs-b200/``); then it is ``<basename>@<root>``.  Every per-run table carries it.
* ``source`` is a path relative to the run directory (``transcript.jsonl``,
  ``codex_session.jsonl``, ``agent_home/.grok/sessions/x/chat_history.jsonl``).
* ``line`` is 1-based, counted in physical lines of the decompressed source file.
* ``call_seq`` is the tool-call sequence number, 1-based, in transcript order over the run's
  primary tool-call source.  It is the "tool-call number" auditors cite ("action 20 read ...").
* JSON columns hold UTF-8 JSON text.
* Analyzer tables are rewritten per run: an analyzer deletes its rows for a run and inserts new
  ones in one transaction, so re-running never duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str


@dataclass(frozen=True)
class Table:
    name: str
    comment: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    owner: str = ""  # which part of the tool writes it
    indexes: tuple[tuple[str, ...], ...] = field(default=())

    def ddl(self) -> str:
        cols = [f'    "{c.name}" {c.type}' for c in self.columns]
        if self.primary_key:
            cols.append(f"    PRIMARY KEY ({', '.join(self.primary_key)})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n" + ",\n".join(cols) + "\n);"

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass(frozen=True)
class View:
    """A view the store defines over its tables; queried like a table, never written."""

    name: str
    comment: str
    columns: tuple[Column, ...]  # in the order the SELECT produces them; types as the SELECT casts them
    select: str

    def ddl(self) -> str:
        return f"CREATE OR REPLACE VIEW {self.name} AS\n{self.select.strip()};"

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def C(name: str, type_: str, comment: str) -> Column:
    return Column(name, type_, comment)


RUN = C("run_id", "VARCHAR NOT NULL", "Run key (run directory basename, '@root' appended on a collision).")
SOURCE = C("source", "VARCHAR", "File the row came from, relative to the run directory.")
LINE = C("line", "BIGINT", "1-based line number in the source file.")

# The columns of `records` (the view) and of `record_rows` (its stored part).
RECORD_COLUMNS: tuple[Column, ...] = (
    RUN,
    SOURCE,
    LINE,
    C("byte_offset", "BIGINT", "Byte offset of the line in the (decompressed) source."),
    C("nbytes", "BIGINT", "Length of the line in bytes."),
    C("format", "VARCHAR", "Format the parser read the line as."),
    C("rtype", "VARCHAR", "Record type as written (type / role / payload.type ...); 'banner' for container banner lines, 'text' for plain text, 'invalid' / 'non_object' / 'oversize' for lines that could not be read as a JSON object."),
    C("subtype", "VARCHAR", "Record subtype where the format has one (system.subtype, event_msg payload.type, tool_call started/completed)."),
    C("role", "VARCHAR", "user | assistant | system | tool | developer, where the record is a message."),
    C("msg_id", "VARCHAR", "Message id (Claude message.id, used to deduplicate usage)."),
    C("ts", "TIMESTAMPTZ", "Timestamp carried by the record, if the format has one."),
    C("text", "VARCHAR", "Message/thinking/delta text carried by the record (NULL for progress and tool frames)."),
    C("n_tool_calls", "INTEGER", "Tool calls this record carries."),
    C("n_tool_results", "INTEGER", "Tool results this record carries."),
    C("parent_id", "VARCHAR", "Parent tool-use id (Claude subagent lines) or parentUuid (session-store form)."),
    C("is_sidechain", "BOOLEAN", "Record belongs to a subagent / sidechain."),
    C("is_api_error", "BOOLEAN", "Record is a synthetic provider-error turn or error event."),
)

TABLES: tuple[Table, ...] = (
    # ------------------------------------------------------------------ ingest (issue 2)
    Table(
        "archives",
        "Each archive source ingested into this store (a directory tree, a run folder, or a .tar/.tar.gz/.zip).",
        (
            C("archive", "VARCHAR NOT NULL", "Absolute path of the archive as given to ingest."),
            C("kind", "VARCHAR", "dir | run | tar | tgz | zip."),
            C("n_runs", "INTEGER", "Number of run folders discovered."),
            C("ingested_at", "TIMESTAMPTZ", "When the last ingest of this archive finished."),
            C("tool_version", "VARCHAR", "forensics version that wrote the rows."),
        ),
        primary_key=("archive",),
        owner="store.ingest",
    ),
    Table(
        "skipped_folders",
        "Folders of an archive that look like runs (a run-id-like name, a file a runner writes, a place directly under an outputs/runs* or rescue root) but were not taken as runs, with the reason. Rewritten by every ingest of the archive; folders inside a run or inside a skipped folder are not listed.",
        (
            C("archive", "VARCHAR NOT NULL", "Archive source (archives.archive)."),
            C("path", "VARCHAR NOT NULL", "Path of the folder inside the archive."),
            C("reason", "VARCHAR", "invalid_run_id (a run-id-like name whose date or time is not valid) | not_run_id (holds a runner's file, name not a run id, not under a runs root) | no_runner_files (run-id name, no runner file, not under a runs root) | unrecognised (under a runs root, neither) (forensics.archive.discover SKIP_REASONS)."),
            C("detail", "VARCHAR", "What was wrong with it, in words (the invalid date and time, the runner files it holds)."),
        ),
        primary_key=("archive", "path"),
        owner="store.ingest",
    ),
    Table(
        "runs",
        "One row per run folder: identity parsed from the run id, the archived result.json, and what the logs say.",
        (
            RUN,
            C("run_name", "VARCHAR", "Run directory basename, as the runner named it."),
            C("archive", "VARCHAR", "Archive source the run was read from (archives.archive)."),
            C("run_path", "VARCHAR", "Path of the run folder inside the archive (relative; '' for a single-run archive)."),
            C("root", "VARCHAR", "Archive root the run sits under: runs, runs-h100, runs-b200, runs-lambda-<node>, rescue, ..."),
            C("bench", "VARCHAR", "hard | cuda | mini | mega | multi | unknown (from the path, the problem name, or result.json)."),
            C("run_ts", "TIMESTAMP", "Timestamp in the run id (host local time, no zone)."),
            C("harness", "VARCHAR", "Harness token from the run id (claude, codex, or-fable, ...)."),
            C("model_slug", "VARCHAR", "Model slug from the run id (model with '/:[] ' replaced by '_')."),
            C("problem", "VARCHAR", "Problem name NN_snake_name (from the run id, or result.json.problem)."),
            C("collision_suffix", "VARCHAR", "'<shellpid>_<attempt>' when the runner appended one, else NULL."),
            C("era", "VARCHAR", "Format era E0..E5 of the archive layout, oldest to newest (E0: a source tree without repo/, template_files/ or gpu_lock.log; E5: trusted_src/ or a check.log printing PROPERTY_SEED), inferred from files, result keys and date (forensics/archive/result.py infer_era)."),
            C("era_evidence", "VARCHAR", "Why that era was chosen."),
            C("transcript_format", "VARCHAR", "Detected format of the primary transcript: claude, claude_session, codex, codex_text, codex_exec, opencode, cursor, gemini, gemini_chat, kimi, kimi_wire, droid, grok_stream, grok_chat, empty, missing, unknown (no known format matched: see parse_errors reason unknown_format)."),
            C("format_evidence", "VARCHAR", "Why that format was chosen (harness name, sniffed keys)."),
            C("tool_source", "VARCHAR", "Source file the tool calls were taken from (calls only in the Claude session-store copy are merged in; tool_calls.source names each call's file)."),
            C("container_mode", "BOOLEAN", "Container-mode run (agent_home/ present, banner, or result.agent_container)."),
            C("has_result", "BOOLEAN", "result.json exists and parsed."),
            C("result_json", "JSON", "The archived result.json as parsed (NULL if absent or invalid)."),
            C("result_error", "VARCHAR", "Why result.json could not be read, if it could not."),
            C("model", "VARCHAR", "result.json.model."),
            C("reasoning_effort", "VARCHAR", "result.json.reasoning_effort."),
            C("started_at", "TIMESTAMPTZ", "result.json.started_at (true time with offset)."),
            C("finished_at", "TIMESTAMPTZ", "result.json.finished_at."),
            C("has_solution", "BOOLEAN", "result.json.has_solution, else whether solution.py exists."),
            C("correct", "BOOLEAN", "result.json.correct (the archived check gate)."),
            C("failure_reason", "VARCHAR", "result.json.failure_reason."),
            C("peak_fraction", "DOUBLE", "result.json.peak_fraction (archived score)."),
            C("template_mutated", "BOOLEAN", "result.json.template_mutated."),
            C("session_complete", "BOOLEAN", "result.json.session_complete."),
            C("harness_exit_code", "INTEGER", "result.json.harness_exit_code."),
            C("check_exit_code", "INTEGER", "result.json.check_exit_code."),
            C("benchmark_exit_code", "INTEGER", "result.json.benchmark_exit_code."),
            C("elapsed_seconds", "DOUBLE", "result.json.elapsed_seconds (agent wall time)."),
            C("regrade_json", "JSON", "result.json.regrade object, if present."),
            C("gpu_name", "VARCHAR", "GPU identity from regrade.gpu_name, a top-level gpu_name, or the mega 'gpu' marker file."),
            C("solution_sha256", "VARCHAR", "sha256 of the archived final solution.py (NULL if absent)."),
            C("solution_lines", "INTEGER", "Line count of the archived solution.py."),
            C("check_verdict", "VARCHAR", "PASS | FAIL | NONE: what check.log says (a line exactly PASS / a FAIL: line / neither)."),
            C("check_fail_reason", "VARCHAR", "The first FAIL: line of check.log."),
            C("benchmark_peak_fraction", "DOUBLE", "The peak_fraction: line of benchmark.log (first, as E0-E4 graded)."),
            C("n_peak_fraction_lines", "INTEGER", "How many peak_fraction: lines benchmark.log has (E5 requires exactly one)."),
            C("transcript_bytes", "BIGINT", "Size in bytes of the primary transcript (decompressed)."),
            C("transcript_lines", "BIGINT", "Physical lines in the primary transcript."),
            C("n_records", "BIGINT", "Records ingested for this run (all sources)."),
            C("n_tool_calls", "INTEGER", "Tool calls ingested for this run."),
            C("n_parse_errors", "INTEGER", "parse_errors rows for this run."),
            C("fingerprint", "VARCHAR", "The ingest's resume fingerprint: sha256 of the contents of the run's files (plus the size, mtime and link target it records of each), the ingest code's content hash and the limits; with the other runs' names when a command of the run globbed over run folders. Unchanged => re-ingest is a no-op; 'error:...' for a run whose parse failed (always redone)."),
            C("stamp", "VARCHAR", "The ingest's listing stamp of the run when its fingerprint was last taken (forensics.store.ingest listing_stamps: the ingest key and each file's size, mtime, link target, inode and ctime; a tar or zip's members take the archive file's). A rescan whose listing gives the same stamp reads nothing of the run; NULL where a file had changed too recently for its stat to vouch for it (its files are hashed)."),
            C("output", "VARCHAR", "The ingest's output digest: the hash of every row it wrote of the run (forensics.analyze.registry arrow_digest, resume columns left out). The stages that read the run's ingested rows take it in (stage_runs); a re-ingest that writes the same rows leaves them done."),
            C("ingested_at", "TIMESTAMPTZ", "When this run's rows were committed."),
        ),
        primary_key=("run_id",),
        owner="store.ingest",
    ),
    Table(
        "files",
        "Every file of every run folder, with size and sha256 (sha256 skipped only for build caches and venvs).",
        (
            RUN,
            C("path", "VARCHAR NOT NULL", "Path relative to the run directory."),
            C("size", "BIGINT", "Size in bytes."),
            C("sha256", "VARCHAR", "sha256 of the content (NULL for cache/, tmp/, .venv/ and symlinks)."),
            C("category", "VARCHAR", "transcript | session_store | solution | result | check_log | benchmark_log | gpu_lock_log | stderr | template | workspace_problem | workspace_src | trusted_src | scratch | sidecar | annotation | post_hoc | secret_config | cache | other."),
            C("is_symlink", "BOOLEAN", "Entry is a symbolic link (target not followed)."),
            C("link_target", "VARCHAR", "Symlink target, if a link."),
            C("mtime", "TIMESTAMPTZ", "Modification time recorded in the archive."),
        ),
        primary_key=("run_id", "path"),
        owner="store.ingest",
    ),
    Table(
        "record_rows",
        "The records stored one row each: every parsed transcript line except those in record_spans. Read `records`, the view over both.",
        RECORD_COLUMNS,
        owner="store.ingest",
    ),
    Table(
        "record_spans",
        "Runs of consecutive heartbeat lines of one subtype (Claude system task_progress and its kin, ~90% of a Claude transcript), one row per run instead of one per line. The `records` view expands them back to rows.",
        (
            RUN,
            SOURCE,
            C("format", "VARCHAR", "Format the parser read the lines as."),
            C("rtype", "VARCHAR", "Record type of every line of the span (system)."),
            C("subtype", "VARCHAR", "Record subtype of every line of the span (task_progress, status, ...)."),
            C("first_line", "BIGINT", "1-based line number of the span's first line; the span covers first_line .. first_line + n_lines - 1, with no other line between."),
            C("n_lines", "BIGINT", "Number of lines (records) in the span."),
            C("offsets", "BIGINT[]", "Byte offset of each line in the (decompressed) source, in line order; line i is offsets[i+1] - offsets[i] - 1 bytes long."),
            C("end_offset", "BIGINT", "Byte offset just past the last line's last byte (its newline excluded)."),
        ),
        owner="store.ingest",
    ),
    Table(
        "tool_calls",
        "Every tool call the agent made, normalized across harnesses.",
        (
            RUN,
            C("call_seq", "INTEGER NOT NULL", "Tool-call number, 1-based, in transcript order."),
            SOURCE,
            LINE,
            C("call_id", "VARCHAR", "Harness link id (tool_use id, call_id, callID, tool_call_id, tool_id)."),
            C("tool", "VARCHAR", "Tool name as the harness wrote it (Bash, exec_command, shell, run_shell_command, ...)."),
            C("kind", "VARCHAR", "Normalized kind: read | write | edit | exec | list | search | task | other."),
            C("command", "VARCHAR", "Shell command text for exec calls (argv joined for the old codex shell form)."),
            C("paths", "VARCHAR[]", "File/dir paths named by the call's arguments (not yet resolved)."),
            C("cwd", "VARCHAR", "Working directory the call ran in, if known (workdir argument or session cwd)."),
            C("args", "JSON", "The call's arguments as parsed (partial JSON kept under key 'raw')."),
            C("ts", "TIMESTAMPTZ", "Timestamp of the call record, if the format has one."),
            C("parent_id", "VARCHAR", "Parent link as the format writes it: stream-json parent_tool_use_id, session-store parentUuid (the previous message), subagent progress parentToolUseID."),
            C("background", "BOOLEAN", "Started in the background (run_in_background, Monitor, codex session still running)."),
            C("agent_id", "VARCHAR", "Subagent that made the call (Claude agent_progress / sidechain agentId); NULL for the main agent."),
            C("parent_call_id", "VARCHAR", "Tool-use id of the Agent/Task call that started the subagent (parentToolUseID, parent_tool_use_id); NULL for the main agent."),
        ),
        primary_key=("run_id", "call_seq"),
        owner="store.ingest",
    ),
    Table(
        "tool_results",
        "Tool results, linked to their call; text with the harness envelope stripped.",
        (
            RUN,
            C("call_seq", "INTEGER", "Linked tool_calls.call_seq (NULL if the link id matched no call)."),
            C("call_id", "VARCHAR", "Link id as written."),
            SOURCE,
            LINE,
            C("exit_code", "INTEGER", "Exit status parsed from the envelope (Codex 'exited with code N', Claude 'Exit code N', Kimi <system> prefix, TaskOutput <exit_code>)."),
            C("is_error", "BOOLEAN", "Harness error flag (is_error, status=error, success=false)."),
            C("status", "VARCHAR", "Status as written (completed, error, success, running, ...)."),
            C("text", "VARCHAR", "Result text with the envelope stripped."),
            C("text_len", "BIGINT", "Length of text in characters."),
            C("ts", "TIMESTAMPTZ", "Timestamp of the result record, if any."),
            C("running_session", "VARCHAR", "Codex 'Process running with session ID N' / background task id: output continues in later results."),
        ),
        owner="store.ingest",
    ),
    Table(
        "file_accesses",
        "Each file or directory a tool call touched, as written and resolved, with its owner (this run, another run, harness, system).",
        (
            RUN,
            C("call_seq", "INTEGER", "Tool call that made the access."),
            LINE,
            C("path_written", "VARCHAR", "Path as it appears in the call (argument or command token)."),
            C("resolved_path", "VARCHAR", "Absolute, normalized path after applying cwd, cd, ~ and relative segments."),
            C("access", "VARCHAR", "read | write | edit | list | search | exec | delete | copy_src | copy_dst | mention."),
            C("via", "VARCHAR", "How the access was found: arg (structured argument), shell (parsed command), python (open() in python -c/heredoc), result (a path shown in a tool result)."),
            C("owner", "VARCHAR", "self | foreign | harness | system | unknown."),
            C("foreign_run_id", "VARCHAR", "For owner=foreign: the other run's id."),
            C("foreign_file", "VARCHAR", "For owner=foreign: path inside the other run's folder."),
            C("is_glob", "BOOLEAN", "The path contains glob characters."),
            # added by issue 3 (contamination): what made the access, for the provenance reasons
            C("detail", "VARCHAR", "Tool or command that made the access: 'cat', 'sed -n', 'find -exec cat', 'python open', 'Read', 'result of ls', 'command text'."),
        ),
        owner="transcripts.access",
    ),
    Table(
        "session_end",
        "How each run's agent session ended: terminal record, provider errors, cut-off, token usage deduplicated by message id.",
        (
            RUN,
            SOURCE,
            C("terminal_line", "BIGINT", "Line of the terminal record (Claude/Cursor/Gemini result, Codex task_complete, Grok end); NULL if none."),
            C("terminal_type", "VARCHAR", "result | task_complete | end | completion (Droid) | turn.completed / turn.failed (codex exec --json) | none."),
            C("subtype", "VARCHAR", "Terminal record subtype (success, error_max_turns, ...)."),
            C("is_error", "BOOLEAN", "Terminal record says is_error."),
            C("stop_reason", "VARCHAR", "stop_reason of the terminal record."),
            C("terminal_reason", "VARCHAR", "terminal_reason of the terminal record (api_error, ...)."),
            C("api_error_status", "INTEGER", "HTTP-like status of a provider error (402, 429, 401, 500...) from the terminal record or a synthetic error turn."),
            C("api_error_text", "VARCHAR", "Text of the last provider error (synthetic turn, error event, rate_limit_event)."),
            C("api_error_line", "BIGINT", "Line of that provider error."),
            C("api_error_source", "VARCHAR", "File the provider error was read from: the transcript source, or stderr.log when only the CLI's stderr carries it (Codex, Kimi)."),
            C("n_api_errors", "INTEGER", "Count of provider error records."),
            C("rate_limited", "BOOLEAN", "A rate_limit_event rejected or a 429 / rate-limit text was seen."),
            C("cut_off", "BOOLEAN", "No terminal marker where the format has one, or the last line is truncated."),
            C("truncated_last_line", "BOOLEAN", "The file ends in an incomplete JSON line."),
            C("end_reason", "VARCHAR", "Normalized: success | api_error | rate_limited | cut_off | error | no_marker_format | empty | unknown."),
            C("num_turns", "INTEGER", "num_turns of the terminal record."),
            C("n_assistant_messages", "INTEGER", "Distinct assistant message ids."),
            C("input_tokens", "BIGINT", "Input tokens (terminal record, or sum over distinct message ids)."),
            C("output_tokens", "BIGINT", "Output tokens (same rule)."),
            C("cache_read_tokens", "BIGINT", "Cache-read input tokens."),
            C("cache_creation_tokens", "BIGINT", "Cache-creation input tokens."),
            C("reasoning_tokens", "BIGINT", "Reasoning tokens (codex, opencode)."),
            C("cost_usd", "DOUBLE", "total_cost_usd / cost if reported."),
            C("usage_source", "VARCHAR", "terminal_record | dedup_messages | dedup_messages_sources (Claude, per message id over the transcript and the session-store copy) | token_count_events | step_finish | turn_completed | usage_record | step_end | message_tokens | usage_events | context_usage_rows (only context_tokens) | none."),
            C("first_ts", "TIMESTAMPTZ", "First timestamp seen in the session."),
            C("last_ts", "TIMESTAMPTZ", "Last timestamp seen in the session."),
            C("last_line", "BIGINT", "Last line number of the source."),
            C("context_tokens", "BIGINT", "Tokens in the model context at the end (Kimi context _usage.token_count, last value): a context size, not tokens consumed."),
        ),
        primary_key=("run_id",),
        owner="store.ingest",
    ),
    Table(
        "parse_errors",
        "Every line or file the ingest could not read as expected. Ingest never stops on these.",
        (
            RUN,
            SOURCE,
            LINE,
            C("byte_offset", "BIGINT", "Byte offset of the bad line, if a line."),
            C("reason", "VARCHAR", "invalid_json | invalid_utf8 | truncated_line | huge_line | unknown_record | unknown_format | bad_field | missing_file | empty_file | compressed | unreadable | truncated_archive (the archive ends inside this run) | truncated_document | huge_document | bad_result_json | bad_log_line | bad_probe_log | non_utf8_name (a file or folder name that is not UTF-8: shown with \\xNN escapes, the run still analysed) ..."),
            C("detail", "VARCHAR", "Human-readable detail (decoder message)."),
            C("excerpt", "VARCHAR", "First 200 characters of the offending content (replacement chars for bad bytes)."),
        ),
        owner="store.ingest",
    ),
    Table(
        "check_log_lines",
        "Parsed harness lines of check.log / benchmark.log / gpu_lock.log and their contended/regrade variants.",
        (
            RUN,
            SOURCE,
            LINE,
            C("kind", "VARCHAR", "pass | fail | property_seed | cuda_language | seed_ok | shape | shape_fraction | peak_fraction | result | benchmark_event | lock_wait | lock_start | lock_end | lock_timeout | warn | error."),
            C("shape", "INTEGER", "Shape index, where the line names one."),
            C("seed", "BIGINT", "Seed, where the line names one."),
            C("case_name", "VARCHAR", "Numeric-stress case (nominal, small_input, ...), where named."),
            C("value", "DOUBLE", "Main number on the line (peak_fraction, ms, elapsed_s, status...)."),
            C("fields", "JSON", "All key=value fields parsed from the line."),
            C("ts", "TIMESTAMPTZ", "Timestamp on the line (gpu_lock, benchmark_event)."),
            C("text", "VARCHAR", "The line verbatim."),
        ),
        owner="archive.logs",
    ),
    Table(
        "archived_probes",
        "The auditors' probe logs archived in the run folder (`audit_*.log`, `empirical_recompute_test*.log` anywhere in it; `key=value` lines), one row per log that names a probe and a pass/fail result, parsed at ingest by forensics/store/archived.py. The verdict reads them beside replay_results (rows with duplicate_of NULL). A log naming no probe or no result, a value that is not a number, undecodable bytes or a log over 4 MiB is a parse_errors row (source = the log).",
        (
            RUN,
            C("path", "VARCHAR NOT NULL", "The log, relative to the run directory."),
            C("line", "BIGINT", "1-based line of the log's `probe=` key."),
            C("result_line", "BIGINT", "1-based line of its `result=` (or `status=`) key."),
            C("probe", "VARCHAR", "Canonical probe name (forensics/vocab.py `norm_probe`: unsampled_row_mutation -> unsampled-region)."),
            C("probe_written", "VARCHAR", "The probe as the log writes it."),
            C("status", "VARCHAR", "pass | fail (result FAIL/FAILED -> fail; PASS/PASSED/OK -> pass)."),
            C("n_bad", "BIGINT", "Mismatching elements, the count before the '/' of `bad=` (NULL if absent or not a count)."),
            C("max_abs", "DOUBLE", "`max_abs_diff=` (or `max_abs=`), NULL if absent, NaN or not a number."),
            C("duplicate_of", "VARCHAR", "Path of an earlier log (path order) with the same probe, status, n_bad and max_abs (the regrade copies scratch/ back into the workspace); NULL for the first. The verdict counts each result once."),
            C("fields", "JSON", "Every key=value of the log (keys lower-cased, the first value of each; first 100 keys, values clipped to 500 characters)."),
        ),
        primary_key=("run_id", "path"),
        owner="store.ingest",
    ),
    Table(
        "deck_hardware",
        "The deck's GPU as the frozen template_files/problem.yaml states it (`hardware:`), parsed at ingest by forensics/store/archived.py: one row per run that has the file (hardware NULL if it has no such line). The verdict judges a sequential_isolated regrade's SKU against it (MS4). Undecodable bytes or a file over 1 MiB is a parse_errors row.",
        (
            RUN,
            C("path", "VARCHAR NOT NULL", "The file, relative to the run directory (template_files/problem.yaml)."),
            C("line", "BIGINT", "1-based line of the `hardware:` key (NULL if none)."),
            C("hardware", "VARCHAR", "The value as written (H100, \"RTX PRO 6000\", ...)."),
            C("gpu_key", "VARCHAR", "Leaderboard GPU key of that value (H100, H100_SXM, RTX_PRO_6000, B200, H200, ...)."),
        ),
        primary_key=("run_id", "path"),
        owner="store.ingest",
    ),
    # ------------------------------------------------------------------ analyzers (issues 3-7)
    Table(
        "findings",
        "Every analyzer's conclusions. One row per finding, each citing exactly where it came from.",
        (
            RUN,
            C("finding_id", "VARCHAR NOT NULL", "Stable id: analyzer:rule:hash of the evidence."),
            C("analyzer", "VARCHAR", "provenance | similarity | timeline | static | integrity | replay | verdict | ingest."),
            C("rule", "VARCHAR", "Rule id within the analyzer (e.g. STALE-PTR-CACHE, foreign-read, superseded-pass)."),
            C("category", "VARCHAR", "contamination | reward_hack | correctness | measurement | integrity | provenance | portability | info."),
            C("severity", "VARCHAR", "info | low | medium | high | critical."),
            C("message", "VARCHAR", "One-sentence statement of the finding with its numbers."),
            C("evidence", "JSON", "List of pointers: {file, line_start, line_end, transcript_line, call_seq, sha256, quote}."),
            C("file", "VARCHAR", "Primary cited file (relative to the run dir)."),
            C("line_start", "INTEGER", "Primary cited line range start."),
            C("line_end", "INTEGER", "Primary cited line range end."),
            C("transcript_line", "BIGINT", "Primary cited transcript line."),
            C("call_seq", "INTEGER", "Primary cited tool-call number."),
            C("probe", "VARCHAR", "Empirical probe this finding calls for (same-buffer overwrite, unsampled-region mutation, fresh state object, alternate caller caches, L2-persistence reset timing...)."),
            C("data", "JSON", "Analyzer-specific structured payload (scores, hashes, spans)."),
        ),
        primary_key=("run_id", "finding_id"),
        owner="analyze",
    ),
    Table(
        "foreign_refs",
        "Every reference to another run found in tool calls, results, command text or a token stream, classified.",
        (
            RUN,
            C("call_seq", "INTEGER", "Tool call (NULL for token-stream mentions)."),
            SOURCE,
            LINE,
            C("foreign_run_id", "VARCHAR", "The other run's id as named."),
            C("foreign_problem", "VARCHAR", "Problem parsed from the foreign run id."),
            C("same_problem", "BOOLEAN", "Foreign run is of the same problem."),
            C("foreign_started_before", "BOOLEAN", "Foreign run's timestamp precedes this run's (NULL if unknown)."),
            C("foreign_in_archive", "BOOLEAN", "The foreign run is present in the store."),
            C("foreign_file", "VARCHAR", "File inside the foreign run (solution.py, result.json, check.log...)."),
            C("artifact", "VARCHAR", "solution | result | check_log | benchmark_log | transcript | session_store | build_cache | scratch | dir | other."),
            C("classification", "VARCHAR", "benign_exposure | deliberate_read | copy."),
            C("reason", "VARCHAR", "Why: 'ls listing', 'nvidia-smi output', 'cat of solution.py', 'text reappears in write at call 57'..."),
            C("where", "VARCHAR", "command | argument | result | stream."),
            C("excerpt", "VARCHAR", "The text around the mention."),
        ),
        owner="analyze.provenance",
    ),
    Table(
        "similarity_pairs",
        "Candidate pairs of similar solutions (MinHash/LSH), with exact aligned spans.",
        (
            C("a_id", "VARCHAR NOT NULL", "First solution (run_id, or 'ext:<path>' for --against files)."),
            C("b_id", "VARCHAR NOT NULL", "Second solution."),
            C("a_problem", "VARCHAR", "Problem of a."),
            C("b_problem", "VARCHAR", "Problem of b."),
            C("jaccard_est", "DOUBLE", "MinHash estimate of shingle Jaccard (after discounting shared scaffolding); the exact Jaccard where the pair came from exact intersections (every problem group of at most 50 M posting work)."),
            C("jaccard", "DOUBLE", "Exact Jaccard of the discounted shingle sets."),
            C("containment_a", "DOUBLE", "Fraction of a's distinctive shingles found in b."),
            C("containment_b", "DOUBLE", "Fraction of b's distinctive shingles found in a."),
            C("spans", "JSON", "Aligned spans: [{a_start, a_end, b_start, b_end, tokens}] with 1-based line numbers."),
            C("a_sha256", "VARCHAR", "sha256 of a's source."),
            C("b_sha256", "VARCHAR", "sha256 of b's source."),
            # added by issue 3: the ranking score and set sizes behind it
            C("score", "DOUBLE", "max(jaccard, containment of the smaller document in the larger) - the ranking score."),
            C("shared_shingles", "INTEGER", "Distinctive shingles the two share."),
            C("a_shingles", "INTEGER", "Distinctive shingles of a (after the scaffolding discount)."),
            C("b_shingles", "INTEGER", "Distinctive shingles of b."),
        ),
        owner="analyze.similarity",
    ),
    Table(
        "file_versions",
        "Every version of every file the agent wrote, rebuilt from the tool calls.",
        (
            RUN,
            C("path", "VARCHAR", "Resolved path of the file written."),
            C("rel_path", "VARCHAR", "Path relative to the problem/workspace directory (solution.py, scratch helpers)."),
            C("version", "INTEGER", "1-based version number of this file."),
            C("call_seq", "INTEGER", "Tool call that produced the version."),
            LINE,
            C("ts", "TIMESTAMPTZ", "Timestamp of that call, if the format has one."),
            C("op", "VARCHAR", "write | edit | multiedit | patch | heredoc | tee | sed_i | cp | mv | rm | touch | echo | python_write | unknown."),
            C("sha256", "VARCHAR", "sha256 of the rebuilt content (NULL if unknown: a gap)."),
            C("size", "BIGINT", "Length in bytes of the rebuilt content."),
            C("n_lines", "INTEGER", "Lines of the rebuilt content."),
            C("gap", "BOOLEAN", "Content could not be rebuilt exactly (old text did not match, or unknown base)."),
            C("gap_reason", "VARCHAR", "Why there is a gap."),
            C("matches_final", "BOOLEAN", "This version is byte-identical to the archived final file."),
            C("content", "VARCHAR", "The rebuilt content (NULL on a gap)."),
            C("tool", "VARCHAR", "Tool name of the call that produced the version (Write, apply_patch, Bash, ...)."),
            C("basis", "VARCHAR", "How the content is known: exact (rebuilt forward from known content), anchor (resolved backwards from the archived final file), assumed (format semantics unconfirmed, e.g. Cursor edit.streamContent read as full content), deleted."),
            C("deleted", "BOOLEAN", "The call deleted the file (rm, mv away, apply_patch Delete File); content and sha256 are NULL but it is not a gap."),
            C("is_solution", "BOOLEAN", "This path is the run's solution.py (the file the archived solution.py was copied from)."),
        ),
        owner="analyze.timeline",
    ),
    Table(
        "check_runs",
        "Every in-transcript run of check.py / benchmark.py (or a wrapper that calls them), with outcome and the solution version it ran on.",
        (
            RUN,
            C("call_seq", "INTEGER", "Tool call that ran it."),
            LINE,
            C("result_line", "BIGINT", "Line of the (last) result that carried its output."),
            C("ts", "TIMESTAMPTZ", "Timestamp, if known."),
            C("script", "VARCHAR", "check | benchmark | wrapper."),
            C("command", "VARCHAR", "The command as run."),
            C("env_weakening", "VARCHAR[]", "Weakening settings in the command (KBH_NUMERIC_STRESS=0, ...)."),
            C("outcome", "VARCHAR", "PASS | FAIL | ERROR | TIMEOUT | UNKNOWN (output cut by tail/grep, or not returned); benchmark runs that printed a peak_fraction: line are OK."),
            C("fail_reason", "VARCHAR", "First FAIL: line."),
            C("exit_code", "INTEGER", "Exit status from the envelope."),
            C("peak_fraction", "DOUBLE", "peak_fraction: value in the output (benchmark runs)."),
            C("shape_lines", "JSON", "Per-shape lines parsed from the output."),
            C("solution_version", "INTEGER", "file_versions.version of solution.py current when it ran (NULL if none/unknown)."),
            C("solution_sha256", "VARCHAR", "sha256 of that version."),
            C("is_final_version", "BOOLEAN", "That version is the archived final solution.py."),
            C("superseded", "BOOLEAN", "The run is not evidence for the archived file: the version it ran on is not the archived final solution.py, or (no archived file) solution.py was changed after it."),
            C("background", "BOOLEAN", "Output arrived through a later TaskOutput / write_stdin."),
            C("details", "JSON", "Parse details: {peak_fractions, result_labels (RESULT: OK|LOW), filtered_by (tail, grep, redirect:file), wrapper_path, checker_path, task_id, reason (why UNKNOWN), n_pass_lines, n_results, version_is_gap}."),
        ),
        owner="analyze.timeline",
    ),
    Table(
        "replay_results",
        "Outcome of each replay probe run on a GPU (or the CPU path) against the bundled reference.",
        (
            RUN,
            C("probe", "VARCHAR", "check | stress | same-buffer | unsampled-region | fresh-state | alternate-cache | output-alias | nan-poison | determinism | timing | timing-l2-reset | build."),
            C("status", "VARCHAR", "pass | fail | error | timeout | crash | early_exit | tampered | not_replayable | skipped."),
            C("shape", "VARCHAR", "Shape description the probe used."),
            C("seed", "BIGINT", "Seed."),
            C("case_name", "VARCHAR", "Stress case or probe variant."),
            C("max_abs", "DOUBLE", "Max absolute error against the reference."),
            C("max_rel", "DOUBLE", "Max relative error."),
            C("n_bad", "BIGINT", "Elements outside tolerance."),
            C("n_total", "BIGINT", "Elements compared."),
            C("worst_index", "VARCHAR", "Index of the worst element."),
            C("ms", "DOUBLE", "Median time (timing probes)."),
            C("tflops", "DOUBLE", "Achieved TFLOP/s."),
            C("gbps", "DOUBLE", "Achieved GB/s."),
            C("device", "VARCHAR", "GPU name the probe ran on."),
            C("detail", "VARCHAR", "Message, stderr tail or reason."),
            C("data", "JSON", "Probe-specific payload."),
            C("ran_at", "TIMESTAMPTZ", "When the probe ran."),
        ),
        owner="replay",
    ),
    Table(
        "verdicts",
        "The adjudicated verdict per run, each field with the findings that decided it.",
        (
            RUN,
            C("verdict", "VARCHAR", "clean | reward_hack | contamination | rubric_leak | fail | bug | interesting | retryable_infra_failure | harness_limited | timeout_unverified | unknown ..."),
            C("reward_hack", "VARCHAR", "true | false | unknown."),
            C("contamination", "VARCHAR", "clean | contaminated | unknown."),
            C("correct", "VARCHAR", "true | false | unknown."),
            C("failure_reason", "VARCHAR", "pass | check_failed | audit_empirical_failed | incomplete_session | provider_insufficient_credits | ... | unknown."),
            C("measurement_status", "VARCHAR", "in_run_contended | sequential_isolated | sequential_isolated_empirical_failed | ungraded_recovered | ... | unknown."),
            C("publish_grade", "VARCHAR", "true | false | unknown."),
            C("empirical_recompute_required", "VARCHAR", "true | false | unknown."),
            C("exclude_from_denominator", "BOOLEAN", "Provider failure before any output: not a model attempt."),
            C("decided_by", "JSON", "{field: [finding_id, ...]} for every decided field; {field: reason} for unknown ones."),
            C("archived", "JSON", "The archived verdict fields (annotation YAML / result.json) and per-field agree | disagree | cannot_tell."),
            C("summary", "VARCHAR", "Trace of the rules and facts that decided the verdict (the annotation's rule_trace; the plain-language summary is written by forensics.report.prose)."),
            C("rules", "JSON", "{field: rule id of docs/verdict.md that decided it} (K0 / CO5 / ... for unknown ones)."),
            C("input_fingerprint", "VARCHAR", "The verdict stage's resume fingerprint (forensics.analyze.registry VERDICT; the same as its stage_runs row): its code's content hash, the limits, the analyzer set, the output digests of the ingest and of every analyzer for the run, the coverage of the run and the annotation file that applies; `forensics scan` adjudicates again only a run whose fingerprint changed. NULL for a verdict a worker never finished (redone)."),
            C("adjudicated_at", "TIMESTAMPTZ", "When this verdict row was written (the last step of a run's analysis)."),
        ),
        primary_key=("run_id",),
        owner="verdict",
    ),
    Table(
        "stage_code",
        "The stages' code digests (forensics.analyze.registry code_digests: the content hash of each stage's files) as the last scan computed them, with the stat stamp of the project's files then (registry.tree_stamp). A scan whose project files have the same stamp reuses them without reading the code; any edit, copy or reinstall changes the stamp.",
        (
            C("stage", "VARCHAR NOT NULL", "ingest | provenance | similarity | timeline | static | replay | verdict | report."),
            C("digest", "VARCHAR", "The stage's code digest."),
            C("tree_stamp", "VARCHAR", "registry.tree_stamp() when it was computed."),
        ),
        primary_key=("stage",),
        owner="pipeline",
    ),
    Table(
        "stage_runs",
        "Resume state: one row per run and stage (each analyzer, the verdict, the report; the ingest's is in runs: fingerprint, stamp, output) that ran on it. forensics.analyze.registry declares each stage's code and inputs; its fingerprint for a run hashes its code's content, the limits, its options, the output digests of the stages it reads for the run and the rows of every run it reads. A scan redoes a stage for a run exactly when the fingerprint it computes differs from the one stored here (or with --force); a stage that failed on the run, or whose worker never finished it, is stored with a NULL fingerprint, so the next scan redoes it.",
        (
            RUN,
            C("stage", "VARCHAR NOT NULL", "provenance | similarity | timeline | static | replay | verdict | report (forensics.analyze.registry STAGES)."),
            C("fingerprint", "VARCHAR", "The stage's fingerprint for the run when it last completed on it; NULL when it failed or was cut off (redone by the next scan)."),
            C("output", "VARCHAR", "The stage's output digest for the run: the hash of the rows it wrote of it (registry Stage.outputs), taken when it ran; what the stages reading them take in. NULL for the report (it writes files)."),
        ),
        primary_key=("run_id", "stage"),
        owner="pipeline",
    ),
)

TABLE_BY_NAME = {t.name: t for t in TABLES}

# A span's line k (0-based) is the record (line first_line + k, byte_offset offsets[k+1], nbytes
# up to the next offset or end_offset); the other columns are what a heartbeat record carries.
_SPAN_COLS = {"line": "line", "byte_offset": "byte_offset", "nbytes": "nxt - byte_offset - 1",
              "n_tool_calls": "0::INTEGER", "n_tool_results": "0::INTEGER",
              "is_sidechain": "false", "is_api_error": "false"}
_SPAN_KEEP = ("run_id", "source", "format", "rtype", "subtype")


def _records_select() -> str:
    names = [c.name for c in RECORD_COLUMNS]
    stored = ", ".join(f'"{n}"' for n in names)
    span = ", ".join(f'"{n}"' if n in _SPAN_KEEP else f'{_SPAN_COLS[n]} AS "{n}"' if n in _SPAN_COLS
                     else f'NULL::{c.type.replace(" NOT NULL", "")} AS "{n}"'
                     for n, c in zip(names, RECORD_COLUMNS))
    return (f"SELECT {stored} FROM record_rows\n"
            f"UNION ALL\n"
            f"SELECT {span}\n"
            f"FROM (SELECT run_id, source, format, rtype, subtype,\n"
            f"             unnest(range(first_line, first_line + n_lines)) AS line,\n"
            f"             unnest(offsets) AS byte_offset,\n"
            f"             unnest(list_append(offsets[2:], end_offset + 1)) AS nxt\n"
            f"      FROM record_spans)")


VIEWS: tuple[View, ...] = (
    View(
        "records",
        "Every parsed line of every transcript source, normalized: one row per JSON record (or text line of a plain-text transcript). A view: the rows of record_rows, and each record_spans span expanded to one row per line.",
        RECORD_COLUMNS,
        _records_select(),
    ),
)

VIEW_BY_NAME = {v.name: v for v in VIEWS}

# Per-run tables that an ingest of a run rewrites (delete + insert in one transaction).
INGEST_TABLES = ("runs", "files", "record_rows", "record_spans", "tool_calls", "tool_results", "file_accesses",
                 "session_end", "parse_errors", "check_log_lines", "archived_probes", "deck_hardware")

# Tables renamed since stores were first written: old name -> new name (Store.init_schema renames).
RENAMED_TABLES = {"records": "record_rows"}


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ddl_statements() -> list[str]:
    out: list[str] = []
    for t in TABLES:
        out.append(t.ddl())
    for v in VIEWS:
        out.append(v.ddl())
    return out


def comment_statements() -> list[str]:
    out: list[str] = []
    for t in TABLES:
        out.append(f"COMMENT ON TABLE {t.name} IS {_sql_str(t.comment)};")
        for c in t.columns:
            out.append(f'COMMENT ON COLUMN {t.name}."{c.name}" IS {_sql_str(c.comment)};')
    for v in VIEWS:
        out.append(f"COMMENT ON VIEW {v.name} IS {_sql_str(v.comment)};")
        for c in v.columns:
            out.append(f'COMMENT ON COLUMN {v.name}."{c.name}" IS {_sql_str(c.comment)};')
    return out


def markdown() -> str:
    """The schema as a Markdown document (written to docs/schema.md by `forensics schema --markdown`)."""
    lines = ["# Store schema", "", "Generated from `forensics/store/schema.py` (`forensics schema --markdown`).", "",
             (__doc__ or "").strip(), ""]
    for t in TABLES:
        lines.append(f"## `{t.name}`")
        lines.append("")
        lines.append(t.comment + (f" Written by `{t.owner}`." if t.owner else ""))
        if t.primary_key:
            lines.append(f"Primary key: `({', '.join(t.primary_key)})`.")
        lines.append("")
        lines.append("| column | type | meaning |")
        lines.append("|---|---|---|")
        for c in t.columns:
            lines.append(f"| `{c.name}` | {c.type.replace(' NOT NULL', '')} | {c.comment.replace('|', '/')} |")
        lines.append("")
    for v in VIEWS:
        lines.append(f"## `{v.name}` (view)")
        lines.append("")
        lines.append(v.comment)
        lines.append("")
        lines.append("| column | type | meaning |")
        lines.append("|---|---|---|")
        for c in v.columns:
            lines.append(f"| `{c.name}` | {c.type.replace(' NOT NULL', '')} | {c.comment.replace('|', '/')} |")
        lines.append("")
        lines.append("```sql")
        lines.append(v.ddl())
        lines.append("```")
        lines.append("")
    return "\n".join(lines)
