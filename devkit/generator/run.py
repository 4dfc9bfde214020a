"""`RunBuilder`: one synthetic run folder, written exactly as the runner would leave it, plus its labels.

    b = RunBuilder("hard", "01_fp8_gemm", "claude", "E4", "20260803_194356", "claude-opus-4-8", seed=7)
    s = b.session
    s.read("PROMPT.txt", b.template("PROMPT.txt"))
    s.write("solution.py", src_v1)
    b.check(style="tail")                       # in-session check on the current version
    s.edit("solution.py", old, new)
    b.benchmark(target=0.31)
    s.end("Done.")
    b.grade("PASS", peak_fraction=0.31)          # post-session runner grade of the final file
    labels = b.write(out_root)                   # -> OUT/outputs/runs/<run_id>/..., returns the label dict

Layout, result.json keys and classifier follow spec/archive-format.md sections 0-3, 8, 10 and 12.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from . import decks, logs
from .harness import render
from .session import ForeignRef, Session, sha256, transcript_format

ERAS = ("E0", "E1", "E2", "E3", "E4", "E5")
ERA_DATES = {"E0": (2026, 4, 20), "E1": (2026, 5, 20), "E2": (2026, 6, 14), "E3": (2026, 7, 1),
             "E4": (2026, 7, 25), "E5": (2026, 8, 9)}
HOSTS = {"anvil": ("/home/infatoshi/cuda/kernelbench.com", -6), "lambda-h100-1": ("/home/ubuntu/kernelbench.com", 0),
         "brev-6h4h8jy86": ("/home/shadeform/kernelbench.com", 0)}
CREDIT_RE = r"insufficient[_ -]?credits|out[_ -]?of[_ -]?credits|credits? (balance|remaining)|payment required|account overage|add more using"
RATE_RE = r"rate[_ -]?limit|\b429\b|quota|resource_exhausted|session limit"
UNAVAIL_RE = r"model_not_found|selected model .* may not exist|no endpoints? found|temporarily unavailable"
NO_USAGE = ("grok", "lfm-grok", "or-fable", "or-opus", "openrouter-fable", "openrouter-opus", "hy3", "tinker", "inkling",
            "opencode-or", "droid", "kimi")


def model_slug(model: str) -> str:
    for ch in "/:[] ":
        model = model.replace(ch, "_")
    return model


def _ts(ts) -> datetime:
    if isinstance(ts, datetime):
        return ts
    return datetime.strptime(ts, "%Y%m%d_%H%M%S")


class RunBuilder:
    """Build one run folder.  See the module docstring and docs/corpus.md."""

    def __init__(self, bench: str, problem: str, harness: str, era: str, ts, model: str, container: bool = False, *,
                 seed: int = 0, effort: str = "", root: str = "runs", host: str = "anvil", gpu: str = "RTX_PRO_6000",
                 collision: tuple[int, int] | None = None, run_group: str = "", scenario: str = "custom",
                 agent_cuda_disabled: bool | None = None, archive_prefix: str | None = None):
        assert era in ERAS, era
        self.bench, self.problem_name, self.harness, self.era, self.model = bench, problem, harness, era, model
        self.problem = decks.get(bench, problem)
        self.container = container and era not in ("E0", "E1") and bench != "mega"
        self.rng = random.Random(f"{seed}:{bench}:{problem}:{harness}:{ts}")
        self.local_ts = _ts(ts)
        self.host = host
        base, off = HOSTS.get(host, ("/home/ubuntu/kernelbench.com", 0))
        self.tz = timezone(timedelta(hours=off))
        self.start_epoch = self.local_ts.replace(tzinfo=self.tz).timestamp()
        self.effort = effort
        self.root = root
        self.gpu = gpu
        self.scenario = scenario
        self.run_group = run_group
        rid = f"{self.local_ts.strftime('%Y%m%d_%H%M%S')}_{harness}_{model_slug(model)}_{problem}"
        if collision:
            rid += f"_{collision[0]}_{collision[1]}"
        self.run_id = rid
        self.archive_base = archive_prefix or (f"{base}/benchmarks/{bench}" if era != "E0" else
                                               "/home/infatoshi/cuda/KernelBench-Hard")
        self.run_dir_abs = f"{self.archive_base}/outputs/{root}/{rid}"
        if era == "E0":
            workspace = f"{self.archive_base}/problems/{problem}"
        elif self.container:
            workspace = f"/workspace/problems/{problem}"
        else:
            workspace = f"{self.run_dir_abs}/repo/problems/{problem}"
        self.agent_cuda_disabled = (era in ("E1", "E2") and not self.container) if agent_cuda_disabled is None else agent_cuda_disabled
        self.session = Session(harness, workspace=workspace, run_id=rid, start_epoch=self.start_epoch, rng=self.rng,
                               container=self.container,
                               lock_log=era != "E0" and not (self.container and harness == "droid"))
        self.templates = decks.template_files(self.problem, gpu, self.local_ts.strftime("%Y%m%d"))
        self.old_fp8_deck = problem == "01_fp8_gemm" and self.local_ts.strftime("%Y%m%d") < decks.FP8_DECK_CHANGE
        for n, data in self.templates.items():  # the agent can edit the templates it finds in the workspace
            self.session.vfs[self.session.path(n)] = data.decode()
        self.session_id = self._uuid("session")
        # post-session state
        self._grade: dict | None = None
        self.final_solution: str | None = None  # None -> last written version; "" -> no solution
        self.explicit_no_solution = False
        self.extra_files: dict[str, bytes] = {}
        self.scratch: dict[str, bytes] = {}
        self.workspace_files: dict[str, bytes] = {}
        self.mutations: dict[str, bytes] = {}
        self.regrade_info: dict | None = None
        self.recovered = False
        self.harness_exit: int | None = None
        self.expected: dict = {}
        self.defects: list[str] = []
        self.parse_errors: list[dict] = []
        self.transcript_mode = "normal"  # normal | gzip_file | gzip_bytes | empty | missing
        self.corruptions: list[tuple] = []
        self.secrets = False
        self.notes: list[str] = []
        self.framework = "triton"
        self.cuda_evidence: tuple[str, ...] = ("load_inline", "global_kernel")
        self.src_symlink = False
        self.stderr_extra = ""
        self.stall_kills: list[int] = []  # opencode-family watchdog kills (seconds of silence)
        self.result_overrides: dict = {}
        self.check_noise = ""
        self.prompt = self.templates["PROMPT.txt"].decode()
        self.session_lock = False  # container run holding the GPU lock for the whole session
        self.foreign_problems: dict[str, str] = {}

    # ------------------------------------------------------------------ small helpers
    def _uuid(self, what: str) -> str:
        h = hashlib.sha256(f"{self.run_id}:{what}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"

    def template(self, name: str) -> str:
        return self.templates[name].decode()

    def foreign_path(self, other: "RunBuilder | str", rel: str = "") -> str:
        """Absolute path of a file of another run, as this run's agent would see it (same archive root)."""
        if isinstance(other, RunBuilder):
            base = other.run_dir_abs
        else:
            base = f"{self.archive_base}/outputs/{self.root}/{other}"
        return f"{base}/{rel}" if rel else base

    # ------------------------------------------------------------------ in-session grading runs
    CHECK_STYLES = {
        "plain": "uv run python check.py 2>&1",
        "tail": "uv run python check.py 2>&1 | tail -20",
        "timeout": "timeout 600 uv run check.py",
        "uvrun": "uv run check.py",
        "python": "python check.py",
        "python3": "python3 check.py",
        "cd": "cd {ws} && uv run python check.py",
        "abs": "uv run python {ws}/check.py",
        "env": "CUDA_LAUNCH_BLOCKING=1 uv run python check.py 2>&1 | tail -30",
        "cuda_home": "CUDA_HOME=/usr/local/cuda-13 TRITON_CACHE_DIR={run}/cache/triton uv run python check.py",
        "nostress": "KBH_NUMERIC_STRESS=0 uv run python check.py 2>&1 | tail -20",
    }

    def _cmd(self, style: str, script: str) -> str:
        cmd = self.CHECK_STYLES.get(style, style).replace("check.py", f"{script}.py")
        return cmd.replace("{ws}", self.session.ws).replace("{run}", self.run_dir_abs)

    def check(self, outcome: str = "PASS", *, style: str = "tail", fail_line: str | None = None,
              background: bool = False, noise: str = "", timeout_s: int | None = None, dur: float | None = None) -> int:
        """Run check.py in the session on the current solution version (outcome PASS | FAIL | TIMEOUT)."""
        if self.harness in ("kimi", "opencode") and style == "tail" and self.rng.random() < 0.5:
            style = "python"
        if self.harness == "codex" and style in ("tail", "plain"):
            style = "uvrun"
        cmd = self._cmd(style, "check")
        out = logs.check_text(self.problem, "PASS" if outcome == "PASS" else ("FAIL" if outcome == "FAIL" else "TIMEOUT"),
                              era=self.era, fail_line=fail_line, noise=noise, framework=self.framework,
                              cuda_evidence=self.cuda_evidence)
        if "tail" in cmd:
            n = int(cmd.rsplit("tail -", 1)[1].split()[0])
            out = "\n".join(out.rstrip("\n").split("\n")[-n:]) + "\n"
        timed_out = outcome == "TIMEOUT"
        ec = 0 if outcome == "PASS" else (143 if timed_out else 1)
        label_outcome = outcome if outcome in ("PASS", "FAIL") else "UNKNOWN"
        if dur is None:
            dur = self.rng.uniform(25, 240) if not timed_out else float(timeout_s or 600)
        return self.session.bash(cmd, out, ec, background=background, description="Run correctness check",
                                 timeout=timeout_s or (600 if timed_out else None), dur=dur, timed_out=timed_out,
                                 check={"script": "check", "outcome": label_outcome,
                                        "stress_off": "KBH_NUMERIC_STRESS=0" in cmd})

    def benchmark(self, target: float = 0.2, *, style: str = "plain", background: bool = False) -> tuple[int, float]:
        """Run benchmark.py in the session; returns (call_seq, printed peak_fraction)."""
        if self.harness == "codex":
            style = "uvrun"
        cmd = self._cmd(style, "benchmark")
        text, pf, _ = logs.benchmark_text(self.problem, era=self.era, target=target, rng=self.rng, t0=self.session.t)
        seq = self.session.bash(cmd, text, 0, background=background, description="Benchmark",
                                dur=self.rng.uniform(30, 200),
                                check={"script": "benchmark", "outcome": "PASS", "peak_fraction": pf})
        return seq, pf

    # ------------------------------------------------------------------ post-session layers
    def grade(self, check: str | None, *, fail_line: str | None = None, peak_fraction: float | None = None,
              target: float | None = None, bench_exit: int = 0, noise: str = "", check_exit: int | None = None,
              bench_text: str | None = None, check_elapsed: int | None = None) -> None:
        """Post-session runner grade of the final solution: check in PASS | FAIL | BUILD_FAIL | TIMEOUT | None."""
        self._grade = {"check": check, "fail_line": fail_line, "peak_fraction": peak_fraction, "target": target,
                       "bench_exit": bench_exit, "noise": noise, "check_exit": check_exit, "bench_text": bench_text,
                       "check_elapsed": check_elapsed}

    def regrade(self, *, host: str = "brev-6h4h8jy86", gpu_name: str | None = None, correct: bool = True,
                peak_fraction: float | None = None, check_exit: int = 0, bench_exit: int | None = 0,
                check_elapsed: int | None = None, target: float | None = None) -> None:
        """Add the sequential-isolated regrade layer (check.contended.log, regrade{} in result.json)."""
        self.regrade_info = {"host": host, "gpu_name": gpu_name or decks.GPUS[self.gpu][1], "correct": correct,
                             "peak_fraction": peak_fraction, "check_exit": check_exit, "bench_exit": bench_exit,
                             "check_elapsed": check_elapsed, "target": target}

    def mutate_template(self, name: str, new_content: str) -> None:
        """The agent changed a template file in the workspace (detected by the runner)."""
        self.mutations[name] = new_content.encode()

    def expect(self, **fields) -> None:
        self.expected.update(fields)

    # ------------------------------------------------------------------ writing
    def write(self, out_root) -> dict:
        out_root = Path(out_root)
        run_dir = out_root / "outputs" / self.root / self.run_id
        files: dict[str, bytes] = {}
        s = self.session
        p = self.problem
        era = self.era
        rng = self.rng
        tnames = decks.template_names(self.bench)
        # --- final solution
        if self.explicit_no_solution:
            final = None
        elif self.final_solution is not None:
            final = self.final_solution
        else:
            final = s.content("solution.py")
        final_version = None
        if final is not None:
            h = sha256(final)
            for v in reversed(s.versions):
                if v["sha256"] == h:
                    final_version = v["version"]
                    break
        s.finalize_checks(final_version)
        grok_host = s.fmt == "grok_stream" and not self.container
        # --- workspace and harness files
        if self.bench == "mega":
            self.src_symlink = True  # the mega fork always links repo/src to the bench src/
        if era != "E0":
            if self.src_symlink:
                pass  # written as a symlink below
            else:
                for rel, data in decks.REPO_SRC_FILES.items():
                    files[f"repo/{rel}"] = data
            files["repo/pyproject.toml"] = (f'[project]\nname = "kernelbench-{self.bench}"\nversion = "0.3.0"\n'
                                            'requires-python = ">=3.11"\ndependencies = ["torch==2.11.0", "triton==3.5.0", '
                                            '"pyyaml>=6", "numpy>=2"]\n').encode()
            files["repo/uv.lock"] = (b"version = 1\nrequires-python = \">=3.11\"\n\n[[package]]\nname = \"torch\"\n"
                                     b"version = \"2.11.0\"\nsource = { registry = \"https://download.pytorch.org/whl/cu130\" }\n")
            files["repo/.python-version"] = b"3.11\n"
            for n in tnames:
                files[f"repo/problems/{self.problem_name}/{n}"] = self.templates[n]
                files[f"template_files/{n}"] = self.templates[n]
            if self.bench == "mega":
                files[".kbh_empty"] = b""
                files["trusted_entrypoint.py"] = (
                    b'"""Run check.py/benchmark.py in a fresh interpreter, failing closed (synthetic)."""\n'
                    b"import runpy\nimport sys\n\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
                if self.host != "anvil":
                    files["gpu"] = {"RTX_PRO_6000": b"RTX PRO 6000 Blackwell\n", "H100": b"H100\n",
                                    "B200": b"B200\n"}.get(self.gpu, b"H100\n")
            elif era == "E5":
                for rel, data in decks.REPO_SRC_FILES.items():
                    files[f"trusted_{rel}"] = data
                files["trusted_src/eval/trusted_entrypoint.py"] = (
                    b'"""Run check.py/benchmark.py from a pristine src/ (synthetic)."""\nimport runpy\nimport sys\n\n'
                    b"runpy.run_path(sys.argv[1], run_name='__main__')\n")
            for w in ("gpu-lock-exec", "uv", "python", "python3", "nvidia-smi", "ncu", "nsys", "nvcc"):
                body = (b"#!/usr/bin/env bash\n# serialize GPU use through the per-bench lock\nexec flock "
                        b"\"$KBH_GPU_LOCK\" \"$@\"\n") if w == "gpu-lock-exec" else (
                    f"#!/usr/bin/env bash\nexec \"$(dirname \"$0\")/gpu-lock-exec\" {w} \"$@\"\n").encode()
                files[f"bin/{w}"] = body
                if self.container:
                    files[f"cbin/{w}"] = body
            if self.agent_cuda_disabled:
                files["agent_guard/sitecustomize.py"] = (b"import os\nif os.environ.get('KBH_AGENT_CUDA_DISABLED') == '1':\n"
                                                         b"    os.environ['CUDA_VISIBLE_DEVICES'] = ''\n")
        # --- mutation
        mutated = bool(self.mutations)
        if mutated:
            for n, data in self.mutations.items():
                files[f"repo/problems/{self.problem_name}/{n}"] = self.templates[n]  # restored by the runner
            mlog = ["phase: after harness"]
            for n, data in sorted(self.mutations.items()):
                import difflib
                mlog.append(f"MUTATED: {n}")
                mlog += list(difflib.unified_diff(self.templates[n].decode().splitlines(), data.decode().splitlines(),
                                                  f"before/{n}", f"after/{n}", lineterm=""))
            files["template_mutations.log"] = ("\n".join(mlog) + "\n").encode()
        # --- transcript
        meta = {"session_id": self.session_id, "model": self.model, "start_epoch": self.start_epoch,
                "effort": self.effort, "prompt": self.prompt,
                "native_thinking": self.harness in ("claude",),
                "api_key_source": "none" if self.container else "ANTHROPIC_API_KEY"}
        rend = render(s, meta)
        for k, v in rend.files.items():
            files[k] = v
        records = dict(rend.records)
        parse_errors = list(self.parse_errors)
        if s.cut:
            parse_errors.append({"source": rend.tool_source if s.fmt == "codex_text" else "transcript.jsonl",
                                 "line": records.get(rend.tool_source if s.fmt == "codex_text" else "transcript.jsonl"),
                                 "reason": "truncated_line"})
        # planted corruptions of the primary transcript
        tsrc = "transcript.jsonl"
        unsafe = (b'"type":"tool_use"', b'"tool_calls":[{', b'"type":"tool_call"', b'"type":"function_call"',
                  b'"type":"custom_tool_call"')
        for kind, arg in self.corruptions:
            data = files[tsrc]
            lines = data.split(b"\n")
            if kind in ("malformed", "badutf8"):
                # never corrupt a line that carries a tool call: the labels count calls a parser can see
                while arg <= len(lines) and (any(m in lines[arg - 1] for m in unsafe) or not lines[arg - 1].startswith(b"{")):
                    arg += 1
            types = rend.record_types.setdefault(tsrc, {})
            if kind == "malformed":  # replace a line in the middle with broken JSON
                i = arg
                try:
                    t0 = orjson.loads(lines[i - 1])
                    t0 = t0.get("type") or t0.get("role") or "unknown"
                except orjson.JSONDecodeError:
                    t0 = None
                if t0 and types.get(t0):
                    types[t0] -= 1
                    types["invalid"] = types.get("invalid", 0) + 1
                lines[i - 1] = lines[i - 1][: len(lines[i - 1]) // 2] + b'", "oops'
                parse_errors.append({"source": tsrc, "line": i, "reason": "invalid_json"})
            elif kind == "badutf8":
                i = arg
                ln = lines[i - 1]
                # inside a free-text string value, so the line stays JSON and keeps its record type
                pos = -1
                for key in (b'"text":"', b'"output":"', b'"content":"', b'"sessionID":"', b'"session_id":"'):
                    k = ln.find(key)
                    if k >= 0:
                        pos = k + len(key)
                        break
                if pos < 0:
                    pos = len(ln) // 2
                lines[i - 1] = ln[:pos] + b"\xff\xfe\xc3" + ln[pos:]
                parse_errors.append({"source": tsrc, "line": i, "reason": "invalid_utf8"})
            elif kind == "unknown_type":
                i = arg
                lines.insert(i - 1, b'{"type":"hook_event","hook":"PreToolUse","session_id":"' + self.session_id.encode() + b'"}')
                types["hook_event"] = types.get("hook_event", 0) + 1
                records[tsrc] = records.get(tsrc, 0) + 1
                parse_errors.append({"source": tsrc, "line": i, "reason": "unknown_record"})
            files[tsrc] = b"\n".join(lines)
        if self.transcript_mode == "empty":
            files[tsrc] = b""
            records[tsrc] = 0
            rend.record_types.pop(tsrc, None)
        elif self.transcript_mode == "missing":
            files.pop(tsrc, None)
            records.pop(tsrc, None)
            rend.record_types.pop(tsrc, None)
        # records = physical non-empty lines of each source as finally written (before gzip)
        for src in list(records):
            if src in files:
                records[src] = _nonempty_lines(files[src])
            if not records[src]:
                del records[src]
        if self.transcript_mode == "gzip_bytes":
            files[tsrc] = gzip.compress(files[tsrc], mtime=0)
        elif self.transcript_mode == "gzip_file":
            files["transcript.jsonl.gz"] = gzip.compress(files.pop(tsrc), mtime=0)
            if tsrc in records:
                records["transcript.jsonl.gz"] = records.pop(tsrc)
            if tsrc in rend.record_types:
                rend.record_types["transcript.jsonl.gz"] = rend.record_types.pop(tsrc)
        if self.stall_kills:
            wl = []
            for i, secs in enumerate(self.stall_kills):
                d = datetime.fromtimestamp(int(self.start_epoch) + 1800 * (i + 1), self.tz).isoformat()
                if self.container:
                    wl.append(f"{d} stall_watchdog killed {self._uuid('cid').replace('-', '')[:12]} after {secs}s of silence (kbh-{self.bench}-gpu.lock)")
                else:
                    wl.append(f"{d} host_stall_watchdog killed pid={400000 + 37 * i} after {secs}s of silence on {self.run_dir_abs}/transcript.jsonl")
            files["stall_watchdog.log"] = ("\n".join(wl) + "\n").encode()
        if s.fmt != "codex_text":
            files["stderr.log"] = self.stderr_extra.encode()
        elif self.stderr_extra:
            files["stderr.log"] += self.stderr_extra.encode()
        # --- container home
        if self.container:
            files["agent_home/.claude.json"] = b"{}\n"
            if s.fmt == "claude":
                files["agent_home/.claude/.credentials.json"] = orjson.dumps(
                    {"claudeAiOauth": {"accessToken": "sk-ant-oat01-FAKE" + hashlib.sha256(self.run_id.encode()).hexdigest()[:40],
                                       "refreshToken": "sk-ant-ort01-FAKE" + hashlib.md5(self.run_id.encode()).hexdigest(),
                                       "expiresAt": int(self.start_epoch + 28800) * 1000}}, option=orjson.OPT_INDENT_2)
            if s.fmt == "codex_text":
                d = datetime.fromtimestamp(self.start_epoch, timezone.utc)
                files[f"agent_home/.codex/sessions/{d:%Y/%m/%d}/rollout-{d:%Y-%m-%dT%H-%M-%S}-{self.session_id}.jsonl"] = files["codex_session.jsonl"]
                files["agent_home/.codex/config.toml"] = f'model = "{self.model}"\napproval_policy = "never"\n'.encode()
                files["agent_home/.codex/auth.json"] = orjson.dumps({"OPENAI_API_KEY": "sk-proj-FAKE" + hashlib.sha256(
                    self.run_id.encode()).hexdigest()[:48]})
            if s.fmt == "opencode":
                files["agent_home/.config/opencode/opencode.json"] = orjson.dumps(
                    {"provider": {"openrouter": {"options": {"apiKey": "sk-or-v1-FAKE" + hashlib.sha256(self.run_id.encode()).hexdigest()}}}},
                    option=orjson.OPT_INDENT_2)
            if s.fmt == "opencode":
                sid = "ses_" + self.session_id.replace("-", "")[:26]
                files[f"agent_home/.local/share/opencode/storage/session/info/{sid}.json"] = orjson.dumps(
                    {"id": sid, "title": f"{self.problem_name}", "time": {"created": int(self.start_epoch * 1000)},
                     "directory": s.ws}, option=orjson.OPT_INDENT_2)
            if s.fmt == "grok_stream":
                files["agent_home/.grok/auth.json"] = orjson.dumps({"api_key": "xai-FAKE" + hashlib.md5(self.run_id.encode()).hexdigest()})
            if s.lock_log and not self.session_lock:
                files["agent_home/gpu_lock_container.log"] = self._lock_text(s.lock_lines)
        # --- solution & scratch
        has_solution = final is not None
        if has_solution and not self.recovered:
            files["solution.py"] = final.encode()
        scratch = dict(self.scratch)
        # files the agent wrote in the workspace other than solution.py -> scratch/
        for path, content in sorted(s.vfs.items()):
            if path.startswith(s.ws + "/") and not path.endswith("/solution.py"):
                rel = path[len(s.ws) + 1:]
                if rel not in tnames:
                    scratch.setdefault(rel, content.encode())
        # --- grading
        g = self._grade or {"check": "PASS" if has_solution else None, "target": None}
        t = s.t + rng.uniform(1, 5)
        harness_end = t
        if self.harness_exit is not None:
            hx = self.harness_exit
        elif s.cut:
            hx = 124 if era in ("E0", "E1", "E2") else 143
        elif s.ended and not s.ended["is_error"]:
            hx = 0
        elif s.ended:
            hx = 1
        else:
            hx = 1
        check_exit = bench_exit = check_el = bench_el = None
        correct = False
        peak = None
        runner_lock: list = []
        check_log = bench_log = None
        gcheck = g.get("check") if has_solution and not mutated and not self.recovered else None
        if gcheck:
            cdur = g.get("check_elapsed") or int(rng.uniform(40, 400))
            if gcheck == "TIMEOUT":
                cdur = g.get("check_elapsed") or (180 if era in ("E0", "E1", "E2", "E3") else 1800)
            check_el = cdur
            noise = g.get("noise") or self.check_noise or logs.UV_NOISE.format(venv=f"{self.run_dir_abs}/repo/.venv")
            check_log = logs.check_text(p, gcheck, era=era, fail_line=g.get("fail_line"), noise=noise,
                                        framework=self.framework, cuda_evidence=self.cuda_evidence)
            check_exit = g.get("check_exit")
            if check_exit is None:
                check_exit = {"PASS": 0, "FAIL": 1, "BUILD_FAIL": 1, "TIMEOUT": 124}[gcheck]
            correct = gcheck == "PASS" and (check_exit == 0 or era in ("E0", "E1", "E2"))
            runner_lock.append((t, "check.py", cdur, check_exit))
            t += cdur + rng.uniform(1, 3)
            if correct:
                bdur = int(rng.uniform(30, 300))
                bench_el = bdur
                bench_exit = g.get("bench_exit", 0)
                if g.get("bench_text") is not None:
                    bench_log = g["bench_text"]
                    peak = g.get("peak_fraction")
                else:
                    tgt = g.get("target") or g.get("peak_fraction") or rng.uniform(0.02, 0.5)
                    bench_log, peak, _ = logs.benchmark_text(p, era=era, target=tgt, rng=rng, t0=t)
                    if g.get("peak_fraction") is not None:
                        peak = g["peak_fraction"]
                        bench_log = _force_peak(bench_log, peak)
                if bench_exit != 0 and era == "E5":
                    peak = None
                runner_lock.append((t, "benchmark.py", bdur, bench_exit))
                t += bdur + rng.uniform(1, 3)
        end = t + rng.uniform(1, 4)
        if check_log is not None:
            files["check.log"] = check_log.encode()
        if bench_log is not None:
            files["benchmark.log"] = bench_log.encode()
        if p.bench == "cuda" and (check_log is not None or scratch.get("cuda_language.json")):
            scratch.setdefault("cuda_language.json", orjson.dumps(
                {"framework": self.framework, "triton_cheat": False, "dsl_cheat": False,
                 "has_cuda_evidence": bool(self.cuda_evidence), "cuda_evidence": list(self.cuda_evidence),
                 "forbidden_hits": [], "ok": bool(self.cuda_evidence)}, option=orjson.OPT_INDENT_2))
            scratch.setdefault("framework.txt", (self.framework + "\n").encode())
        elif gcheck == "PASS" or any(c["outcome"] == "PASS" and c["script"] == "check" for c in s.check_runs):
            scratch.setdefault("framework.txt", (self.framework + "\n").encode())
        if has_solution or scratch:
            for rel, data in scratch.items():
                if self.recovered:
                    files[f"repo/problems/{self.problem_name}/{rel}"] = data
                else:
                    files[f"scratch/{rel}"] = data
        if self.recovered and has_solution:
            files[f"repo/problems/{self.problem_name}/solution.py"] = final.encode()
        # --- gpu_lock.log: host-mode agent commands + runner phases
        lock_lines = [] if self.container else list(s.lock_lines)
        if self.session_lock:
            pid = rng.randrange(100000, 999999)
            lock_lines.append((self.start_epoch - 1, f"wait pid={pid} cmd=harness args=docker\\ run\\ --gpus\\ device=0\\ {self.harness}"))
            lock_lines.append((self.start_epoch, f"start pid={pid} cmd=harness"))
            lock_lines.append((harness_end, f"end pid={pid} cmd=harness status={hx} elapsed_s={int(harness_end - self.start_epoch)}"))
        to = "--kill-after=30s\\ " if era not in ("E0",) else ""
        for (tt, name, dur, st) in runner_lock:
            pid = rng.randrange(100000, 999999)
            limit = g.get("check_elapsed") if name == "check.py" and gcheck == "TIMEOUT" else None
            lim = (180 if era in ("E1", "E2", "E3") else 1800) if name == "check.py" else (7200 if self.problem_name == "02_kda_cutlass" else 1800)
            entry = (f"trusted_src/eval/trusted_entrypoint.py\\ {name}" if era == "E5" else name)
            lock_lines.append((tt, f"wait pid={pid} cmd={name} args={to}{limit or lim}s\\ uv\\ run\\ python\\ {entry}"))
            w = rng.choice((0, 0, 1, 3, 12))
            lock_lines.append((tt + w, f"start pid={pid} cmd={name}"))
            lock_lines.append((tt + w + dur, f"end pid={pid} cmd={name} status={st} elapsed_s={dur}"))
        if era != "E0":
            files["gpu_lock.log"] = self._lock_text(lock_lines)
        # --- regrade layer
        regrade = None
        if self.regrade_info and has_solution:
            ri = self.regrade_info
            contended = {"correct": correct, "peak_fraction": peak, "check_exit_code": check_exit,
                         "benchmark_exit_code": bench_exit, "check_elapsed_seconds": check_el,
                         "benchmark_elapsed_seconds": bench_el}
            if "check.log" in files:
                files["check.contended.log"] = files["check.log"]
            if "benchmark.log" in files:
                files["benchmark.contended.log"] = files["benchmark.log"]
            correct = ri["correct"]
            check_exit = ri["check_exit"]
            rc_out = "PASS" if correct else ("TIMEOUT" if check_exit == 124 else "FAIL")
            files["check.log"] = logs.check_text(p, rc_out, era=era, fail_line=g.get("fail_line"), noise=logs.UV_NOISE.format(
                venv=f"{self.run_dir_abs}/repo/.venv"), framework=self.framework, cuda_evidence=self.cuda_evidence).encode()
            check_el = ri["check_elapsed"] or int(rng.uniform(40, 300))
            if correct:
                bench_exit = ri["bench_exit"]
                if bench_exit == 0:
                    tgt = ri["target"] or ri["peak_fraction"] or (peak or 0.1)
                    bl, pk, _ = logs.benchmark_text(p, era=era, target=tgt, rng=rng, t0=end + 3600)
                    if ri["peak_fraction"] is not None:
                        pk = ri["peak_fraction"]
                        bl = _force_peak(bl, pk)
                    files["benchmark.log"] = bl.encode()
                    peak = pk
                else:
                    files["benchmark.log"] = logs.benchmark_failed_text(
                        p, era=era, rng=rng, t0=end + 3600, fail_shape=2,
                        exc="CUDA error: invalid argument\nCUDA kernel errors might be asynchronously reported at some other API call").encode()
                    peak = None
                bench_el = int(rng.uniform(30, 300))
            else:
                bench_exit = None
                bench_el = None
                peak = None
                files.pop("benchmark.log", None)
            d = datetime.fromtimestamp(end + 86400 * 2, timezone.utc)
            regrade = {"at": d.isoformat(timespec="seconds"), "host": ri["host"], "gpu_index": 0,
                       "gpu_name": ri["gpu_name"], "mode": "sequential_isolated", "contended": contended}
            files[f"repo/problems/{self.problem_name}/solution.py"] = final.encode()
            for rel, data in scratch.items():
                files[f"repo/problems/{self.problem_name}/{rel}"] = data
        # --- result.json
        if not self.recovered:
            files["result.json"] = self._result_json(
                has_solution=has_solution, correct=correct, peak=peak, mutated=mutated, check_exit=check_exit,
                bench_exit=bench_exit, check_el=check_el, bench_el=bench_el, hx=hx, harness_end=harness_end, end=end,
                usage=rend.usage, regrade=regrade, files=files)
        else:
            files["result.json"] = self._result_json(
                has_solution=has_solution, correct=False, peak=None, mutated=False, check_exit=None, bench_exit=None,
                check_el=None, bench_el=None, hx=hx, harness_end=harness_end, end=harness_end + 5, usage=rend.usage,
                regrade=None, files=files, force_reason="incomplete_session", session_complete=False)
        result = orjson.loads(files["result.json"])
        if self.secrets:
            self._plant_secrets(files)
        files.update(self.extra_files)
        secret_paths = ("agent_home/.claude/.credentials.json", "agent_home/.codex/auth.json",
                        "agent_home/.config/opencode/opencode.json", "agent_home/.grok/auth.json",
                        "opencode_openrouter_deepinfra_config/opencode/opencode.json", "or_provider_proxy.log")
        self.planted_secrets = [{"path": p_, "kind": "credential_file" if p_.endswith(".json") else "env_assignment"}
                                for p_ in secret_paths if p_ in files]
        if s.secrets_in_transcript:
            self.planted_secrets.append({"path": rend.tool_source or "transcript.jsonl", "kind": "env_assignment"})
        # --- write
        run_dir.mkdir(parents=True, exist_ok=True)
        for rel in sorted(files):
            fp = run_dir / rel
            fp.parent.mkdir(parents=True, exist_ok=True)
            with open(fp, "wb") as fh:
                fh.write(files[rel])
        for d in ("tmp", "cache/torch_extensions", "cache/cuda"):
            if era != "E0":
                (run_dir / d).mkdir(parents=True, exist_ok=True)
        if self.src_symlink and era != "E0":
            link = run_dir / "repo" / "src"
            if not link.is_symlink():
                os.symlink(f"{self.archive_base}/src", link)
        mt = int(end)
        for rel in files:
            os.utime(run_dir / rel, (mt, mt))
        return self._labels(files, rend, records, parse_errors, final, final_version, result, grok_host)

    # ------------------------------------------------------------------ helpers for write()
    def _lock_text(self, lines) -> bytes:
        out = []
        for tt, text in sorted(lines, key=lambda x: x[0]):
            d = datetime.fromtimestamp(int(tt), self.tz)
            out.append(f"{d.isoformat()} {text}")
        return ("\n".join(out) + "\n").encode() if out else b""

    def _classify(self, *, has_solution, correct, bench_exit, mutated, hx, session_complete, check_exit, files) -> tuple[str, bool]:
        import re
        if correct and bench_exit in (None, 0):
            return "pass", False
        if correct and bench_exit == 124:
            return "benchmark_timeout", True
        if correct:
            return "benchmark_failed", False
        if mutated:
            return "template_mutated", False
        if not has_solution:
            text = (files.get("stderr.log", b"")[-200000:] + b"\n" + self._error_events(files)).decode("utf-8", "replace").lower()
            if re.search(CREDIT_RE, text):
                return "provider_insufficient_credits", False
            if re.search(RATE_RE, text):
                return "provider_rate_limited", True
            if re.search(UNAVAIL_RE, text):
                return "provider_unavailable", True
        if hx == 124:
            return "timeout", not has_solution
        if not session_complete:
            return "incomplete_session", True
        if not has_solution:
            s = self.session
            out_tok = (self._usage_cache or {}).get("output_tokens") or 0
            if (s.ended and s.ended.get("stop_reason") == "tool_use") or out_tok < 5000:
                return "provider_early_stop", True
            return "no_solution", False
        if check_exit == 124:
            return "check_timeout", True
        if check_exit not in (None,):
            return "check_failed", False
        if bench_exit == 124:
            return "benchmark_timeout", True
        if bench_exit is not None:
            return "benchmark_failed", False
        if hx != 0:
            return "harness_error", True
        return "check_failed", False

    def _error_events(self, files) -> bytes:
        data = files.get("transcript.jsonl", b"")[-200000:]
        out = []
        any_json = False
        for ln in data.split(b"\n"):
            if not ln.startswith(b"{"):
                continue
            try:
                o = orjson.loads(ln)
            except orjson.JSONDecodeError:
                continue
            any_json = True
            if not isinstance(o, dict):
                continue
            if o.get("type") == "error" or o.get("error") or (o.get("type") == "result" and o.get("subtype") in ("error", "failure")) \
                    or (o.get("is_error") is True and o.get("subtype") in ("error", "failure")):
                out.append(orjson.dumps(o))
        if not any_json:
            return data
        return b"\n".join(out)

    _usage_cache: dict | None = None

    def _session_complete(self, hx: int) -> bool:
        s = self.session
        if hx == 124:
            return False
        if s.fmt in ("claude", "cursor", "gemini"):
            return bool(s.ended) and not s.cut
        if s.fmt == "grok_stream":
            return bool(s.ended) and not s.cut
        if s.fmt == "codex_text":
            return bool(s.ended) and not s.cut
        return hx == 0

    def _result_json(self, *, has_solution, correct, peak, mutated, check_exit, bench_exit, check_el, bench_el, hx,
                     harness_end, end, usage, regrade, files, force_reason=None, session_complete=None) -> bytes:
        era = self.era
        self._usage_cache = usage
        if session_complete is None:
            session_complete = self._session_complete(hx)
        u = self._usage_json(usage)
        elapsed = int(harness_end - self.start_epoch)
        if era == "E0":
            res = {"problem": self.problem_name, "harness": self.harness, "model": self.model,
                   "reasoning_effort": self.effort, "has_solution": has_solution, "correct": correct,
                   "peak_fraction": peak, "elapsed_seconds": elapsed, "harness_exit_code": hx,
                   "session_complete": session_complete, "usage": u}
            res.update(self.result_overrides)
            return _result_bytes(res)
        reason, retry = self._classify(has_solution=has_solution, correct=correct, bench_exit=bench_exit, mutated=mutated,
                                       hx=hx, session_complete=session_complete, check_exit=check_exit, files=files)
        if force_reason:
            reason, retry = force_reason, True
        st = datetime.fromtimestamp(self.start_epoch, self.tz)
        he = datetime.fromtimestamp(int(harness_end), self.tz)
        en = datetime.fromtimestamp(int(end), self.tz)
        res = {"run_id": self.run_id, "run_group": self.run_group, "problem": self.problem_name, "harness": self.harness,
               "model": self.model, "reasoning_effort": self.effort, "started_at": st.isoformat(),
               "harness_finished_at": he.isoformat(), "finished_at": en.isoformat(),
               "start_epoch": int(self.start_epoch), "harness_end_epoch": int(self.start_epoch) + elapsed,
               "end_epoch": int(end), "has_solution": has_solution, "correct": correct, "failure_reason": reason,
               "retryable_infra_failure": retry, "minimum_useful_output_tokens": 5000, "peak_fraction": peak,
               "template_mutated": mutated, "elapsed_seconds": elapsed,
               "total_elapsed_seconds": int(end) - int(self.start_epoch),
               "check_elapsed_seconds": check_el, "benchmark_elapsed_seconds": bench_el}
        if era in ("E2", "E3", "E4", "E5"):
            res["check_timeout_seconds"] = 1800 if era in ("E4", "E5") else 180
            res["benchmark_timeout_seconds"] = 7200 if self.problem_name == "02_kda_cutlass" else 1800
        res.update({"check_exit_code": check_exit, "benchmark_exit_code": bench_exit, "harness_exit_code": hx,
                    "session_complete": session_complete,
                    "agent_cuda_disabled": self.agent_cuda_disabled if era in ("E1", "E2") else False})
        if self.bench != "mega" and era not in ("E1",):
            res["agent_container"] = self.container
            res["agent_container_image"] = "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"
            res["agent_container_network"] = "bridge"
        if self.container and self.session_lock:
            qm = "agent_container_native_profiling_harness_gpu_lock"
        elif self.container:
            qm = "agent_container_native_profiling_path_wrapper_gpu_lock"
        elif self.agent_cuda_disabled:
            qm = "agent_phase_cuda_guard_harness_gpu_lock"
        else:
            qm = "path_wrapper_gpu_lock"
        res["gpu_queue_mode"] = qm
        out_tok = u.get("output_tokens") if isinstance(u, dict) else None
        res["output_tokens_per_second"] = round(out_tok / elapsed, 2) if out_tok and elapsed > 0 else None
        res["usage"] = u
        if regrade:
            res["regrade"] = regrade
        res.update(self.result_overrides)
        return _result_bytes(res)

    def _usage_json(self, usage) -> dict:
        keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens",
                "total_cost_usd")
        if usage is None or self.harness in NO_USAGE or self.harness.startswith("openrouter-") or self.harness.startswith("lfm-"):
            return {k: None for k in keys}
        out = {k: usage.get(k) for k in keys}
        if self.session.fmt == "claude":
            out["reasoning_tokens"] = None
            out["total_cost_usd"] = round(out["output_tokens"] * 75e-6 + out["cache_read_tokens"] * 1.5e-6
                                          + out["cache_creation_tokens"] * 18.75e-6, 4) if self.session.ended else None
        return out

    def _plant_secrets(self, files: dict) -> None:
        key = "sk-or-v1-FAKE" + hashlib.sha256(("secret" + self.run_id).encode()).hexdigest()
        files["opencode_openrouter_deepinfra_config/opencode/opencode.json"] = orjson.dumps(
            {"$schema": "https://opencode.ai/config.json",
             "provider": {"openrouter": {"options": {"apiKey": key, "baseURL": "https://openrouter.ai/api/v1"}}}},
            option=orjson.OPT_INDENT_2)
        files["or_provider_proxy.log"] = (f"proxy listening on 127.0.0.1:18431\nforwarding with OPENROUTER_API_KEY={key}\n").encode()

    def _labels(self, files, rend, records, parse_errors, final, final_version, result, grok_host) -> dict:
        from .labels import run_label
        return run_label(self, files, rend, records, parse_errors, final, final_version, result, grok_host)


def _nonempty_lines(data: bytes) -> int:
    """Physical non-empty lines (fast path when the file has no blank or whitespace-only lines)."""
    if b"\n\n" in data or data.startswith(b"\n") or b"\n \n" in data:
        return sum(1 for ln in data.split(b"\n") if ln.strip())
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _force_peak(text: str, peak: float) -> str:
    out = []
    for ln in text.split("\n"):
        if ln.startswith("peak_fraction:"):
            ln = f"peak_fraction: {peak:.4f}"
        out.append(ln)
    return "\n".join(out)


def _result_bytes(res: dict) -> bytes:
    """4-space indent, key order as given, the usage object inline on one line (spec 3.1)."""
    lines = ["{"]
    items = list(res.items())
    for i, (k, v) in enumerate(items):
        if isinstance(v, dict) and k == "usage":
            val = orjson.dumps(v).decode().replace('":', '": ').replace(',"', ', "')
        elif isinstance(v, dict):
            val = orjson.dumps(v, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n    ")
        else:
            val = orjson.dumps(v).decode()
        lines.append(f'    "{k}": {val}' + ("," if i < len(items) - 1 else ""))
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()
