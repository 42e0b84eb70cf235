"""Zero-Restore SKConv: each branch output is cloned before the in-place unsqueeze_, so the ReLU output it saved stays intact.

source: https://github.com/aupendu/zero-restore/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn


class InConv(nn.Module):
    def __init__(self, out_ch=16):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, out_ch, 3, padding=1, bias=False),
                                  nn.GroupNorm(num_channels=out_ch, num_groups=4), nn.ReLU(inplace=False))

    def forward(self, x):
        return self.conv(x)


class SKConv(nn.Module):
    def __init__(self, outfeatures=16, M=2, L=8):
        super().__init__()
        in_conv = InConv(outfeatures)
        self.convs = nn.ModuleList([in_conv, nn.Sequential(
            nn.Upsample(scale_factor=0.5, mode='bilinear', align_corners=True), in_conv,
            nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True))])
        self.fc = nn.Linear(outfeatures, L)
        self.fcs = nn.ModuleList([nn.Linear(L, outfeatures) for _ in range(M)])
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            fea = conv(x).clone().unsqueeze_(dim=1)
            feas = fea if i == 0 else torch.cat([feas, fea], dim=1)
        fea_z = self.fc(feas.sum(dim=1).mean(-1).mean(-1))
        attention_vectors = torch.stack([fc(fea_z) for fc in self.fcs], dim=1)
        attention_vectors = self.softmax(attention_vectors).unsqueeze(-1).unsqueeze(-1)
        return (feas * attention_vectors).sum(dim=1)


torch.manual_seed(0)
model = SKConv()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.rand(1, 1, 16, 16)
xmin = model(x)
loss = (xmin.mean(1, keepdim=True) - x).abs().mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
