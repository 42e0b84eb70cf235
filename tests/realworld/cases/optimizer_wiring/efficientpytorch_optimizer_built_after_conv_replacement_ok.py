"""EfficientPyTorch's ImageNet example as its author corrected it in the issue: the convolutions are replaced by `Conv2dSQ` first ("define optimizer after Conv2D replacement"), so `get_optimizer` sees the new sparse/quantized convolution weights and they train with BatchNorm and the classifier.

source: https://github.com/hustzxd/EfficientPyTorch/issues/1
kind: lookalike
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Conv2dSQ(nn.Conv2d):
    """Conv2d with magnitude-pruned (sparsity) and uniformly quantized (nbits_w) weights."""

    def __init__(self, *args, nbits_w=4, sparsity=0.5, **kwargs):
        super().__init__(*args, **kwargs)
        self.nbits_w, self.sparsity = nbits_w, sparsity

    def forward(self, x):
        w = self.weight
        k = max(1, int(w.numel() * self.sparsity))
        threshold = w.detach().abs().flatten().kthvalue(k).values
        w = w * (w.detach().abs() > threshold).float()
        scale = w.detach().abs().max() / (2 ** (self.nbits_w - 1) - 1)
        w_q = RoundSTE.apply(w / scale) * scale
        return F.conv2d(x, w_q, self.bias, self.stride, self.padding, self.dilation, self.groups)


class wrapper:
    @staticmethod
    def replace_conv_recursively(model, conv_type, nbits_w, sparsity):
        for name, child in model.named_children():
            if isinstance(child, nn.Conv2d) and not isinstance(child, Conv2dSQ):
                new = Conv2dSQ(child.in_channels, child.out_channels, child.kernel_size, child.stride,
                               child.padding, bias=child.bias is not None, nbits_w=nbits_w, sparsity=sparsity)
                new.weight.data.copy_(child.weight.data)
                if child.bias is not None:
                    new.bias.data.copy_(child.bias.data)
                setattr(model, name, new)
            else:
                wrapper.replace_conv_recursively(child, conv_type, nbits_w, sparsity)
        return model


def get_optimizer(model, args):
    return torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)


def make_model(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


def train(train_loader, model, criterion, optimizer, epoch):
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} iter {i}: loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--qw", type=int, default=4)
    parser.add_argument("--sparsity", type=float, default=0.5)
    args = parser.parse_args([])

    torch.manual_seed(0)
    model = make_model()
    criterion = nn.CrossEntropyLoss()
    # prune and quantize the model
    wrapper.replace_conv_recursively(model, 'Conv2dSQ', nbits_w=args.qw, sparsity=args.sparsity)
    # define loss function (criterion) and optimizer after process model
    optimizer = get_optimizer(model, args)

    conv = model[3][0]
    before = conv.weight.detach().clone()
    train_loader = [(torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))) for _ in range(5)]
    train(train_loader, model, criterion, optimizer, epoch=0)
    moved = (conv.weight - before).abs().max().item()
    print(f"Conv2dSQ weight moved {moved:.4f}; grad set: {conv.weight.grad is not None}")


if __name__ == "__main__":
    main()
