"""Fine-tuning a ResNet through a triplet loss with every child except fc frozen by requires_grad = False: the model stays in train mode, so each forward pass (even without backward or an optimizer step) moves the frozen backbone's BatchNorm running statistics and the validation embedding drifts.

source: https://discuss.pytorch.org/t/decreasing-weights-without-optimization/4268
kind: bug
symptom: silent
verified: after 20 forward passes and no optimizer step the backbone BatchNorm running_mean has changed and the eval-mode embedding norm of the same image differs from the one measured before
"""
import torch
import torch.nn as nn


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 16)

    def forward(self, x):
        x = self.layer1(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


torch.manual_seed(0)
# Create finetuning model.
model = TinyResNet()
for name, child in model.named_children():
    if name != 'fc':
        for p in child.parameters():
            p.requires_grad = False  # ROOT

optimizer = torch.optim.SGD(filter(lambda x: x.requires_grad, model.parameters()), lr=0.01)

img = torch.rand(3, 32, 32) * 3.0 + 1.0
train = img.unsqueeze(0).repeat(2, 1, 1, 1)
val = img.unsqueeze(0)
running_mean_before = model.bn1.running_mean.clone()
model.eval()
with torch.no_grad():
    first_norm = model(val).norm().item()
model.train()

# Run forward passes and measure the validation embedding. No backwards passes, no optimizer steps.
for epoch in range(20):
    train_emb = model(train)
model.eval()
with torch.no_grad():
    val_emb = model(val)
print(first_norm, val_emb.norm().item(), torch.equal(model.bn1.running_mean, running_mean_before))
