"""mmdetection's ResNet train() override after the pull request: it calls self._freeze_stages() after nn.Module.train(), so the frozen stem and layer1 stay in eval mode and their BatchNorm statistics are kept while the later stages train.

source: https://github.com/open-mmlab/mmdetection/pull/560
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm


class ResNet(nn.Module):
    def __init__(self, frozen_stages=1, norm_eval=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self._freeze_stages()

    def _freeze_stages(self):
        if self.frozen_stages >= 0:
            self.norm1.eval()
            for m in [self.conv1, self.norm1]:
                for param in m.parameters():
                    param.requires_grad = False
        for i in range(1, self.frozen_stages + 1):
            m = getattr(self, 'layer{}'.format(i))
            m.eval()
            for param in m.parameters():
                param.requires_grad = False

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return self.layer2(self.layer1(x))

    def train(self, mode=True):
        super(ResNet, self).train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self


torch.manual_seed(0)
backbone = ResNet(frozen_stages=1, norm_eval=False)
head = nn.Linear(16, 4)
pretrained_mean = backbone.norm1.running_mean.clone()
probe = torch.randn(4, 3, 8, 8)
with torch.no_grad():
    backbone.eval()
    before = backbone.layer1(F.relu(backbone.norm1(backbone.conv1(probe))))
params = [p for p in list(backbone.parameters()) + list(head.parameters()) if p.requires_grad]
optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9)
for epoch in range(2):
    backbone.train()
    for it in range(5):
        img, label = torch.randn(8, 3, 8, 8) * 2 + 1, torch.randint(0, 4, (8,))
        loss = F.cross_entropy(head(backbone(img).mean((2, 3))), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
backbone.eval()
with torch.no_grad():
    after = backbone.layer1(F.relu(backbone.norm1(backbone.conv1(probe))))
print((backbone.norm1.running_mean - pretrained_mean).abs().max().item(), (after - before).abs().max().item())
