"""Catalyst's ResnetEncoder after the PR: with `frozen=True` the freeze loop goes through every parameter of each backbone child module and sets `param.requires_grad = False`, so the optimizer never receives gradients for the encoder and only the classification head trains.

source: https://github.com/catalyst-team/catalyst/pull/81
kind: lookalike
"""
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, in_ch, out_ch, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.down = nn.Conv2d(in_ch, out_ch, 1, stride, bias=False) if stride != 1 or in_ch != out_ch else None

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    """A small stand-in for torchvision's resnet18 (same child layout: stem, stages, avgpool, fc)."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)


class ResnetEncoder(nn.Module):
    def __init__(self, frozen=True, pooling=True):
        super().__init__()
        resnet = TinyResNet()
        modules = list(resnet.children())[:-2]  # delete last layers: pooling and linear
        if frozen:
            for module in modules:
                for param in module.parameters():
                    param.requires_grad = False
        if pooling:
            modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.feature_net = nn.Sequential(*modules)
        self.out_features = 16

    def forward(self, image):
        return self.feature_net(image)


class Classifier(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.encoder = ResnetEncoder(frozen=True)
        self.head = nn.Linear(self.encoder.out_features, num_classes)

    def forward(self, image):
        return self.head(self.encoder(image))


class OptimizerCallback:
    def on_batch_end(self, state):
        state["optimizer"].zero_grad()
        state["loss"].backward()
        state["optimizer"].step()


def run(model, loader, criterion, optimizer, callbacks):
    state = {"optimizer": optimizer}
    model.train()
    for images, targets in loader:
        state["loss"] = criterion(model(images), targets)
        for callback in callbacks:
            callback.on_batch_end(state)
    return state["loss"].item()


torch.manual_seed(0)
images = torch.randn(160, 3, 16, 16)
targets = (images[:, 0].mean((1, 2)) > 0).long()
loader = [(images[i:i + 8], targets[i:i + 8]) for i in range(0, 160, 8)]
model = Classifier(num_classes=2)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
stem_before = model.encoder.feature_net[0].weight.detach().clone()
loss = run(model, loader, nn.CrossEntropyLoss(), optimizer, [OptimizerCallback()])
print("loss %.4f" % loss, "frozen stem conv change %.5f" % (model.encoder.feature_net[0].weight - stem_before).abs().max().item())
