"""The replay's probes, one family a file, each a function of the replay's `Session` registered for
the API kinds it has a form for (`@probe(NAME, *kinds)`, forensics/replay/registry.py, which imports
every module here) and written against the session's public interface only
(forensics/replay/session.py; tests/test_layers.py holds them to it).

A plain module API (`Model(*init)(*inputs)`):
check.py       check (and its stress rows), property: the deck's own check as replayed
stale.py       same-buffer, unsampled-region, fresh-state, fresh-inputs
calls.py       output-alias, determinism
poison.py      nan-poison
hacks.py       timed-outputs, distribution
kerneltrace.py kernel-trace
common.py      the steps these share (`prepare`: every probe's preamble, a warmed model on the check's
               inputs; judging an output)

Every kind:
timing.py      timing (CUDA events and the persisting-L2 reset; the stateful decks' wall-clock loops;
               the clock cross-check)

The stateful APIs:
generic.py     check, determinism, fresh-state written once against a `Driver`, and the rebuild loop
decode.py      cuda 03 megaqwen decode: alternate-cache, and the generic ones with its driver
step.py        mega 02 Kimi `step`: check, state-drift, same-buffer, alternate-cache, fresh-state
stepcore.py    the step API as they drive it: config, the shared reference and its chains, the
               solution's chain, the one-step and chained comparisons
rollout.py     cuda 04 MinGRU rollout: check, same-buffer, output-alias, and the generic ones
"""
