import torch
import torch.nn as nn
from torchvision_like import tiny_backbone


class FineTuner(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.backbone = tiny_backbone()
        self.classifier = nn.Linear(16, n_classes)

    def freeze_backbone(self):
        self.backbone.requires_grad_ = False  # ROOT

    def forward(self, x):
        return self.classifier(self.backbone(x))


model = FineTuner(3)
model.freeze_backbone()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
w0 = model.backbone[0].weight.clone()
for _ in range(3):
    x = torch.randn(4, 8)
    loss = model(x).logsumexp(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("backbone changed though frozen:", not torch.equal(w0, model.backbone[0].weight))
