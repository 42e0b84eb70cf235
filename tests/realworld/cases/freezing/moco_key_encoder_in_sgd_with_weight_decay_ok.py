"""MoCo: the SGD optimizer gets model.parameters() (weight_decay=1e-4), which includes the key encoder; its parameters have requires_grad=False, never get a .grad, so SGD skips them (no weight decay) and they move only by the momentum update.

source: https://github.com/facebookresearch/moco/issues/14
kind: lookalike
verified: after a step the key encoder equals m * k_old + (1 - m) * q_new exactly (no decay applied to it)
"""
import copy

import torch
import torch.nn as nn


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=16, K=32, m=0.999, T=0.07):
        super(MoCo, self).__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = base_encoder
        self.encoder_k = copy.deepcopy(base_encoder)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", nn.functional.normalize(torch.randn(dim, K), dim=0))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    def forward(self, im_q, im_k):
        q = nn.functional.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = nn.functional.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        return logits, labels


torch.manual_seed(0)
model = MoCo(nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 16)))
optimizer = torch.optim.SGD(model.parameters(), 0.03, momentum=0.9, weight_decay=1e-4)
images = torch.rand(4, 3, 4, 4)
k_old = model.encoder_k[1].weight.clone()
q_old = model.encoder_q[1].weight.clone()
output, target = model(images, images.flip(-1))
loss = nn.functional.cross_entropy(output, target)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(model.encoder_k[1].weight.grad is None,
      torch.allclose(model.encoder_k[1].weight, k_old * 0.999 + q_old * 0.001))
