"""The SEW-ResNet training loop as the maintainer advised in the report: `fit_one_epoch` calls `functional.reset_net(model)` after every optimizer step, so each batch starts its multi-step spiking neurons from a fresh membrane potential and the graph of the previous batch is never reached by the next backward.

source: https://github.com/fangwei123456/Spike-Element-Wise-ResNet/issues/19
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class SurrogateHeaviside(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha=4.0):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return (x >= 0).to(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        sg = torch.sigmoid(ctx.alpha * x)
        return grad_output * ctx.alpha * sg * (1 - sg), None


class MultiStepLIFNode(nn.Module):
    """Multi-step LIF neuron: input [T, N, ...], membrane potential kept in self.v."""

    def __init__(self, tau=2.0, v_threshold=1.0, v_reset=0.0):
        super().__init__()
        self.tau, self.v_threshold, self.v_reset = tau, v_threshold, v_reset
        self.v = 0.0

    def reset(self):
        self.v = 0.0

    def forward(self, x_seq):
        v = self.v
        spikes = []
        for t in range(x_seq.shape[0]):
            h = v + (x_seq[t] - (v - self.v_reset)) / self.tau
            s = SurrogateHeaviside.apply(h - self.v_threshold)
            v = h * (1.0 - s) + self.v_reset * s
            spikes.append(s)
        self.v = v
        return torch.stack(spikes)


class SeqToANNContainer(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.module = nn.Sequential(*args)

    def forward(self, x_seq):
        y = self.module(x_seq.flatten(0, 1))
        return y.view(x_seq.shape[0], x_seq.shape[1], *y.shape[1:])


class SEWBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Sequential(
            SeqToANNContainer(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels)),
            MultiStepLIFNode(),
            SeqToANNContainer(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels)),
            MultiStepLIFNode(),
        )

    def forward(self, x_seq):
        return self.conv(x_seq) + x_seq  # connect_f = 'ADD'


class SEWResNet(nn.Module):
    def __init__(self, T=4, num_classes=10):
        super().__init__()
        self.T = T
        self.stem = nn.Sequential(
            SeqToANNContainer(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)), MultiStepLIFNode())
        self.layer = SEWBlock(8)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x_seq = x.unsqueeze(0).repeat(self.T, 1, 1, 1, 1)
        x_seq = self.layer(self.stem(x_seq))
        feat = x_seq.mean(dim=(3, 4))
        return self.fc(feat.mean(0))


class functional:
    @staticmethod
    def reset_net(net):
        for m in net.modules():
            if hasattr(m, "reset"):
                m.reset()


def fit_one_epoch(model, optimizer, batches):
    total = 0.0
    for images, labels in batches:
        outputs = model(images)
        loss = F.cross_entropy(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        functional.reset_net(model)
        total += loss.item()
    return total / len(batches)


model = SEWResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
batches = [(torch.rand(8, 1, 12, 12), torch.randint(0, 10, (8,))) for _ in range(4)]
for epoch in range(2):
    print(f"epoch {epoch}: loss {fit_one_epoch(model, optimizer, batches):.4f}")
