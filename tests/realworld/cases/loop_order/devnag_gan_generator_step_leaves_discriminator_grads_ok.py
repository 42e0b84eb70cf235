"""devnag GAN: the generator step backpropagates through D (D's .grad fills up) but only g_optimizer steps; D's gradients are cleared by D.zero_grad() at the start of the next discriminator step, so D never trains on them.

source: https://github.com/devnag/pytorch-generative-adversarial-networks/issues/14
kind: lookalike
verified: D's parameters are unchanged by g_optimizer.step(); D only moves in its own step
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
g_input_size, g_hidden_size, g_output_size = 1, 5, 1
d_input_size, d_hidden_size, d_output_size = 8, 10, 1
G = nn.Sequential(nn.Linear(g_input_size, g_hidden_size), nn.ELU(), nn.Linear(g_hidden_size, g_output_size))
D = nn.Sequential(nn.Linear(d_input_size, d_hidden_size), nn.ELU(), nn.Linear(d_hidden_size, d_output_size), nn.Sigmoid())
criterion = nn.BCELoss()
d_optimizer = optim.SGD(D.parameters(), lr=1e-3, momentum=0.9)
g_optimizer = optim.SGD(G.parameters(), lr=1e-3, momentum=0.9)
d_before_g_step = None
for epoch in range(3):
    for d_index in range(2):
        D.zero_grad()
        d_real_data = torch.randn(1, d_input_size) * 1.25 + 4
        d_real_error = criterion(D(d_real_data), torch.ones(1, 1))
        d_real_error.backward()
        d_gen_input = torch.rand(d_input_size, g_input_size)
        d_fake_data = G(d_gen_input).detach()
        d_fake_error = criterion(D(d_fake_data.t()), torch.zeros(1, 1))
        d_fake_error.backward()
        d_optimizer.step()
    for g_index in range(2):
        G.zero_grad()
        gen_input = torch.rand(d_input_size, g_input_size)
        g_fake_data = G(gen_input)
        dg_fake_decision = D(g_fake_data.t())
        g_error = criterion(dg_fake_decision, torch.ones(1, 1))
        d_before_g_step = D[0].weight.clone()
        g_error.backward()
        g_optimizer.step()
        assert torch.equal(d_before_g_step, D[0].weight)
print("ok")
