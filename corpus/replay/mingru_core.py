"""Sidecar shared by the planted cuda 04 grid MinGRU solutions: the environment step, the policy and
the rollout in plain torch, with the deck's parameter names (w_enc, b_enc, w_gru, w_a, b_a, w_v, b_v)."""
import torch
import torch.nn as nn

GRID, HID, LAYERS = 11, 256, 3
MUL, MASK = 6364136223846793005, 0x7FFFFFFFFFFFFFFF


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_enc = nn.Parameter(torch.zeros(HID, 4))
        self.b_enc = nn.Parameter(torch.zeros(HID))
        self.w_gru = nn.Parameter(torch.zeros(LAYERS, 3 * HID, HID))
        self.w_a = nn.Parameter(torch.zeros(4, HID))
        self.b_a = nn.Parameter(torch.zeros(4))
        self.w_v = nn.Parameter(torch.zeros(1, HID))
        self.b_v = nn.Parameter(torch.zeros(1))

    def forward(self, obs, state):
        return policy_forward(self, obs, state)


def gates(model):
    """Per layer the (zh, zg, zp) blocks of w_gru."""
    return [w.split(HID, dim=0) for w in model.w_gru]


def policy(model, parts, obs, state):
    h = obs.float() @ model.w_enc.T + model.b_enc
    new_state = torch.empty(obs.shape[0], LAYERS, HID, dtype=torch.float32, device=obs.device)
    for layer, (wh, wg, wp) in enumerate(parts):
        s = state[:, layer].float()
        out = s + torch.sigmoid(h @ wg.T) * (torch.tanh(h @ wh.T) - s)
        p = torch.sigmoid(h @ wp.T)
        h = p * out + (1 - p) * h
        new_state[:, layer] = out
    return h @ model.w_a.T + model.b_a, new_state, (h @ model.w_v.T + model.b_v).squeeze(-1)


@torch.no_grad()
def policy_forward(model, obs, state):
    return policy(model, gates(model), obs, state)


def env_step(agent, food, actions, rng_state):
    dx = torch.tensor([0.0, 0.0, -1.0, 1.0], device=agent.device)
    dy = torch.tensor([-1.0, 1.0, 0.0, 0.0], device=agent.device)
    a = actions.long()
    agent = torch.stack([agent[:, 0] + dx[a], agent[:, 1] + dy[a]], dim=1).clamp(0, GRID - 1)
    hit = (agent == food).all(dim=1)
    food, rng = food.clone(), rng_state.clone()
    if bool(hit.any()):
        rng = (rng * MUL + 1) & MASK
        fx = (rng % GRID).float()
        rng = (rng * MUL + 1) & MASK
        fy = (rng % GRID).float()
        food[:, 0] = torch.where(hit, fx, food[:, 0])
        food[:, 1] = torch.where(hit, fy, food[:, 1])
    return agent, food, hit.float(), rng.clone()


@torch.no_grad()
def rollout(model, parts, num_envs, horizon, seed):
    dev = model.w_enc.device
    g = torch.Generator().manual_seed(seed)
    agent = torch.randint(0, GRID, (num_envs, 2), generator=g).float().to(dev)
    food = torch.randint(0, GRID, (num_envs, 2), generator=g).float().to(dev)
    rng = (torch.arange(num_envs, dtype=torch.int64) + seed * 10007).to(dev)
    state = torch.zeros(num_envs, LAYERS, HID, device=dev)
    rewards = torch.zeros(num_envs, device=dev)
    logits = torch.zeros(num_envs, 4, device=dev)
    for _ in range(horizon):
        obs = torch.stack([(food[:, 0] - agent[:, 0]) / GRID, (food[:, 1] - agent[:, 1]) / GRID,
                           agent[:, 0] / (GRID - 1), agent[:, 1] / (GRID - 1)], dim=1)
        logits, state, _ = policy(model, parts, obs, state)
        agent, food, r, rng = env_step(agent, food, logits.argmax(dim=-1), rng)
        rewards += r
    return {"rewards": rewards, "positions": agent.round().long(), "last_logits": logits, "state": state}
