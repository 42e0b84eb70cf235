"""PackNet-SfM HorovodTrainer.train: every step's output dict, including output['loss'] with its full autograd graph, is appended to `outputs` for the end-of-epoch summary, so the graphs of the whole epoch stay alive and host memory grows step after step.

source: https://github.com/TRI-ML/packnet-sfm/issues/47
kind: bug
symptom: silent
verified: after the epoch every stored loss still has a grad_fn and its graph (all 20 steps' saved activations) is reachable from `outputs`
"""
import torch
import torch.nn as nn


class SelfSupModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, batch):
        depth = torch.sigmoid(self.depth_net(batch['rgb']))
        loss = (depth - batch['depth_gt']).abs().mean()
        return {'loss': loss, 'metrics': {'depth_mean': depth.mean().detach()}}


class HorovodTrainer:
    def train(self, dataloader, module, optimizer):
        module.train()
        outputs = []
        for i, batch in enumerate(dataloader):
            optimizer.zero_grad()
            output = module(batch)
            output['loss'].backward()
            optimizer.step()
            outputs.append(output)  # ROOT
        return outputs


torch.manual_seed(0)
model = SelfSupModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
dataloader = [{'rgb': torch.randn(2, 3, 32, 32), 'depth_gt': torch.rand(2, 1, 32, 32)} for _ in range(20)]
outputs = HorovodTrainer().train(dataloader, model, optimizer)
print(sum(o['loss'].grad_fn is not None for o in outputs))
