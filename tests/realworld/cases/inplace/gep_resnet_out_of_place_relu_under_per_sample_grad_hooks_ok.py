"""dayu11/Gradient-Embedding-Perturbation's CIFAR ResNet after its fix: the block and stem ReLUs are out of place (`nn.ReLU(inplace=False)`) and the residual sum is `out = out + identity`, so no layer writes into the wrapped tensors that the per-sample-gradient extension's module backward hooks hand it, and private training runs.

source: https://github.com/dayu11/Gradient-Embedding-Perturbation/commit/fcb20d6fbb19d0755def0cbd56475b6969f344de
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
torch.set_num_threads(1)

GN_GROUPS = 4


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.gn1 = nn.GroupNorm(GN_GROUPS, planes, affine=False)
        self.relu = nn.ReLU(inplace=False)
        self.conv2 = conv3x3(planes, planes)
        self.gn2 = nn.GroupNorm(GN_GROUPS, planes, affine=False)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.gn1(self.conv1(x)))
        out = self.gn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
            identity = torch.cat((identity, torch.zeros_like(identity)), 1)
        out = out + identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = conv3x3(3, 8)
        self.gn1 = nn.GroupNorm(GN_GROUPS, 8, affine=False)
        self.relu = nn.ReLU(inplace=False)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2, downsample=nn.AvgPool2d(2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.relu(self.gn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class BatchGrad:
    """Per-sample gradients through module hooks, in the manner of BackPACK's `extend` + `BatchGrad`."""

    def __init__(self, model):
        self.inputs = {}
        for module in model.modules():
            if len(list(module.children())) == 0:
                module.register_forward_hook(self._save_input)
                module.register_full_backward_hook(self._batch_grad)

    def _save_input(self, module, inp, out):
        self.inputs[module] = inp[0].detach()

    def _batch_grad(self, module, grad_input, grad_output):
        x, g = self.inputs[module], grad_output[0]
        if isinstance(module, nn.Linear):
            module.weight.grad_batch = torch.einsum("bo,bi->boi", g, x)
            module.bias.grad_batch = g
        elif isinstance(module, nn.Conv2d):
            cols = F.unfold(x, module.kernel_size, padding=module.padding, stride=module.stride)
            module.weight.grad_batch = torch.einsum("bol,bkl->bok", g.flatten(2), cols).view(
                x.shape[0], *module.weight.shape)


def main():
    net = ResNet()
    BatchGrad(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for step in range(2):
        inputs = torch.randn(8, 3, 16, 16, generator=gen)
        targets = torch.randint(0, 10, (8,), generator=gen)
        optimizer.zero_grad()
        loss = F.cross_entropy(net(inputs), targets, reduction="sum") / 8
        loss.backward()
        batch_grads = [p.grad_batch.reshape(8, -1) for p in net.parameters()]
        per_sample = torch.cat(batch_grads, 1)
        clipped = per_sample * (1.0 / per_sample.norm(dim=1, keepdim=True).clamp(min=1.0))
        noisy = clipped.mean(0) + torch.randn(clipped.shape[1], generator=gen) * 0.01
        offset = 0
        for p in net.parameters():
            p.grad = noisy[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
            del p.grad_batch
        optimizer.step()
        print(f"private step {step} loss {loss.item():.4f} mean per-sample grad norm "
              f"{per_sample.norm(dim=1).mean().item():.4f}")


if __name__ == "__main__":
    main()
