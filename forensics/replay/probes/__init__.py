"""The replay's probes, one family a file, each registered for the API kinds it has a form for
(forensics/replay/registry.py) and written against the session's public interface only
(forensics/replay/session.py; tests/test_layers.py holds them to it).

generic.py   the stateful kinds' probes written once against a `Driver` (check, determinism,
             fresh-state, the rebuild loop)
decode.py    cuda 03 megaqwen decode: alternate-cache, and the generic ones with its driver
step.py      mega 02 Kimi `step`: check, state-drift, same-buffer, alternate-cache, fresh-state
rollout.py   cuda 04 MinGRU rollout: check, same-buffer, output-alias, and the generic ones
common.py    steps the plain-module probes share (a warmed model on the check's inputs, judging)
"""
