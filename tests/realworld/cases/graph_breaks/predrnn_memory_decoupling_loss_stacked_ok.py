"""PredRNN-V2's memory-decoupling model with the one-line fix its authors gave in the issue: the per-layer, per-step cosine-similarity losses are averaged with `torch.mean(torch.stack(decouple_loss, dim=0))`, which keeps them in the graph, so the decoupling term reaches the shared `adapter` convolution and the cells' memory gates.

source: https://github.com/thuml/predrnn-pytorch/issues/11
kind: lookalike
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class SpatioTemporalLSTMCell(nn.Module):
    def __init__(self, in_channel, num_hidden, filter_size):
        super().__init__()
        self.num_hidden = num_hidden
        pad = filter_size // 2
        self.conv_x = nn.Conv2d(in_channel, num_hidden * 7, filter_size, padding=pad)
        self.conv_h = nn.Conv2d(num_hidden, num_hidden * 4, filter_size, padding=pad)
        self.conv_m = nn.Conv2d(num_hidden, num_hidden * 3, filter_size, padding=pad)
        self.conv_o = nn.Conv2d(num_hidden * 2, num_hidden, filter_size, padding=pad)
        self.conv_last = nn.Conv2d(num_hidden * 2, num_hidden, 1)

    def forward(self, x_t, h_t, c_t, m_t):
        i_x, f_x, g_x, i_x_p, f_x_p, g_x_p, o_x = torch.split(self.conv_x(x_t), self.num_hidden, dim=1)
        i_h, f_h, g_h, o_h = torch.split(self.conv_h(h_t), self.num_hidden, dim=1)
        i_m, f_m, g_m = torch.split(self.conv_m(m_t), self.num_hidden, dim=1)
        delta_c = torch.sigmoid(i_x + i_h) * torch.tanh(g_x + g_h)
        c_new = torch.sigmoid(f_x + f_h + 1.0) * c_t + delta_c
        delta_m = torch.sigmoid(i_x_p + i_m) * torch.tanh(g_x_p + g_m)
        m_new = torch.sigmoid(f_x_p + f_m + 1.0) * m_t + delta_m
        mem = torch.cat((c_new, m_new), 1)
        o_t = torch.sigmoid(o_x + o_h + self.conv_o(mem))
        h_new = o_t * torch.tanh(self.conv_last(mem))
        return h_new, c_new, m_new, delta_c, delta_m


class RNN(nn.Module):
    def __init__(self, num_layers, num_hidden, configs):
        super().__init__()
        self.configs = configs
        self.frame_channel = configs.patch_size * configs.patch_size
        self.num_layers = num_layers
        self.num_hidden = num_hidden
        self.MSE_criterion = nn.MSELoss()
        self.cell_list = nn.ModuleList(
            SpatioTemporalLSTMCell(self.frame_channel if i == 0 else num_hidden[i - 1], num_hidden[i],
                                   configs.filter_size) for i in range(num_layers))
        self.conv_last = nn.Conv2d(num_hidden[-1], self.frame_channel, 1, bias=False)
        self.adapter = nn.Conv2d(num_hidden[0], num_hidden[0], 1, bias=False)  # shared adapter

    def forward(self, frames_tensor):
        frames = frames_tensor.permute(0, 1, 4, 2, 3).contiguous()
        batch, height, width = frames.shape[0], frames.shape[3], frames.shape[4]
        next_frames, decouple_loss = [], []
        h_t = [torch.zeros(batch, n, height, width) for n in self.num_hidden]
        c_t = [torch.zeros(batch, n, height, width) for n in self.num_hidden]
        delta_c_list, delta_m_list = [None] * self.num_layers, [None] * self.num_layers
        memory = torch.zeros(batch, self.num_hidden[0], height, width)
        for t in range(self.configs.total_length - 1):
            net = frames[:, t] if t < self.configs.input_length else x_gen
            for i in range(self.num_layers):
                inp = net if i == 0 else h_t[i - 1]
                h_t[i], c_t[i], memory, delta_c, delta_m = self.cell_list[i](inp, h_t[i], c_t[i], memory)
                delta_c_list[i] = F.normalize(self.adapter(delta_c).view(batch, delta_c.shape[1], -1), dim=2)
                delta_m_list[i] = F.normalize(self.adapter(delta_m).view(batch, delta_m.shape[1], -1), dim=2)
            x_gen = self.conv_last(h_t[-1])
            next_frames.append(x_gen)
            for i in range(self.num_layers):  # decoupling loss
                decouple_loss.append(
                    torch.mean(torch.abs(torch.cosine_similarity(delta_c_list[i], delta_m_list[i], dim=2))))
        decouple_loss = torch.mean(torch.stack(decouple_loss, dim=0))
        next_frames = torch.stack(next_frames, dim=0).permute(1, 0, 3, 4, 2).contiguous()
        loss = self.MSE_criterion(next_frames, frames_tensor[:, 1:]) + self.configs.decouple_beta * decouple_loss
        return next_frames, loss, decouple_loss


configs = SimpleNamespace(patch_size=1, filter_size=3, total_length=6, input_length=3, decouple_beta=0.1)
torch.manual_seed(0)
model = RNN(2, [8, 8], configs)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
adapter_before = model.adapter.weight.detach().clone()
frames = torch.rand(2, configs.total_length, 8, 8, 1)
for step in range(3):
    optimizer.zero_grad()
    _, loss, decouple_loss = model(frames)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}, decouple loss {decouple_loss.item():.4f}")
moved = (model.adapter.weight - adapter_before).abs().max().item()
print(f"decouple_loss.requires_grad={decouple_loss.requires_grad}, adapter grad is None: "
      f"{model.adapter.weight.grad is None}, adapter moved {moved:.4f}")
