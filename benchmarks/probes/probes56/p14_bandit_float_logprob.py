"""A contextual bandit trained with a policy gradient; history kept as plain floats."""
import torch
import torch.nn as nn

policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
true_w = torch.randn(3, 4)
w0 = policy[0].weight.detach().clone()
for episode in range(20):
    logp_hist, rewards = [], []
    for t in range(8):
        ctx = torch.randn(4)
        dist = torch.distributions.Categorical(logits=policy(ctx))
        arm = dist.sample()
        logp_hist.append(float(dist.log_prob(arm)))  # ROOT
        rewards.append((true_w[arm] @ ctx).item())
    r = torch.tensor(rewards)
    adv = (r - r.mean()) / (r.std() + 1e-6)
    loss = -(torch.tensor(logp_hist, requires_grad=True) * adv).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("policy moved", (policy[0].weight - w0).abs().max().item())
