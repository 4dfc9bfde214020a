"""The shared shell reader (`forensics.text.shell`) and the two views on it: the contamination
walker (`forensics.transcripts.access`) and the timeline (`forensics.analyze.timeline.shell`).

These pin the cases where the two former parsers disagreed and one reading now serves both."""

from __future__ import annotations

from forensics.text import shell as sh
from forensics.analyze.timeline import shell as tsh


def _cmds(text):
    return [c for k, c in sh.parse(text) if k == "cmd"]


def test_redirections_keep_fd_and_heredoc_bodies_keep_newlines():
    c = _cmds("python check.py 2>&1 >> log.txt &> all.log <<-'EOF'\n\tprint(1)\n\tEOF\n")[0]
    assert [(r.op, r.word.text, r.fd) for r in c.redirs] == [(">&", "1", 2), (">>", "log.txt", None),
                                                             ("&>", "all.log", None), ("<<-", "EOF", None)]
    assert c.redirs[-1].body == "print(1)\n" and c.redirs[-1].word.quoted   # <<- strips leading tabs
    assert c.heredoc == "print(1)"                     # contamination form: no final newline
    hd = tsh.parse("cat > f.py <<-EOF\n\tx = 1\n\tEOF")[0].heredoc()
    assert hd.target == "x = 1\n" and not hd.quoted    # timeline form: the file's bytes


def test_here_string_is_not_a_here_document():
    c = _cmds("bash <<< 'cat /etc/passwd'\necho done")
    assert c[0].heredoc == "cat /etc/passwd" and c[1].argv == ["echo", "done"]
    t = tsh.parse("cat > f.py <<< 'x'\nEOF")
    # the here-string is the command's stdin text ('x'), and the next line is a command, not a body
    assert t[0].heredoc().op == "<<<" and t[0].heredoc().target == "x" and t[1].words == ["EOF"]


def test_backslash_newline_and_ansi_c_quoting():
    assert _cmds('echo "a\\\nb" c\\\nd')[0].argv == ["echo", "ab", "cd"]
    assert _cmds(r"printf $'a\\b\tc\'d'")[0].argv == ["printf", "a\\b\tc'd"]


def test_pipes_background_and_substitutions():
    items = sh.parse("x=$(python check.py | tail -1) ; make & wait")
    kinds = [k for k, _ in items]
    assert kinds == ["push", "cmd", "cmd", "pop", "cmd", "cmd", "cmd"]
    sub = [c for k, c in items if k == "cmd" and c.substitution]
    assert [c.argv[0] for c in sub] == ["python", "tail"] and sub[0].pipe_out and sub[1].piped_from_prev
    make = next(c for k, c in items if k == "cmd" and c.argv == ["make"])
    assert make.background and not make.substitution
    # the timeline does not run substitutions as commands of their own
    assert [c.argv0 for c in tsh.parse("x=$(python check.py | tail -1) ; make & wait")] == ["__assign__", "make", "wait"]


def test_unwrap_one_list_of_launchers():
    env: dict[str, str] = {}
    assert sh.unwrap(["sudo", "-u", "me", "nice", "-n", "5", "timeout", "-k", "5", "600", "env", "-u", "X",
                      "KBH_QUICK=1", "uv", "run", "--with", "x", "python", "check.py"], env) == ["python", "check.py"]
    assert env == {"KBH_QUICK": "1"}
    assert sh.unwrap(["then", "ncu", "--set", "full", "-o", "p", "python3", "benchmark.py"]) == ["python3", "benchmark.py"]
    assert sh.unwrap(["time", "-p", "python", "x.py"]) == ["python", "x.py"]
    assert sh.unwrap(["uv", "pip", "install", "torch"]) == []
    assert sh.unwrap(["/x/{", "a"]) == ["/x/{", "a"]            # a path ending in '{' is not a reserved word
    assert sh.split_assignments(["A=1", "env", "B=2", "timeout", "5", "x"]) == ({"A": "1", "B": "2"}, ["timeout", "5", "x"])


def test_shell_c_script_and_cd_target():
    assert sh.shell_c_script(["bash", "-lc", "make"]) == "make"
    assert sh.shell_c_script(["/bin/sh", "-e", "-c", "make", "argv0"]) == "make"
    assert sh.shell_c_script(["bash", "-o", "pipefail", "-c", "make"]) == "make"
    assert sh.shell_c_script(["bash", "script.sh", "-c", "x"]) is None   # options end at the script
    assert sh.shell_c_script(["python", "-c", "x"]) is None
    assert sh.cd_target(["cd"]) is None and sh.cd_target(["cd", "-P", "d"]) == "d" and sh.cd_target(["cd", "-"]) == "-"


def test_timeline_sees_conditions_wrapped_shells_and_scoped_cd():
    cmds = tsh.parse("if python check.py; then echo ok; fi")
    assert [c.words for c in cmds] == [["python", "check.py"], ["echo", "ok"]]
    cmds = tsh.parse("timeout 60 bash -c 'cd sub && python benchmark.py' > out.log", "/w")
    assert cmds[-1].words == ["python", "benchmark.py"] and cmds[-1].cwd == "/w/sub"
    assert cmds[-1].stdout_files() == [("out.log", False)]
    cmds = tsh.parse("(cd /tmp && ls) ; cd a ; cd b ; cd - ; cat x", "/w")
    assert [c.cwd for c in cmds] == ["/w", "/tmp", "/w", "/w/a", "/w/a/b", "/w/a"]
    assert tsh.parse("cd x & python check.py", "/w")[-1].cwd == "/w"   # a background cd runs in a subshell
