"""train.py freezes the listed layers, then a later loop sets requires_grad=True on every parameter.

source: https://github.com/ultralytics/yolov5/issues/1213
kind: bug
symptom: silent
verified: model.model[0].weight changes although layer 0 is in the freeze list
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))

    def forward(self, x):
        return self.model(x)


torch.manual_seed(0)
model = Model()

freeze = ['model.0.']
for k, v in model.named_parameters():
    if any(x in k for x in freeze):
        print('freezing %s' % k)
        v.requires_grad = False

pg0, pg1 = [], []
for k, v in model.named_parameters():
    v.requires_grad = True  # ROOT
    if '.bias' in k:
        pg1.append(v)
    else:
        pg0.append(v)
optimizer = torch.optim.SGD(pg0, lr=0.01, momentum=0.937, nesterov=True)
optimizer.add_param_group({'params': pg1})

imgs, targets = torch.randn(2, 3, 8, 8), torch.randn(2, 4, 8, 8)
for i in range(5):
    loss = ((model(imgs) - targets) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
