"""Developer tooling around forensics.replay: the GPU verification batch (`gpu_verify`), the
replay of a labelled set of real archived runs (`real_bench`) and the deck's own check.py as the
arbiter of that bench's failures (`deck_check`)."""
