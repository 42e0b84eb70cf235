import torch
from agent import DDPGAgent

agent = DDPGAgent()
w0 = agent.actor.net[0].weight.clone()
for _ in range(5):
    s, a, r, s2 = torch.randn(32, 3), torch.rand(32, 1) * 2 - 1, torch.randn(32, 1), torch.randn(32, 3)
    agent.update(s, a, r, s2)
print("actor moved:", (agent.actor.net[0].weight - w0).abs().max().item())
