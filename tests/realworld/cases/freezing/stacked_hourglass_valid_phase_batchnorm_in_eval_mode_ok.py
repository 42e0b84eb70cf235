"""Stacked hourglass make_train after the fix: in the validation phase the BatchNorm layers are put back in eval mode, so their running statistics stay as trained.

source: https://github.com/princeton-vl/pytorch_stacked_hourglass/issues/44
kind: lookalike
"""
import torch
from torch import nn


class PoseNet(nn.Module):
    def __init__(self, inp_dim=8, oup_dim=4):
        super().__init__()
        self.pre = nn.Sequential(nn.Conv2d(3, inp_dim, 3, padding=1), nn.BatchNorm2d(inp_dim), nn.ReLU())
        self.out = nn.Conv2d(inp_dim, oup_dim, 1)

    def forward(self, imgs):
        return self.out(self.pre(imgs))

    def calc_loss(self, combined_hm_preds, heatmaps):
        return ((combined_hm_preds[0] - heatmaps) ** 2).mean()


class Trainer(nn.Module):
    def __init__(self, model, calc_loss):
        super().__init__()
        self.model = model
        self.calc_loss = calc_loss

    def forward(self, imgs, heatmaps):
        combined_hm_preds = [self.model(imgs)]
        loss = self.calc_loss(combined_hm_preds=combined_hm_preds, heatmaps=heatmaps)
        return combined_hm_preds + [loss]


def make_network():
    poseNet = PoseNet()
    net = Trainer(poseNet, poseNet.calc_loss)
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, net.parameters()), 1e-3)

    def make_train(batch_id, phase, **inputs):
        model = net.train()
        if phase == 'valid':
            for module in model.modules():
                if isinstance(module, nn.BatchNorm2d):
                    module.eval()
        result = model(inputs['imgs'], inputs['heatmaps'])
        loss = torch.mean(result[-1])
        if phase == 'train':
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return loss.item()
    return net, make_train


torch.manual_seed(0)
net, make_train = make_network()
for batch_id in range(2):
    make_train(batch_id, 'train', imgs=torch.randn(4, 3, 16, 16), heatmaps=torch.rand(4, 4, 16, 16))
bn = net.model.pre[1]
after_train = bn.running_mean.clone()
with torch.no_grad():
    for batch_id in range(2):
        make_train(batch_id, 'valid', imgs=2 + torch.randn(4, 3, 16, 16), heatmaps=torch.rand(4, 4, 16, 16))
print((bn.running_mean - after_train).abs().max().item())
