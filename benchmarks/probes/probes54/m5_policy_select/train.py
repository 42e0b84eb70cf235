import torch
from policy import Policy
from reinforce import update

policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(2):
    log_probs, rewards = [], []
    obs = torch.randn(4)
    for t in range(5):
        action, logp = policy.select_action(obs)
        log_probs.append(logp)
        rewards.append(1.0 if action == 0 else 0.0)
        obs = torch.randn(4)
    update(optimizer, log_probs, rewards)
