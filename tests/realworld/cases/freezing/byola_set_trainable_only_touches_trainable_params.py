"""BYOL-A's NetworkCommonMixIn.set_trainable only assigns requires_grad to parameters that already require grad (if p.requires_grad: p.requires_grad = trainable), so once a model was frozen with set_trainable(False) a later set_trainable(True) skips every parameter and fine-tuning silently trains the classifier head alone.

source: https://github.com/nttcslab/byol-a/issues/7
kind: bug
symptom: silent
verified: after set_trainable(False) then set_trainable(True), 0 of 16 encoder parameters require grad and the first conv weight moves 0.0 over 5 fine-tuning steps (the head moves 0.0516); with p.requires_grad = trainable for every parameter (the fix) 16 of 16 require grad and the conv weight moves 0.0692
"""
import torch
from torch import nn
import torch.nn.functional as F


class NetworkCommonMixIn():
    def set_trainable(self, trainable=False):
        for p in self.parameters():
            if p.requires_grad:  # ROOT
                p.requires_grad = trainable


class AudioNTT2020Task6(nn.Module, NetworkCommonMixIn):
    def __init__(self, n_mels, d):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 64, 3, stride=1, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2, stride=2),
            nn.Conv2d(64, 64, 3, stride=1, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2, stride=2),
            nn.Conv2d(64, 64, 3, stride=1, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2, stride=2),
        )
        self.fc = nn.Sequential(
            nn.Linear(64 * (n_mels // (2**3)), d), nn.ReLU(), nn.Dropout(p=0.3), nn.Linear(d, d), nn.ReLU(),
        )
        self.d = d

    def forward(self, x):
        x = self.features(x)
        x = x.permute(0, 3, 2, 1)
        B, T, D, C = x.shape
        x = x.reshape((B, T, C*D))
        return self.fc(x)


class AudioNTT2020(AudioNTT2020Task6):
    def __init__(self, n_mels=64, d=512):
        super().__init__(n_mels=n_mels, d=d)

    def forward(self, x):
        x = super().forward(x)
        (x1, _) = torch.max(x, dim=1)
        x2 = torch.mean(x, dim=1)
        return x1 + x2


torch.manual_seed(0)
model = AudioNTT2020(n_mels=16, d=32)
head = nn.Linear(32, 5)
x, y = torch.randn(8, 1, 16, 16), torch.randint(0, 5, (8,))

model.set_trainable(False)  # linear evaluation: the encoder is frozen
model.set_trainable(True)   # fine-tuning: unfreeze the encoder again
print(sum(p.requires_grad for p in model.parameters()), "of", len(list(model.parameters())), "encoder parameters require grad")

optimizer = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-3)
conv0, head0 = model.features[0].weight.detach().clone(), head.weight.detach().clone()
for step in range(5):
    loss = F.cross_entropy(head(model(x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("conv weight moved", round((model.features[0].weight - conv0).norm().item(), 4))
print("head weight moved", round((head.weight - head0).norm().item(), 4))
