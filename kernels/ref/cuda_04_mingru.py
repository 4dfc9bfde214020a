"""cuda/04_grid_mingru_sps: grid food-chase environment + 3-layer MinGRU policy rollout."""
import torch
import torch.nn as nn

GRID = 11
HIDDEN = 256
N_LAYERS = 3
N_ACTIONS = 4
LCG_MUL = 6364136223846793005
LCG_MASK = 0x7FFFFFFFFFFFFFFF


def lcg_next(rng):
    return (rng * LCG_MUL + 1) & LCG_MASK        # int64 wraparound, then mask


def env_step(agent, food, actions, rng_state):
    """-> (agent, food, reward, rng_state).  agent/food (N,2) float (x, y); actions int64."""
    dx = torch.tensor([0.0, 0.0, -1.0, 1.0], device=agent.device)
    dy = torch.tensor([-1.0, 1.0, 0.0, 0.0], device=agent.device)
    a = actions.long()
    agent = torch.stack([agent[:, 0] + dx[a], agent[:, 1] + dy[a]], dim=1).clamp(0, GRID - 1)
    hit = (agent == food).all(dim=1)
    reward = hit.float()
    food = food.clone()
    rng = rng_state.clone()
    if bool(hit.any()):
        rng = lcg_next(rng)
        fx = (rng % GRID).float()
        rng = lcg_next(rng)
        fy = (rng % GRID).float()
        food[:, 0] = torch.where(hit, fx, food[:, 0])
        food[:, 1] = torch.where(hit, fy, food[:, 1])
    return agent, food, reward, rng.clone()


def observe(agent, food):
    ax, ay, fx, fy = agent[:, 0], agent[:, 1], food[:, 0], food[:, 1]
    return torch.stack([(fx - ax) / GRID, (fy - ay) / GRID, ax / (GRID - 1), ay / (GRID - 1)], dim=1).float()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_enc = nn.Parameter(torch.zeros(HIDDEN, 4))
        self.b_enc = nn.Parameter(torch.zeros(HIDDEN))
        self.w_gru = nn.Parameter(torch.zeros(N_LAYERS, 3 * HIDDEN, HIDDEN))
        self.w_a = nn.Parameter(torch.zeros(N_ACTIONS, HIDDEN))
        self.b_a = nn.Parameter(torch.zeros(N_ACTIONS))
        self.w_v = nn.Parameter(torch.zeros(1, HIDDEN))
        self.b_v = nn.Parameter(torch.zeros(1))
        self.reset_parameters(0)

    def reset_parameters(self, seed):
        g = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            for p in (self.w_enc, self.b_enc, self.w_gru, self.w_a, self.b_a, self.w_v, self.b_v):
                p.copy_(torch.empty(p.shape, device="cpu").normal_(0.0, 0.02, generator=g))
        return self

    def forward(self, obs, state):
        return policy_forward(self, obs, state)


def policy_forward(model, obs, state):
    """-> (logits (N,4), new_state (N,3,256), value (N,)), fp32."""
    h = obs.float() @ model.w_enc.T + model.b_enc
    new_state = torch.empty(obs.shape[0], N_LAYERS, HIDDEN, dtype=torch.float32, device=obs.device)
    for layer in range(N_LAYERS):
        z = h @ model.w_gru[layer].T
        zh, zg, zp = z[:, :HIDDEN], z[:, HIDDEN:2 * HIDDEN], z[:, 2 * HIDDEN:]
        s = state[:, layer].float()
        out = s + torch.sigmoid(zg) * (torch.tanh(zh) - s)
        p = torch.sigmoid(zp)
        h = p * out + (1 - p) * h
        new_state[:, layer] = out
    logits = h @ model.w_a.T + model.b_a
    value = (h @ model.w_v.T + model.b_v).squeeze(-1)
    return logits, new_state, value


@torch.no_grad()
def run(num_envs, horizon, seed, model=None):
    if model is None:
        model = Model()
    device = next(model.parameters()).device
    g = torch.Generator(device="cpu").manual_seed(seed)
    agent = torch.randint(0, GRID, (num_envs, 2), generator=g, device="cpu").float().to(device)
    food = torch.randint(0, GRID, (num_envs, 2), generator=g, device="cpu").float().to(device)
    rng = (torch.arange(num_envs, dtype=torch.int64, device="cpu") + seed * 10007).to(device)
    state = torch.zeros(num_envs, N_LAYERS, HIDDEN, device=device)
    rewards = torch.zeros(num_envs, device=device)
    logits = torch.zeros(num_envs, N_ACTIONS, device=device)
    for _ in range(horizon):
        logits, state, _ = policy_forward(model, observe(agent, food), state)
        actions = torch.argmax(logits, dim=-1)
        agent, food, reward, rng = env_step(agent, food, actions, rng)
        rewards += reward
    return {"rewards": rewards, "positions": agent.round().long(), "last_logits": logits, "state": state}


def get_init_inputs():
    return []


def get_inputs():
    """check.py's policy_forward inputs (drawn on the model's device in the deck)."""
    return [torch.randn(256, 4), 0.1 * torch.randn(256, N_LAYERS, HIDDEN)]
