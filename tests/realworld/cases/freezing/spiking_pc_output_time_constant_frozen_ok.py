"""The spiking population-code network after the fix: the fixed output time constant is declared with `requires_grad=False`, so although it is still in `model.parameters()` (and the optimizer's list) it gets no gradient and stays at its initial 20 ms while the network trains.

source: https://github.com/lucyzmf/spikingPC/commit/929b644d414a29f5bb8c616f08573a570e7a05df
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

T = 12


class SpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (1 + 5 * v.abs()) ** 2


class OneLayerSnnWithOutput(nn.Module):
    def __init__(self, input_size=20, hidden_size=32, output_size=4):
        super().__init__()
        self.input_fc = nn.Linear(input_size, hidden_size)
        self.output_layer = nn.Linear(hidden_size, output_size)
        self.output_layer_tauM = nn.Linear(output_size * 2, output_size)
        self.tau_m_o = nn.Parameter(torch.Tensor(output_size), requires_grad=False)
        nn.init.constant_(self.tau_m_o, 20.0)

    def forward(self, spikes):
        b = spikes.size(1)
        mem_h = torch.zeros(b, self.input_fc.out_features)
        mem_o = torch.zeros(b, self.output_layer.out_features)
        for t in range(T):
            mem_h = 0.9 * mem_h + self.input_fc(spikes[t])
            spk_h = SpikeFn.apply(mem_h - 1.0)
            mem_h = mem_h - spk_h
            dense_x = self.output_layer(spk_h)
            alpha_fixed = torch.exp(-1.0 / self.tau_m_o)
            alpha_adapt = torch.sigmoid(self.output_layer_tauM(torch.cat([dense_x, mem_o], -1)))
            mem_o = 0.5 * (alpha_fixed + alpha_adapt) * mem_o + (1 - alpha_fixed) * dense_x
        return mem_o


model = OneLayerSnnWithOutput()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
rates = torch.rand(4, 20)
for step in range(30):
    labels = torch.randint(0, 4, (16,))
    spikes = (torch.rand(T, 16, 20) < rates[labels]).float()
    loss = F.cross_entropy(model(spikes), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

tau = model.tau_m_o.detach()
print(f"loss {loss.item():.3f}; output time constant range [{tau.min().item():.2f}, {tau.max().item():.2f}], "
      f"max abs change from 20: {(tau - 20).abs().max().item():.3g}")
