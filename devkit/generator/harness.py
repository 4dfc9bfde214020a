"""Renderers: one `Session` -> the files each harness really writes (spec archive-format.md section 5).

Each renderer returns a `Rendered`: {relative path: bytes} of the transcript and its side files
(Codex rollout and stderr log, Grok chat_history in agent_home), the record (line) count per
source, and the usage the runner's extractor would find.  Lines are compact JSON
(`"type":"result"` with no space), as these CLIs serialise.  The bulk of a Claude transcript,
the `task_progress` heartbeats, is rendered from a pre-built byte template.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

import orjson

from .session import Call, Session

BANNER_LINES = [
    "",
    "===========================",
    "== TensorRT-LLM Release ==",
    "===========================",
    "",
    "NVIDIA Release 1.2.1 (build 182736401)",
    "TensorRT-LLM Version 1.2.1",
    "",
    "Container image Copyright (c) 2026, NVIDIA CORPORATION & AFFILIATES. All rights reserved.",
    "",
    "Various files include modifications (c) NVIDIA CORPORATION & AFFILIATES.  All rights reserved.",
    "",
    "This container image and its contents are governed by the NVIDIA Deep Learning Container License.",
    "By pulling and using the container, you accept the terms and conditions of this license:",
    "https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license",
    "",
    "NOTE: CUDA Forward Compatibility mode ENABLED.",
    "  Using CUDA 13.1 driver version 590.44.01 with kernel driver version 595.84.",
    "  See https://docs.nvidia.com/deploy/cuda-compatibility/ for details.",
    "",
    "NOTE: The SHMEM allocation limit is set to the default of 64MB.  This may be",
    "   insufficient for TensorRT-LLM.  NVIDIA recommends the use of the following flags:",
    "   docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 ...",
    "",
    "WARNING: Detected NVIDIA GPU with compute capability beyond the tested set.",
    "  Kernels for this architecture will be JIT-compiled on first use.",
    "",
    "Running as uid 1000 (agent); HOME=/home/agent",
    "Mounted workspace at /workspace; lock wrappers at /kbh/bin",
    "GPU lock log: /home/agent/gpu_lock_container.log",
    "Network: bridge",
    "",
]
assert len(BANNER_LINES) == 32
BANNER = ("\n".join(BANNER_LINES) + "\n").encode()
BANNER_RECORDS = sum(1 for ln in BANNER_LINES if ln.strip())  # non-empty banner lines (records)


def iso(t: float, tz: timezone = timezone.utc, ms: bool = True) -> str:
    d = datetime.fromtimestamp(t, tz)
    if ms:
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
    return d.isoformat()


def _uuid(seed: str, i: int) -> str:
    h = hashlib.md5(f"{seed}:{i}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def dumps(o) -> bytes:
    return orjson.dumps(o) + b"\n"


@dataclass
class Rendered:
    files: dict[str, bytes] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    record_types: dict[str, dict[str, int]] = field(default_factory=dict)
    usage: dict | None = None
    tool_source: str = "transcript.jsonl"
    tool_source_format: str = ""
    usage_dedup: dict | None = None
    final_text: str = ""


class _Lines:
    """Accumulates lines of one source with counts by record type."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.n = 0
        self.types: dict[str, int] = {}

    def add(self, obj, rtype: str) -> None:
        self.parts.append(dumps(obj))
        self.n += 1
        self.types[rtype] = self.types.get(rtype, 0) + 1
        self.last_type = rtype

    def raw(self, data: bytes, n: int, rtype: str) -> None:
        self.parts.append(data)
        self.n += n
        self.types[rtype] = self.types.get(rtype, 0) + n
        self.last_type = rtype

    last_type: str | None = None

    def bytes(self, cut: bool = False) -> bytes:
        data = b"".join(self.parts)
        if cut and data and self.last_type:
            # the truncated last line is no longer a record of its type
            self.types[self.last_type] -= 1
            self.types["invalid"] = self.types.get("invalid", 0) + 1
            self.last_type = None
        if cut and data:
            # drop the final newline and the tail of the last line: a kill mid-write
            last_start = data.rstrip(b"\n").rfind(b"\n") + 1
            last = data[last_start:].rstrip(b"\n")
            data = data[:last_start] + last[: max(8, len(last) * 2 // 3)]
        return data


def _split_tokens(s: str, rng, lo: int = 2, hi: int = 7) -> list[str]:
    out, i = [], 0
    while i < len(s):
        k = rng.randint(lo, hi)
        out.append(s[i:i + k])
        i += k
    return out


# ============================================================================ Claude
def render_claude(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    model = meta["model"]
    rng = s.rng
    L = _Lines()
    banner = 0
    if s.container:
        L.raw(BANNER, BANNER_RECORDS, "banner")
        banner = 32
    L.add({"type": "system", "subtype": "init", "cwd": s.ws, "session_id": sid,
           "tools": ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "MultiEdit", "Write", "TodoWrite", "TaskCreate",
                     "TaskUpdate", "TaskOutput", "TaskStop", "WebFetch", "WebSearch"],
           "mcp_servers": [], "model": model, "permissionMode": "bypassPermissions",
           "slash_commands": ["compact", "context", "cost", "init", "review"], "apiKeySource": meta.get("api_key_source", "none"),
           "claude_code_version": meta.get("cli_version", "2.1.181"), "output_style": "default", "agents": [],
           "skills": [], "uuid": _uuid(sid, 0)}, "system")
    uid = [1]

    def nu() -> str:
        uid[0] += 1
        return _uuid(sid, uid[0])

    msg = {"id": None, "usage": None, "n": 0}
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    n_msgs = [0]

    def new_msg():
        n_msgs[0] += 1
        h = hashlib.sha256(f"{sid}:msg:{n_msgs[0]}".encode()).hexdigest()
        usage = {"input_tokens": rng.randint(1, 9), "cache_creation_input_tokens": rng.randint(0, 4000),
                 "cache_read_input_tokens": rng.randint(20000, 140000), "output_tokens": rng.randint(40, 2400),
                 "service_tier": "standard"}
        for k in totals:
            totals[k] += usage[k]
        msg.update(id=f"msg_01{h[:22]}", usage=usage, n=0)

    def block(b: dict) -> None:
        if msg["id"] is None:
            new_msg()
        msg["n"] += 1
        L.add({"type": "assistant", "message": {"id": msg["id"], "type": "message", "role": "assistant", "model": model,
                                                 "content": [b], "stop_reason": None, "stop_sequence": None,
                                                 "usage": msg["usage"]},
               "parent_tool_use_id": None, "session_id": sid, "uuid": nu()}, "assistant")

    # pre-built template for the heartbeat lines
    prog_head = b'{"type":"system","subtype":"task_progress","task_id":"'
    prog_mid = ('","description":"Running check and benchmark loop","usage":{"total_tokens":0,"tool_uses":0,'
                '"duration_ms":').encode()
    prog_tail = ('},"last_tool_name":"Bash","session_id":"' + sid + '","uuid":"').encode()
    tail_end = b'"}\n'
    active_task = [None, None]  # task id, tool_use_id

    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            block({"type": "tool_use", "id": c.id, "name": c.tool, "input": c.input})
            content = c.output
            L.add({"type": "user", "message": {"role": "user", "content": [
                {"tool_use_id": c.id, "type": "tool_result", "content": content, "is_error": c.is_error}]},
                "parent_tool_use_id": None, "session_id": sid, "uuid": nu(),
                "tool_use_result": {"stdout": content if c.tool == "Bash" and not c.is_error else "",
                                    "stderr": "", "interrupted": False, "isImage": False}}, "user")
            msg["id"] = None
            if c.background:
                active_task[0], active_task[1] = c.bg_id, c.id
                L.add({"type": "system", "subtype": "task_started", "task_id": c.bg_id, "tool_use_id": c.id,
                       "description": c.input.get("description", c.input.get("command", "")[:60]),
                       "task_type": "local_bash", "session_id": sid, "uuid": nu()}, "system")
            continue
        kind, payload, t = ev
        if kind == "text":
            block({"type": "text", "text": payload})
        elif kind == "thinking":
            native = meta.get("native_thinking", True)
            block({"type": "thinking", "thinking": "" if native else payload,
                   "signature": hashlib.sha256(payload.encode()).hexdigest() * 4})
        elif kind == "progress":
            n = payload["n"]
            tid = (payload["task_id"] or active_task[0] or "b" + sid[:6]).encode()
            tuid = (active_task[1] or "toolu_01" + sid.replace("-", "")[:22]).encode()
            base = _uuid(sid, 10_000_000 + uid[0])[:24].encode()
            tmpl = (prog_head + tid + b'","tool_use_id":"' + tuid + prog_mid + b"%d" + prog_tail + base
                    + b"%012x" + tail_end)
            u0 = uid[0]
            L.raw(b"".join([tmpl % (1000 * (i + 1), u0 + i) for i in range(n)]), n, "system")
            uid[0] += n
        elif kind == "tool_progress":
            for i in range(payload):
                L.add({"type": "tool_progress", "tool_use_id": active_task[1], "tool_name": "Bash",
                       "elapsed_time_seconds": 5 * (i + 1), "session_id": sid, "uuid": nu()}, "tool_progress")
        elif kind == "task_notification":
            L.add({"type": "system", "subtype": "task_notification", "task_id": payload["task_id"],
                   "tool_use_id": payload["tool_use_id"], "status": payload["status"],
                   "output_file": f"/tmp/claude/{payload['task_id']}.output", "summary": "Background command finished",
                   "session_id": sid, "uuid": nu()}, "system")
            active_task[0] = active_task[1] = None
        elif kind == "compact":
            L.add({"type": "system", "subtype": "compact_boundary", "compact_metadata": {"trigger": "auto",
                   "pre_tokens": 167000}, "summary": payload, "session_id": sid, "uuid": nu()}, "system")
        elif kind == "rate_limit":
            L.add({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": int(t) + 3600,
                   "rateLimitType": "five_hour", "overageStatus": "rejected", "overageDisabledReason": "out_of_credits",
                   "isUsingOverage": False}, "session_id": sid, "uuid": nu()}, "rate_limit_event")
        elif kind == "api_error":
            n_msgs[0] += 1
            h = hashlib.sha256(f"{sid}:err:{n_msgs[0]}".encode()).hexdigest()
            L.add({"type": "assistant", "message": {"id": f"msg_synth_{h[:20]}", "type": "message", "role": "assistant",
                   "model": "<synthetic>", "content": [{"type": "text", "text": payload["text"]}],
                   "stop_reason": "stop_sequence", "stop_sequence": "",
                   "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                             "cache_read_input_tokens": 0}},
                   "parent_tool_use_id": None, "session_id": sid, "uuid": nu(), "error": "api_error",
                   "isApiErrorMessage": True}, "assistant")
            msg["id"] = None
        elif kind == "end":
            e = payload
            usage = {"input_tokens": totals["input_tokens"], "cache_creation_input_tokens": totals["cache_creation_input_tokens"],
                     "cache_read_input_tokens": totals["cache_read_input_tokens"], "output_tokens": totals["output_tokens"],
                     "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"}
            cost = round(totals["output_tokens"] * 75e-6 + totals["cache_read_input_tokens"] * 1.5e-6
                         + totals["cache_creation_input_tokens"] * 18.75e-6, 4)
            rec = {"type": "result", "subtype": e["subtype"], "is_error": e["is_error"],
                   "duration_ms": int((e["t"] - meta["start_epoch"]) * 1000),
                   "duration_api_ms": int((e["t"] - meta["start_epoch"]) * 610), "num_turns": n_msgs[0],
                   "result": e["result"], "stop_reason": e["stop_reason"], "session_id": sid,
                   "total_cost_usd": cost if not e["is_error"] or totals["output_tokens"] else 0,
                   "usage": usage, "modelUsage": {model: {"inputTokens": totals["input_tokens"],
                                                           "outputTokens": totals["output_tokens"],
                                                           "costUSD": cost}},
                   "permission_denials": [], "uuid": nu()}
            if e["terminal_reason"]:
                rec["terminal_reason"] = e["terminal_reason"]
            if e["api_error_status"]:
                rec["api_error_status"] = e["api_error_status"]
            L.add(rec, "result")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "claude"
    r.usage_dedup = {"input_tokens": totals["input_tokens"], "output_tokens": totals["output_tokens"],
                     "cache_read_tokens": totals["cache_read_input_tokens"],
                     "cache_creation_tokens": totals["cache_creation_input_tokens"], "n_messages": n_msgs[0]}
    r.usage = r.usage_dedup
    r.final_text = s.ended["result"] if s.ended else ""
    r.meta_banner = banner  # type: ignore[attr-defined]
    return r


# ============================================================================ Codex
def render_codex(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    rng = s.rng
    L = _Lines()
    t0 = meta["start_epoch"]
    L.add({"timestamp": iso(t0), "type": "session_meta", "payload": {
        "id": sid, "timestamp": iso(t0), "cwd": s.ws, "originator": "codex_exec", "cli_version": "0.128.0",
        "instructions": None, "model_provider": "openai", "git": None}}, "session_meta")
    L.add({"timestamp": iso(t0 + 0.01), "type": "response_item", "payload": {"type": "message", "role": "developer", "content": [
        {"type": "input_text", "text": "<permissions instructions>\nFilesystem sandboxing: danger-full-access. Approval policy: never.\n</permissions instructions>"}]}},
        "response_item")
    L.add({"timestamp": iso(t0 + 0.02), "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "# AGENTS.md instructions for " + s.ws + "\n\n<INSTRUCTIONS>\n[REDACTED: local agent instructions]\n</INSTRUCTIONS>"},
        {"type": "input_text", "text": meta.get("prompt", "Read PROMPT.txt and write solution.py.")}]}}, "response_item")
    L.add({"timestamp": iso(t0 + 0.03), "type": "turn_context", "payload": {
        "cwd": s.ws, "approval_policy": "never", "sandbox_policy": {"mode": "danger-full-access"},
        "model": meta["model"], "effort": meta.get("effort") or "high", "summary": "auto"}}, "turn_context")
    L.add({"timestamp": iso(t0 + 0.04), "type": "event_msg", "payload": {"type": "task_started", "turn_id": "0",
           "model_context_window": 272000}}, "event_msg")
    tot = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0}
    last_text = ""

    def token_count(t):
        last = {"input_tokens": rng.randint(2000, 9000), "cached_input_tokens": rng.randint(20000, 120000),
                "output_tokens": rng.randint(30, 1500), "reasoning_output_tokens": rng.randint(0, 800)}
        last["total_tokens"] = last["input_tokens"] + last["output_tokens"]
        for k in tot:
            tot[k] += last[k]
        total = dict(tot, total_tokens=tot["input_tokens"] + tot["output_tokens"])
        L.add({"timestamp": iso(t), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": total, "last_token_usage": last, "model_context_window": 272000},
            "rate_limits": {"primary": {"used_percent": 12.0, "window_minutes": 300}}}}, "event_msg")

    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            if c.custom:
                L.add({"timestamp": iso(c.t), "type": "response_item", "payload": {
                    "type": "custom_tool_call", "status": "completed", "call_id": c.id, "name": c.tool,
                    "input": c.input["input"]}}, "response_item")
                L.add({"timestamp": iso(c.t + c.dur), "type": "response_item", "payload": {
                    "type": "custom_tool_call_output", "call_id": c.id, "output": c.output}}, "response_item")
            else:
                L.add({"timestamp": iso(c.t), "type": "response_item", "payload": {
                    "type": "function_call", "name": c.tool, "arguments": orjson.dumps(c.input).decode(),
                    "call_id": c.id}}, "response_item")
                L.add({"timestamp": iso(c.t + c.dur), "type": "response_item", "payload": {
                    "type": "function_call_output", "call_id": c.id, "output": c.output}}, "response_item")
            token_count(c.t + c.dur)
            continue
        kind, payload, t = ev
        if kind == "text":
            last_text = payload
            L.add({"timestamp": iso(t), "type": "event_msg", "payload": {"type": "agent_message", "message": payload}},
                  "event_msg")
            L.add({"timestamp": iso(t), "type": "response_item", "payload": {"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": payload}]}}, "response_item")
        elif kind == "thinking":
            L.add({"timestamp": iso(t), "type": "response_item", "payload": {
                "type": "reasoning", "summary": [{"type": "summary_text", "text": "**" + payload[:60] + "**"}],
                "content": None, "encrypted_content": "gAAAAB" + hashlib.sha256(payload.encode()).hexdigest() * 3}},
                "response_item")
        elif kind == "end":
            L.add({"timestamp": iso(t), "type": "event_msg", "payload": {"type": "task_complete", "turn_id": "0",
                   "last_agent_message": payload["result"]}}, "event_msg")
            last_text = payload["result"]
        elif kind == "api_error":
            pass  # codex reports provider errors in stderr.log
    r = Rendered()
    r.files["codex_session.jsonl"] = L.bytes(cut=s.cut)
    r.records["codex_session.jsonl"] = L.n
    r.record_types["codex_session.jsonl"] = dict(sorted(L.types.items()))
    # transcript.jsonl: container = banner only; host = codex exec's stdout (the final message)
    if s.container:
        r.files["transcript.jsonl"] = BANNER
        r.records["transcript.jsonl"] = BANNER_RECORDS
        r.record_types["transcript.jsonl"] = {"banner": BANNER_RECORDS}
    else:
        txt = (last_text.rstrip("\n") + "\n") if last_text else ""
        r.files["transcript.jsonl"] = txt.encode()
        r.records["transcript.jsonl"] = sum(1 for ln in txt.split("\n") if ln.strip())
        if r.records["transcript.jsonl"]:
            r.record_types["transcript.jsonl"] = {"text": r.records["transcript.jsonl"]}
    d0 = datetime.fromtimestamp(t0, timezone.utc)
    err = [f"[{d0.strftime('%Y-%m-%dT%H:%M:%S')}] OpenAI Codex v0.128.0 (research preview)", "--------",
           f"workdir: {s.ws}", f"model: {meta['model']}", "provider: openai", "approval: never",
           "sandbox: danger-full-access", f"reasoning effort: {meta.get('effort') or 'high'}",
           "reasoning summaries: auto", f"session id: {sid}", "--------", "user", "Read PROMPT.txt and write solution.py."]
    for c in s.calls:
        if c.tool == "exec_command":
            err.append(f"exec\n{c.input['cmd'].splitlines()[0][:200]} in {s.ws}")
            err.append(f" succeeded in {int(c.dur * 1000)}ms:" if (c.exit_code or 0) == 0 else f" exited {c.exit_code} in {int(c.dur * 1000)}ms:")
        elif c.tool == "apply_patch":
            err.append("apply_patch auto_approved=true:")
    for e in s.api_errors:
        err.append(f"ERROR: {e['text']}")
    if s.ended:
        err.append(f"tokens used: {tot['input_tokens'] + tot['output_tokens']}")
    r.files["stderr.log"] = ("\n".join(err) + "\n").encode()
    r.tool_source = "codex_session.jsonl"
    r.tool_source_format = "codex"
    r.usage = {"input_tokens": tot["input_tokens"], "output_tokens": tot["output_tokens"],
               "cache_read_tokens": tot["cached_input_tokens"], "reasoning_tokens": tot["reasoning_output_tokens"]}
    r.final_text = last_text
    return r


# ============================================================================ OpenCode
def render_opencode(s: Session, meta: dict) -> Rendered:
    sid = "ses_" + meta["session_id"].replace("-", "")[:26]
    rng = s.rng
    L = _Lines()
    tot = {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    n = [0]

    def pid(prefix):
        n[0] += 1
        return f"{prefix}_{hashlib.sha256(f'{sid}{n[0]}'.encode()).hexdigest()[:24]}"

    mid = [pid("msg")]
    step_open = [False]

    def start(t):
        if not step_open[0]:
            mid[0] = pid("msg")
            L.add({"type": "step_start", "timestamp": int(t * 1000), "sessionID": sid, "part": {
                "id": pid("prt"), "sessionID": sid, "messageID": mid[0], "type": "step-start"}}, "step_start")
            step_open[0] = True

    def finish(t, reason="tool-calls"):
        if step_open[0]:
            tk = {"input": rng.randint(500, 8000), "output": rng.randint(30, 1800), "reasoning": rng.randint(0, 600),
                  "cache": {"read": rng.randint(10000, 90000), "write": 0}}
            tot["input"] += tk["input"]
            tot["output"] += tk["output"]
            tot["reasoning"] += tk["reasoning"]
            tot["cache_read"] += tk["cache"]["read"]
            L.add({"type": "step_finish", "timestamp": int(t * 1000), "sessionID": sid, "part": {
                "id": pid("prt"), "sessionID": sid, "messageID": mid[0], "type": "step-finish", "reason": reason,
                "cost": 0, "tokens": tk}}, "step_finish")
            step_open[0] = False

    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            start(c.t)
            st = {"status": "error" if (c.is_error and c.tool != "bash") else "completed", "input": c.input,
                  "output": c.output, "title": c.input.get("description") or c.input.get("filePath", c.tool),
                  "metadata": ({"exit": c.exit_code, "description": c.input.get("description", "")}
                               if c.tool == "bash" else {}),
                  "time": {"start": int(c.t * 1000), "end": int((c.t + c.dur) * 1000)}}
            if st["status"] == "error":
                st["error"] = c.output
            L.add({"type": "tool_use", "timestamp": int((c.t + c.dur) * 1000), "sessionID": sid, "part": {
                "id": pid("prt"), "sessionID": sid, "messageID": mid[0], "type": "tool", "callID": c.id,
                "tool": c.tool, "state": st}}, "tool_use")
            finish(c.t + c.dur)
            continue
        kind, payload, t = ev
        if kind in ("text", "thinking"):
            start(t)
            if kind == "text":
                L.add({"type": "text", "timestamp": int(t * 1000), "sessionID": sid, "part": {
                    "id": pid("prt"), "sessionID": sid, "messageID": mid[0], "type": "text", "text": payload,
                    "time": {"start": int(t * 1000), "end": int(t * 1000) + 400}}}, "text")
        elif kind == "api_error":
            L.add({"type": "error", "timestamp": int(t * 1000), "sessionID": sid, "error": {
                "name": "APIError", "data": {"message": payload["text"], "statusCode": payload["status"]}}}, "error")
        elif kind == "end":
            finish(t, "stop")
    finish(s.t, "stop")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "opencode"
    r.usage = {"input_tokens": tot["input"], "output_tokens": tot["output"], "reasoning_tokens": tot["reasoning"],
               "cache_read_tokens": tot["cache_read"], "cache_creation_tokens": tot["cache_write"]}
    return r


# ============================================================================ Cursor
_CURSOR_KEY = {"shell": "shellToolCall", "read": "readToolCall", "write": "writeToolCall", "edit": "editToolCall",
               "glob": "globToolCall", "grep": "grepToolCall", "ls": "lsToolCall"}


def render_cursor(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    L = _Lines()
    L.add({"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": s.ws, "session_id": sid,
           "model": meta["model"], "permissionMode": "default"}, "system")
    L.add({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": meta.get(
        "prompt", "Read PROMPT.txt and write solution.py.")}]}, "session_id": sid}, "user")
    rng = s.rng
    usage = {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0}
    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            key = _CURSOR_KEY.get(c.tool, c.tool + "ToolCall")
            L.add({"type": "tool_call", "subtype": "started", "call_id": c.id, "tool_call": {key: {"args": c.input}},
                   "session_id": sid, "timestamp_ms": int(c.t * 1000)}, "tool_call")
            if c.tool == "shell":
                res = {"success": {"command": c.input["command"], "workingDirectory": s.ws, "exitCode": c.exit_code or 0,
                                   "signal": "", "stdout": c.output, "stderr": "", "executionTime": int(c.dur * 1000)}}
                if c.exit_code:
                    res = {"failure": res["success"]}
            elif c.tool == "read":
                res = {"success": {"content": c.output, "isEmpty": not c.output, "exceededLimit": False,
                                   "totalLines": c.output.count("\n") + 1, "path": c.input["path"]}}
            else:
                res = {"success": {"path": c.input.get("path", ""), "message": c.output}}
            L.add({"type": "tool_call", "subtype": "completed", "call_id": c.id,
                   "tool_call": {key: {"args": c.input, "result": res}}, "session_id": sid,
                   "timestamp_ms": int((c.t + c.dur) * 1000)}, "tool_call")
            for k, lo, hi in (("inputTokens", 500, 6000), ("outputTokens", 20, 900), ("cacheReadTokens", 5000, 60000)):
                usage[k] += rng.randint(lo, hi)
            continue
        kind, payload, t = ev
        if kind == "text":
            L.add({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": payload}]},
                   "session_id": sid}, "assistant")
        elif kind == "thinking":
            L.add({"type": "thinking", "subtype": "delta", "text": payload, "session_id": sid,
                   "timestamp_ms": int(t * 1000)}, "thinking")
        elif kind == "api_error":
            L.add({"type": "error", "message": payload["text"], "status": payload["status"], "session_id": sid}, "error")
        elif kind == "end":
            e = payload
            L.add({"type": "result", "subtype": e["subtype"], "duration_ms": int((t - meta["start_epoch"]) * 1000),
                   "duration_api_ms": int((t - meta["start_epoch"]) * 700), "is_error": e["is_error"],
                   "result": e["result"], "session_id": sid, "request_id": _uuid(sid, 99), "usage": usage}, "result")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "cursor"
    r.usage = {"input_tokens": usage["inputTokens"], "output_tokens": usage["outputTokens"],
               "cache_read_tokens": usage["cacheReadTokens"], "cache_creation_tokens": usage["cacheWriteTokens"]}
    return r


# ============================================================================ Gemini
def render_gemini(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    L = _Lines()
    rng = s.rng
    t0 = meta["start_epoch"]
    L.add({"type": "init", "timestamp": iso(t0), "session_id": sid, "model": meta["model"]}, "init")
    L.add({"type": "message", "timestamp": iso(t0 + 0.1), "role": "user",
           "content": meta.get("prompt", "Read PROMPT.txt and write solution.py.")}, "message")
    stats = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "tool_calls": 0}
    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            stats["tool_calls"] += 1
            L.add({"type": "tool_use", "timestamp": iso(c.t), "tool_name": c.tool, "tool_id": c.id,
                   "parameters": c.input}, "tool_use")
            out = c.output
            rec = {"type": "tool_result", "timestamp": iso(c.t + c.dur), "tool_id": c.id,
                   "status": "error" if c.is_error else "success", "output": out}
            if c.is_error:
                rec["error"] = {"type": "shell_exit", "message": f"Command exited with code {c.exit_code}"}
            L.add(rec, "tool_result")
            i, o = rng.randint(800, 9000), rng.randint(20, 1200)
            stats["input_tokens"] += i
            stats["output_tokens"] += o
            stats["cached"] += rng.randint(0, 50000)
            continue
        kind, payload, t = ev
        if kind == "text":
            for tok in _split_tokens(payload, rng, 20, 80):
                L.add({"type": "message", "timestamp": iso(t), "role": "assistant", "content": tok, "delta": True}, "message")
        elif kind == "api_error":
            L.add({"type": "error", "timestamp": iso(t), "severity": "error", "message": payload["text"],
                   "status": payload["status"]}, "error")
        elif kind == "end":
            stats["total_tokens"] = stats["input_tokens"] + stats["output_tokens"]
            L.add({"type": "result", "timestamp": iso(t), "status": "error" if payload["is_error"] else "success",
                   "stats": dict(stats, duration_ms=int((t - t0) * 1000))}, "result")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "gemini"
    r.usage = {"input_tokens": stats["input_tokens"], "output_tokens": stats["output_tokens"],
               "cache_read_tokens": stats["cached"]}
    return r


# ============================================================================ Kimi
def render_kimi(s: Session, meta: dict) -> Rendered:
    L = _Lines()
    L.add({"role": "user", "content": meta.get("prompt", "Read PROMPT.txt and write solution.py.")}, "user")
    pend: list = []  # think/text blocks waiting for the next assistant message
    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            args = c.raw_arguments if c.raw_arguments is not None else orjson.dumps(c.input).decode()
            L.add({"role": "assistant", "content": pend or [{"type": "text", "text": ""}],
                   "tool_calls": [{"type": "function", "id": c.id, "function": {"name": c.tool, "arguments": args}}]},
                  "assistant")
            pend = []
            L.add({"role": "tool", "tool_call_id": c.id, "content": [{"type": "text", "text": c.output}]}, "tool")
            continue
        kind, payload, t = ev
        if kind == "text":
            pend.append({"type": "text", "text": payload})
        elif kind == "thinking":
            pend.append({"type": "think", "think": payload})
        elif kind == "api_error":
            L.add({"role": "assistant", "content": [{"type": "text", "text": payload["text"]}]}, "assistant")
        elif kind == "end":
            if pend or payload["result"]:
                L.add({"role": "assistant", "content": pend + [{"type": "text", "text": payload["result"]}]}, "assistant")
                pend = []
    if pend:
        L.add({"role": "assistant", "content": pend}, "assistant")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "kimi"
    r.usage = None
    return r


# ============================================================================ Droid
def render_droid(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    L = _Lines()
    t0 = meta["start_epoch"]
    L.add({"type": "system", "subtype": "init", "cwd": s.ws, "session_id": sid,
           "tools": ["Read", "LS", "Execute", "Edit", "Create", "Grep", "Glob", "TodoWrite", "WebSearch", "FetchUrl"],
           "model": meta["model"], "reasoning_effort": meta.get("effort") or "none"}, "system")
    n = [0]

    def mid():
        n[0] += 1
        return _uuid(sid, 500 + n[0])

    L.add({"type": "message", "role": "user", "id": mid(), "text": meta.get("prompt", "Read PROMPT.txt and write solution.py."),
           "timestamp": int(t0 * 1000), "session_id": sid}, "message")
    for ev in s.events:
        if isinstance(ev, Call):
            c: Call = ev
            m = mid()
            L.add({"type": "tool_call", "id": c.id, "messageId": m, "toolId": c.tool, "toolName": c.tool,
                   "parameters": c.input, "timestamp": int(c.t * 1000), "session_id": sid}, "tool_call")
            L.add({"type": "tool_result", "id": c.id, "messageId": m, "toolId": c.tool, "isError": c.is_error,
                   "value": c.output, "timestamp": int((c.t + c.dur) * 1000), "session_id": sid}, "tool_result")
            continue
        kind, payload, t = ev
        if kind == "text":
            L.add({"type": "message", "role": "assistant", "id": mid(), "text": payload, "timestamp": int(t * 1000),
                   "session_id": sid}, "message")
        elif kind == "api_error":
            L.add({"type": "error", "source": "llm", "message": payload["text"], "timestamp": int(t * 1000),
                   "session_id": sid}, "error")
        elif kind == "end":
            L.add({"type": "message", "role": "assistant", "id": mid(), "text": payload["result"],
                   "timestamp": int(t * 1000), "session_id": sid}, "message")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "droid"
    r.usage = None
    return r


# ============================================================================ Grok
def _describe(c: Call) -> str:
    cmd = c.input.get("command") or c.input.get("cmd")
    if cmd:
        return f" I'll run `{cmd.splitlines()[0][:300]}`."
    p = c.input.get("path") or c.input.get("file_path") or ""
    return f" Next: {c.tool} {p}."


def render_grok(s: Session, meta: dict) -> Rendered:
    sid = meta["session_id"]
    rng = s.rng
    L = _Lines()
    if s.container:
        L.raw(BANNER, BANNER_RECORDS, "banner")
    for ev in s.events:
        if isinstance(ev, Call):
            # the token stream has no tool events; the agent's reasoning names what it does
            for tok in _split_tokens(_describe(ev), rng):
                L.add({"type": "thought", "data": tok}, "thought")
            continue
        kind, payload, t = ev
        if kind == "thinking":
            for tok in _split_tokens(payload + " ", rng):
                L.add({"type": "thought", "data": tok}, "thought")
        elif kind == "text":
            for tok in _split_tokens(payload + "\n", rng):
                L.add({"type": "text", "data": tok}, "text")
        elif kind == "api_error":
            L.add({"type": "error", "message": payload["text"], "code": payload["status"]}, "error")
        elif kind == "end":
            for tok in _split_tokens(payload["result"], rng):
                L.add({"type": "text", "data": tok}, "text")
            L.add({"type": "end", "stopReason": "EndTurn", "sessionId": sid, "requestId": _uuid(sid, 7)}, "end")
    r = Rendered()
    r.files["transcript.jsonl"] = L.bytes(cut=s.cut and not s.container)
    r.records["transcript.jsonl"] = L.n
    r.record_types["transcript.jsonl"] = dict(sorted(L.types.items()))
    r.tool_source_format = "grok_stream"
    r.usage = None
    if s.container:
        H = _Lines()
        H.add({"type": "system", "content": "You are Grok, a coding agent working in /workspace."}, "system")
        H.add({"type": "user", "content": [{"type": "text", "text": meta.get("prompt", "Read PROMPT.txt and write solution.py.")}]}, "user")
        pend_reason: list[str] = []
        for ev in s.events:
            if isinstance(ev, Call):
                c: Call = ev
                if pend_reason:
                    H.add({"type": "reasoning", "summary": [{"type": "summary_text", "text": " ".join(pend_reason)}],
                           "encrypted_content": hashlib.sha256(pend_reason[0].encode()).hexdigest() * 2}, "reasoning")
                    pend_reason = []
                H.add({"type": "assistant", "model_id": meta["model"], "content": "",
                       "tool_calls": [{"id": c.id, "name": c.tool, "arguments": orjson.dumps(c.input).decode()}]},
                      "assistant")
                H.add({"type": "tool_result", "tool_call_id": c.id, "content": c.output, "is_error": c.is_error},
                      "tool_result")
                continue
            kind, payload, t = ev
            if kind == "thinking":
                pend_reason.append(payload)
            elif kind == "text":
                H.add({"type": "assistant", "model_id": meta["model"], "content": payload, "tool_calls": []}, "assistant")
            elif kind == "end":
                H.add({"type": "assistant", "model_id": meta["model"], "content": payload["result"], "tool_calls": []},
                      "assistant")
        d = datetime.fromtimestamp(meta["start_epoch"], timezone.utc)
        base = f"agent_home/.grok/sessions/{d.strftime('%Y%m%d')}-{sid[:8]}"
        r.files[f"{base}/chat_history.jsonl"] = H.bytes(cut=s.cut)
        r.records[f"{base}/chat_history.jsonl"] = H.n
        r.record_types[f"{base}/chat_history.jsonl"] = dict(sorted(H.types.items()))
        r.files[f"{base}/summary.json"] = orjson.dumps({"info": {"cwd": s.ws, "id": sid}}, option=orjson.OPT_INDENT_2) + b"\n"
        r.tool_source = f"{base}/chat_history.jsonl"
        r.tool_source_format = "grok_chat"
    else:
        r.tool_source = None  # type: ignore[assignment]
    return r


RENDERERS = {"claude": render_claude, "codex_text": render_codex, "opencode": render_opencode, "cursor": render_cursor,
             "gemini": render_gemini, "kimi": render_kimi, "droid": render_droid, "grok_stream": render_grok}


def render(s: Session, meta: dict) -> Rendered:
    return RENDERERS[s.fmt](s, meta)
