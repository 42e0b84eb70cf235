"""HDMNet's get_optim lists its trainable submodules by hand and leaves out kshot_rw, the layer used only when shot > 1.

source: https://github.com/Pbihao/HDMNet/issues/21
kind: bug
symptom: silent
verified: after 3 steps kshot_rw.weight has a gradient (max abs 0.13) but is unchanged (0.0); with its own param group it moves 0.0034
"""
import torch
import torch.nn as nn


class OneModel(nn.Module):
    def __init__(self, shot=5, dim=16):
        super().__init__()
        self.shot = shot
        self.down_query = nn.Linear(dim, dim)
        self.down_supp = nn.Linear(dim, dim)
        self.transformer = nn.Linear(dim, dim)
        self.cls_meta = nn.Linear(dim, 2)
        if self.shot > 1:
            self.kshot_rw = nn.Linear(self.shot, self.shot)

    def get_optim(self, model, LR):
        optimizer = torch.optim.SGD(  # ROOT
            [{'params': model.down_query.parameters()},
             {'params': model.down_supp.parameters()},
             {'params': model.transformer.parameters()},
             {'params': model.cls_meta.parameters()}],
            lr=LR, momentum=0.9, weight_decay=1e-4)
        return optimizer

    def forward(self, x, s_x):
        query = self.down_query(x)
        supp = self.down_supp(s_x)
        sim = (supp * query.unsqueeze(1)).sum(-1)
        weight_soft = torch.softmax(self.kshot_rw(sim), dim=1)
        proto = (weight_soft.unsqueeze(-1) * supp).sum(1)
        return self.cls_meta(self.transformer(query + proto))


torch.manual_seed(0)
model = OneModel(shot=5)
optimizer = model.get_optim(model, LR=0.01)
before = model.kshot_rw.weight.detach().clone()
for step in range(3):
    x, s_x, y = torch.randn(4, 16), torch.randn(4, 5, 16), torch.randint(0, 2, (4,))
    loss = nn.functional.cross_entropy(model(x, s_x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((model.kshot_rw.weight - before).abs().max().item(), model.kshot_rw.weight.grad.abs().max().item())
