"""recurrent-visual-attention LocationNetwork: l_t is sampled around mu and then detached, so log_pi = Normal(mu, std).log_prob(l_t) is differentiable only through mu, which is what REINFORCE needs to train the location network (the sample itself carries no gradient).

source: https://github.com/kevinzakka/recurrent-visual-attention/issues/12
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal


class LocationNetwork(nn.Module):
    def __init__(self, input_size, output_size, std):
        super().__init__()
        self.std = std
        hid_size = input_size // 2
        self.fc = nn.Linear(input_size, hid_size)
        self.fc_lt = nn.Linear(hid_size, output_size)

    def forward(self, h_t):
        feat = F.relu(self.fc(h_t.detach()))
        mu = torch.tanh(self.fc_lt(feat))
        l_t = torch.distributions.Normal(mu, self.std).rsample()
        l_t = l_t.detach()
        log_pi = Normal(mu, self.std).log_prob(l_t)
        log_pi = torch.sum(log_pi, dim=1)
        l_t = torch.clamp(l_t, -1, 1)
        return log_pi, l_t


torch.manual_seed(0)
core = nn.GRUCell(4, 32)
locator = LocationNetwork(32, 2, std=0.05)
classifier = nn.Linear(32, 10)
baseliner = nn.Linear(32, 1)
params = list(core.parameters()) + list(locator.parameters()) + list(classifier.parameters()) + list(baseliner.parameters())
optimizer = torch.optim.Adam(params, lr=3e-4)
x, y = torch.randn(8, 4), torch.randint(0, 10, (8,))
h_t, l_t = torch.zeros(8, 32), torch.zeros(8, 2)
log_pi, baselines = [], []
for t in range(3):
    h_t = core(x + l_t.sum(1, keepdim=True), h_t)
    p, l_t = locator(h_t)
    log_pi.append(p)
    baselines.append(baseliner(h_t.detach()).squeeze(1))
log_pi, baselines = torch.stack(log_pi, dim=1), torch.stack(baselines, dim=1)
log_probas = F.log_softmax(classifier(h_t), dim=1)
predicted = torch.max(log_probas, 1)[1]
R = (predicted.detach() == y).float().unsqueeze(1).repeat(1, 3)
loss_action = F.nll_loss(log_probas, y)
loss_baseline = F.mse_loss(baselines, R)
adjusted_reward = R - baselines.detach()
loss_reinforce = torch.mean(torch.sum(-log_pi * adjusted_reward, dim=1), dim=0)
loss = loss_action + loss_baseline + loss_reinforce * 0.01
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(locator.fc_lt.weight.grad.abs().max().item())
