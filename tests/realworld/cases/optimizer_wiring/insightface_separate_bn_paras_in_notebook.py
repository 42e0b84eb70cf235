"""InsightFace in a notebook: separate_bn_paras skips modules by the word 'model' in their class path, so BN params land in both groups.

source: https://github.com/TreB1eN/InsightFace_Pytorch/issues/169
kind: bug
symptom: crash
verified: ValueError: some parameters appear in more than one parameter group
"""
import torch
import torch.nn as nn
from torch import optim


class Backbone(nn.Module):
    def __init__(self):
        super(Backbone, self).__init__()
        self.input_layer = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.PReLU(8))
        self.output_layer = nn.Sequential(nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 4 * 4, 16),
                                          nn.BatchNorm1d(16))

    def forward(self, x):
        return self.output_layer(self.input_layer(x))


class Arcface(nn.Module):
    def __init__(self, embedding_size=16, classnum=10):
        super(Arcface, self).__init__()
        self.kernel = nn.Parameter(torch.Tensor(embedding_size, classnum).uniform_(-1, 1))

    def forward(self, embeddings, label):
        return nn.functional.normalize(embeddings) @ nn.functional.normalize(self.kernel, dim=0)


def separate_bn_paras(modules):
    if not isinstance(modules, list):
        modules = [*modules.modules()]
    paras_only_bn = []
    paras_wo_bn = []
    for layer in modules:
        if 'model' in str(layer.__class__):  # ROOT
            continue
        if 'container' in str(layer.__class__):
            continue
        else:
            if 'batchnorm' in str(layer.__class__):
                paras_only_bn.extend([*layer.parameters()])
            else:
                paras_wo_bn.extend([*layer.parameters()])
    return paras_only_bn, paras_wo_bn


torch.manual_seed(0)
model, head = Backbone(), Arcface()
paras_only_bn, paras_wo_bn = separate_bn_paras(model)
optimizer = optim.SGD([  # SYMPTOM
    {'params': paras_wo_bn + [head.kernel], 'weight_decay': 5e-4},
    {'params': paras_only_bn}
], lr=1e-3, momentum=0.9)
imgs, labels = torch.randn(4, 3, 4, 4), torch.randint(0, 10, (4,))
loss = nn.functional.cross_entropy(head(model(imgs), labels) * 64, labels)
loss.backward()
optimizer.step()
