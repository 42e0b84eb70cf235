"""planet-kaggle-pytorch's SimpleNetV2 (a small ResNeXt-style multi-label classifier for the Planet satellite tiles) ends in a classifier head `Linear -> BatchNorm1d -> ELU(inplace=True) -> Dropout(inplace=True) -> Linear`. An in-place ELU keeps its own output for the backward (the gradient on the negative side is computed from it); the in-place Dropout right after it then zeroes and rescales that same tensor, so the first `loss.backward()` in the training loop fails. The fix commit made every ELU and the Dropout out of place.

source: https://github.com/JunhongXu/planet-kaggle-pytorch/commit/0555c6b49dc658942805376d834491e48cadda17
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, inpt_channel, output_channel):
        super().__init__()
        self.stage = nn.Sequential(
            nn.Conv2d(inpt_channel, output_channel // 2, kernel_size=1, bias=False),
            nn.BatchNorm2d(output_channel // 2), nn.ELU(inplace=True),
            nn.Conv2d(output_channel // 2, output_channel // 2, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(output_channel // 2), nn.ELU(inplace=True),
            nn.Conv2d(output_channel // 2, output_channel, kernel_size=1, bias=False),
            nn.BatchNorm2d(output_channel), nn.ELU(inplace=True),
        )

    def forward(self, x):
        return self.stage(x)


class SimpleNetV2(nn.Module):
    def __init__(self, num_labels=17):
        super().__init__()
        self.stage_1 = Block(3, 16)
        self.stage_2 = Block(16, 32)
        self.stage_3 = Block(32, 64)
        self.pool = nn.MaxPool2d(2)
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(64, 32, bias=False),
            nn.BatchNorm1d(32),
            nn.ELU(inplace=True),
            nn.Dropout(p=0.3, inplace=True),  # ROOT
            nn.Linear(32, num_labels),
        )

    def forward(self, x):
        x = self.pool(self.stage_1(x))
        x = self.pool(self.stage_2(x))
        x = self.avg_pool(self.stage_3(x)).flatten(1)
        return self.classifier(x)


def train(net, epochs=2):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.MultiLabelSoftMarginLoss()
    g = torch.Generator().manual_seed(0)
    images = torch.randn(32, 3, 24, 24, generator=g)
    labels = (torch.rand(32, 17, generator=g) < 0.2).float()
    for epoch in range(epochs):
        net.train()
        for x, y in zip(images.split(8), labels.split(8)):
            loss = criterion(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


train(SimpleNetV2())
