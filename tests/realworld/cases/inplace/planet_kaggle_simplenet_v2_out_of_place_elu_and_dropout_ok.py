"""planet-kaggle-pytorch's SimpleNetV2 after its fix: the classifier head is `Linear -> BatchNorm1d -> ELU() -> Dropout(p=0.5) -> Linear` and the blocks use out-of-place ELUs, so the dropout writes a new tensor and the ELU's saved output is intact when the backward needs it.

source: https://github.com/JunhongXu/planet-kaggle-pytorch/commit/0555c6b49dc658942805376d834491e48cadda17
kind: lookalike
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
            nn.BatchNorm2d(output_channel // 2), nn.ELU(),
            nn.Conv2d(output_channel // 2, output_channel // 2, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(output_channel // 2), nn.ELU(),
            nn.Conv2d(output_channel // 2, output_channel, kernel_size=1, bias=False),
            nn.BatchNorm2d(output_channel), nn.ELU(),
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
            nn.ELU(),
            nn.Dropout(p=0.5),
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
