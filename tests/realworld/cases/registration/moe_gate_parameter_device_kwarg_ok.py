"""MoE gates created as nn.Parameter with the device passed to the tensor constructor.

source: https://github.com/davidmrau/mixture-of-experts/issues/12
kind: lookalike
"""
import torch
import torch.nn as nn


class MoE(nn.Module):
    def __init__(self, input_size, output_size, num_experts, device='cpu'):
        super(MoE, self).__init__()
        self.device = device
        self.experts = nn.ModuleList([nn.Linear(input_size, output_size) for _ in range(num_experts)])
        self.w_gate = nn.Parameter(torch.zeros(input_size, num_experts, device=self.device), requires_grad=True)

    def forward(self, x):
        gates = torch.softmax(x @ self.w_gate, dim=-1)
        expert_outputs = torch.stack([e(x) for e in self.experts], dim=1)
        return (gates.unsqueeze(-1) * expert_outputs).sum(1)


torch.manual_seed(0)
moe = MoE(input_size=6, output_size=2, num_experts=3).to(torch.float64)
optimizer = torch.optim.Adam(moe.parameters(), lr=1e-2)
x = torch.randn(32, 6, dtype=torch.float64)
y = torch.randn(32, 2, dtype=torch.float64)
for _ in range(10):
    optimizer.zero_grad()
    loss = ((moe(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
