"""Vox-Fusion mapping: a new Adam optimizer is built on every optimisation call, discarding its moments.

source: https://github.com/zju3dv/Vox-Fusion/issues/31
kind: bug
symptom: silent
verified: Adam state restarts every call: last_optim.state[embeddings]['step'] == 3 after 4 calls
"""
import torch
import torch.nn as nn


class Mapping:
    def __init__(self):
        self.embeddings = nn.Parameter(torch.randn(16, 4) * 0.01)
        self.sdf_network = nn.Linear(4, 1)
        self.last_optim = None

    def bundle_adjust_frames(self, points, sdf_gt, learning_rate=(1e-2, 1e-3), num_iterations=3):
        optimize_params = [{'params': self.embeddings, 'lr': learning_rate[0]},
                           {'params': self.sdf_network.parameters(), 'lr': learning_rate[0]}]
        optim = torch.optim.Adam(optimize_params)  # ROOT
        for _ in range(num_iterations):
            optim.zero_grad()
            feats = self.embeddings[points]
            loss = ((self.sdf_network(feats).squeeze(-1) - sdf_gt) ** 2).mean()
            loss.backward()
            optim.step()
        self.last_optim = optim


torch.manual_seed(0)
mapper = Mapping()
for frame in range(4):
    points = torch.randint(0, 16, (32,))
    mapper.bundle_adjust_frames(points, torch.randn(32))
last_optim = mapper.last_optim
embeddings = mapper.embeddings
