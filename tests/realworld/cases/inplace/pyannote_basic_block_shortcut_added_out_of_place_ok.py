"""pyannote.audio after the fix: BasicBlock adds the shortcut out of place (`outputs = outputs + self.shorcut(input_data)`), so the ReLU output saved for the backward is left untouched and the speaker-embedding ResNet trains.

source: https://github.com/pyannote/pyannote-audio/commit/bfb71d95d92924bf4af62f4357363b4a33887f83
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class BasicBlock(nn.Module):
    """A residual block composed of two convolutional layers and one residual
    connection linking the block input to the block output"""
    expansion = 1

    def __init__(self, inplanes: int, outplanes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, outplanes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outplanes)
        self.conv2 = nn.Conv2d(outplanes, outplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outplanes)

        self.shorcut = nn.Sequential()
        if stride != 1 or inplanes != self.expansion * outplanes:
            self.shorcut = nn.Sequential(
                nn.Conv2d(inplanes, self.expansion * outplanes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * outplanes))

    def forward(self, input_data: torch.Tensor) -> torch.Tensor:
        outputs = F.relu(self.bn1(self.conv1(input_data)))
        outputs = F.relu(self.bn2(self.conv2(outputs)))
        outputs = outputs + self.shorcut(input_data)
        outputs = F.relu(outputs)
        return outputs


class ResNet(nn.Module):
    def __init__(self, num_blocks=(1, 1), m_channels=8, feat_dim=20, embed_dim=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, m_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(m_channels)
        self.layer1 = self._make_layer(m_channels, m_channels, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(m_channels, m_channels * 2, num_blocks[1], stride=2)
        self.embedding = nn.Linear(m_channels * 2 * (feat_dim // 2) * 2, embed_dim)

    def _make_layer(self, inplanes, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(BasicBlock(inplanes, planes, s))
            inplanes = planes
        return nn.Sequential(*layers)

    def forward(self, fbank):  # (batch, frames, feat_dim)
        x = fbank.permute(0, 2, 1).unsqueeze(1)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer2(self.layer1(out))
        out = out.reshape(out.shape[0], -1, out.shape[-1])  # (batch, channels * freq, frames)
        stats = torch.cat([out.mean(-1), out.std(-1)], dim=-1)  # statistics pooling
        return self.embedding(stats)


model = ResNet()
classifier = nn.Linear(16, 10)
optimizer = torch.optim.SGD(list(model.parameters()) + list(classifier.parameters()), lr=0.01)
for step in range(3):
    fbank = torch.randn(4, 40, 20)
    speakers = torch.randint(0, 10, (4,))
    loss = F.cross_entropy(classifier(model(fbank)), speakers)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
