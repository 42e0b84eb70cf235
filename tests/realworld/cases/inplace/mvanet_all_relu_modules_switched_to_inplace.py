"""MVANet: after building the network, __init__ walks self.modules() and sets m.inplace = True on every nn.ReLU and nn.Dropout; in the multi-view attention the same ReLU output feeds the attention product and is then passed through another (now in-place) ReLU, which overwrites the tensor the product saved for backward.

source: https://github.com/qianyu-dlut/MVANet/issues/2
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class MCLM(nn.Module):
    def __init__(self, d_model=16):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.act1 = nn.ReLU()
        self.act2 = nn.ReLU()
        self.dropout = nn.Dropout(0.1)
        self.linear = nn.Linear(d_model, d_model)

    def forward(self, l, g):
        feat = self.act1(self.proj(l))
        attn = torch.softmax(feat @ g.transpose(1, 2), dim=-1) @ g
        out = feat * attn
        out = out + self.linear(self.dropout(self.act2(feat)))
        return out


class MVANet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.mclm = MCLM()
        self.head = nn.Linear(16, 1)
        for m in self.modules():
            if isinstance(m, nn.ReLU) or isinstance(m, nn.Dropout):
                m.inplace = True  # ROOT

    def forward(self, local_tokens, global_tokens):
        return self.head(self.mclm(self.embed(local_tokens), self.embed(global_tokens))).mean()


torch.manual_seed(0)
model = MVANet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
loss = model(torch.randn(2, 4, 8), torch.randn(2, 5, 8))
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
