"""DenseTNT decoder detaches the goals_2D_mlps output before scoring the goals, so goals_2D_mlps never trains.

source: https://github.com/Tsinghua-MARS-Lab/DenseTNT/issues/11
kind: bug
symptom: silent
verified: after loss.backward() every goals_2D_mlps parameter has grad None (the score loss still trains goals_2D_decoder); without the detach the first weight gets max abs grad 0.029
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Decoder(nn.Module):
    def __init__(self, hidden_size=32):
        super().__init__()
        self.goals_2D_mlps = nn.Sequential(nn.Linear(2, hidden_size), nn.ReLU(), nn.Linear(hidden_size, hidden_size))
        self.goals_2D_decoder = nn.Sequential(nn.Linear(hidden_size * 2, hidden_size), nn.ReLU(), nn.Linear(hidden_size, 1))

    def forward(self, hidden_states, goals_2D):
        goals_2D_hidden = self.goals_2D_mlps(goals_2D)
        context = hidden_states.expand(goals_2D.shape[0], -1)
        li = torch.cat([context, goals_2D_hidden.detach()], dim=-1)  # ROOT
        return self.goals_2D_decoder(li).squeeze(-1)


torch.manual_seed(0)
decoder = Decoder()
optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
hidden_states, goals_2D = torch.randn(1, 32), torch.randn(50, 2)
gt_goal = torch.tensor(7)
scores = F.log_softmax(decoder(hidden_states, goals_2D), dim=-1)
loss = F.nll_loss(scores.unsqueeze(0), gt_goal.unsqueeze(0))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("goals_2D_mlps grads:", [p.grad for p in decoder.goals_2D_mlps.parameters()][0])
