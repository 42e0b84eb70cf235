"""FcaNet's learnable DCT layer registers a plain tensor with register_parameter; building the model fails.

source: https://github.com/cfzd/FcaNet/issues/29
kind: bug
symptom: crash
verified: TypeError: cannot assign 'torch.FloatTensor' object to parameter 'weight' (torch.nn.Parameter or None required)
"""
import math
import torch
import torch.nn as nn


class MultiSpectralDCTLayer(nn.Module):
    def __init__(self, height, width, mapper_x, mapper_y, channel):
        super(MultiSpectralDCTLayer, self).__init__()
        assert channel % len(mapper_x) == 0
        self.num_freq = len(mapper_x)
        self.register_parameter('weight', self.get_dct_filter(height, width, mapper_x, mapper_y, channel))  # ROOT

    def forward(self, x):
        return torch.sum(x * self.weight, dim=[2, 3])

    def build_filter(self, pos, freq, POS):
        result = math.cos(math.pi * freq * (pos + 0.5) / POS) / math.sqrt(POS)
        return result if freq == 0 else result * math.sqrt(2)

    def get_dct_filter(self, tile_size_x, tile_size_y, mapper_x, mapper_y, channel):
        dct_filter = torch.zeros(channel, tile_size_x, tile_size_y)
        c_part = channel // len(mapper_x)
        for i, (u_x, v_y) in enumerate(zip(mapper_x, mapper_y)):
            for t_x in range(tile_size_x):
                for t_y in range(tile_size_y):
                    dct_filter[i * c_part: (i + 1) * c_part, t_x, t_y] = \
                        self.build_filter(t_x, u_x, tile_size_x) * self.build_filter(t_y, v_y, tile_size_y)
        return dct_filter


class MultiSpectralAttentionLayer(nn.Module):
    def __init__(self, channel, dct_h, dct_w, reduction=4):
        super(MultiSpectralAttentionLayer, self).__init__()
        self.dct_layer = MultiSpectralDCTLayer(dct_h, dct_w, [0, 1], [0, 1], channel)
        self.fc = nn.Sequential(nn.Linear(channel, channel // reduction, bias=False), nn.ReLU(inplace=True),
                                nn.Linear(channel // reduction, channel, bias=False), nn.Sigmoid())

    def forward(self, x):
        y = self.fc(self.dct_layer(x))
        return x * y[:, :, None, None]


torch.manual_seed(0)
att = MultiSpectralAttentionLayer(channel=8, dct_h=4, dct_w=4)
optimizer = torch.optim.SGD(att.parameters(), lr=0.1)
loss = att(torch.randn(2, 8, 4, 4)).pow(2).mean()
loss.backward()
optimizer.step()
