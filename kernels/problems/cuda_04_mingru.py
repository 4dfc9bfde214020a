"""cuda/04_grid_mingru_sps (C4): env_step / policy_forward / run."""
from __future__ import annotations

import torch

from forensics import problems

from ..common import check_tensor, load_reference_module, merge_results
from ..registry import ProblemSpec
from ._util import cases, lazy_triton, stress

_REF = load_reference_module("cuda_04_mingru.py", "_mingru_ref")


def make_inputs(spec, shape, seed, device="cpu"):
    """check.py's policy_forward inputs: manual_seed(seed), then obs = randn(256,4) and
    state = 0.1*randn(256,3,256) drawn ON the device (CUDA in the deck)."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    n = shape.get("num_envs", 256)
    obs = torch.randn(n, 4, device=device)
    state = 0.1 * torch.randn(n, _REF.N_LAYERS, _REF.HIDDEN, device=device)
    return [obs, state]


def env_step_inputs(seed, device="cpu", n=256):
    """check.py's env_step inputs: randint agent, food, actions on the device; rng = arange + seed.
    The deck seeds once per seed and draws the policy_forward inputs first (obs, then state), so
    the env_step draws continue that stream: the same two draws are made here and dropped."""
    make_inputs(None, {"num_envs": n}, seed, device)
    agent = torch.randint(0, _REF.GRID, (n, 2), device=device).float()
    food = torch.randint(0, _REF.GRID, (n, 2), device=device).float()
    actions = torch.randint(0, 4, (n,), device=device)
    rng = torch.arange(n, device=device, dtype=torch.int64) + seed
    return [agent, food, actions, rng]


def compare_env_step(ref_out, sol_out):
    """agent, food, rng torch.equal; reward exact."""
    names = ("agent", "food", "reward", "rng_state")
    parts = {n: check_tensor(r, s, 0.0, 0.0, n) for n, r, s in zip(names, ref_out, sol_out)}
    return merge_results(parts)


def compare_run(ref_out, sol_out):
    """positions exactly equal, rewards allclose atol 1e-5 (torch.allclose's default rtol 1e-5, as
    the deck calls it without one), last_logits fp32 1e-3."""
    parts = {"positions": check_tensor(ref_out["positions"], sol_out.get("positions"), 0.0, 0.0, "positions"),
             "rewards": check_tensor(ref_out["rewards"], sol_out.get("rewards"), 1e-5, 1e-5, "rewards"),
             "last_logits": check_tensor(ref_out["last_logits"], sol_out.get("last_logits"), 1e-3, 1e-3, "last_logits")}
    return merge_results(parts)


def compare(spec, ref_out, sol_out, case, inputs):
    """policy_forward outputs (logits, state, value) at fp32 1e-3 or the stress case's tolerance."""
    if not isinstance(sol_out, (tuple, list)) or len(sol_out) != 3:
        return check_tensor(torch.zeros(1), None, 0, 0, "policy_forward output (need 3-tuple)")
    atol, rtol = spec.tolerance_for(torch.float32, case)
    parts = {n: check_tensor(r, s, atol, rtol, n) for n, r, s in zip(("logits", "state", "value"), ref_out, sol_out)}
    return merge_results(parts)


def oracle(model, inputs):
    """policy_forward in fp64 written with explicit gates (independent of the reference helper)."""
    obs, state = inputs
    p = {n: t.double() for n, t in model.named_parameters()}
    h = obs.double() @ p["w_enc"].T + p["b_enc"]
    outs = []
    for layer in range(p["w_gru"].shape[0]):
        w = p["w_gru"][layer]
        Hd = w.shape[1]
        cand = torch.tanh(h @ w[:Hd].T)
        z = torch.sigmoid(h @ w[Hd:2 * Hd].T)
        keep = torch.sigmoid(h @ w[2 * Hd:].T)
        s = state[:, layer].double()
        out = (1 - z) * s + z * cand
        outs.append(out)
        h = keep * out + (1 - keep) * h
    return ((h @ p["w_a"].T + p["b_a"]).float(), torch.stack(outs, 1).float(),
            (h @ p["w_v"].T + p["b_v"]).squeeze(-1).float())


SPECS = [ProblemSpec(
    entry=problems.get("04_grid_mingru_sps", "2026-07-16"),
    regime="sps", peak_key="peak_sps", peak_value=1.5e8, global_names=(),
    stress_cases=cases(stress("small_obs_state", 1e-6, 1e-4, inputs=(0, 1), scale=1e-2, dtype_key="float32"),
                       stress("large_obs_state", 1e-1, 1e-4, inputs=(0, 1), scale=8.0, dtype_key="float32")),
    flops_expr="0", bytes_expr="0",
    interface=dict(init="Model()", forward="forward(obs, state) == policy_forward(model, obs, state)",
                   state_dict={n: dict(kind="parameter", dtype="float32", shape=s, persistent=True) for n, s in
                               (("w_enc", "(256,4)"), ("b_enc", "(256,)"), ("w_gru", "(3,768,256)"), ("w_a", "(4,256)"),
                                ("b_a", "(4,)"), ("w_v", "(1,256)"), ("b_v", "(1,)"))},
                   module_helpers=[], import_reference_allowed=False, cuda_language_gate=True),
    stateful=dict(
        api=["env_step(agent, food, actions, rng_state) -> (agent, food, reward, rng_state)  [optional]",
             "policy_forward(model, obs, state) -> (logits (N,4), new_state (N,3,256), value (N,))  [optional; "
             "else model(obs, state)]",
             "run(num_envs, horizon, seed, model=None) -> {rewards, positions, last_logits, state}  [required]"],
        required=["Model", "run"], optional=["env_step", "policy_forward"],
        check=["ref.reset_parameters(seed); sol strict load",
               "policy_forward on make_inputs(seed) under the stress cases (compare)",
               "env_step on forensics.kernels.problems.cuda_04_mingru.env_step_inputs(seed) (compare_env_step: exact)",
               "run(128, 8, seed, model=...) (compare_run: positions exact, rewards atol 1e-5, last_logits 1e-3)"],
        helpers="forensics.kernels.problems.cuda_04_mingru: env_step_inputs, compare_env_step, compare_run; "
                "reference module: env_step, observe, policy_forward, run, Model.reset_parameters",
        benchmark="one model pair, solution strict-loaded from reference.Model() (seed 0); warmup "
                  "run(min(N,1024), min(h,4)); 3 wall-clock trials seed 2026+idx+trial; median; sps = N*h/wall; "
                  "frac = sps/1.5e8"),
    make_inputs_fn=make_inputs, compare_fn=compare, oracle_fn=oracle, triton_fn=lazy_triton("mingru"),
    stress_since="2026-07-16",
    notes=["env_step's argument and return order is our reading (agent, food, actions, rng_state).",
           "The env_step check's RNG draw order after manual_seed(seed) is our reading."],
)]
