"""mc-dropout-u-net-vaihingen's `eval_net` after its fix: it switches the U-Net back with `net.train()` before returning, so the batches that follow a validation round inside the epoch train with batch statistics, BatchNorm running statistics updating, and dropout on.

source: https://github.com/mathemage/mc-dropout-u-net-vaihingen/commit/773ef215d41c1f36dc0ed4159c12df89d792fbc3
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Dropout2d(0.2), nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class TinyUNet(nn.Module):
    def __init__(self, n_classes=1):
        super().__init__()
        self.n_classes = n_classes
        self.inc, self.down = DoubleConv(3, 8), DoubleConv(8, 16)
        self.up = DoubleConv(24, 8)
        self.outc = nn.Conv2d(8, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down(F.max_pool2d(x1, 2))
        x = self.up(torch.cat([x1, F.interpolate(x2, scale_factor=2)], 1))
        return self.outc(x)


def eval_net(net, loader):
    net.eval()
    tot = 0.0
    for imgs, masks in loader:
        with torch.no_grad():
            pred = (torch.sigmoid(net(imgs)) > 0.5).float()
        tot += (2 * (pred * masks).sum() / (pred.sum() + masks.sum() + 1e-6)).item()
    net.train()
    return tot / len(loader)


def train_net(net, train_loader, val_loader, epochs=2, val_every=3):
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    steps, eval_mode_steps = 0, 0
    for epoch in range(epochs):
        net.train()
        for imgs, masks in train_loader:
            eval_mode_steps += not net.training
            loss = F.binary_cross_entropy_with_logits(net(imgs), masks)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if steps % val_every == 0:
                eval_net(net, val_loader)
    return steps, eval_mode_steps


def batches(n):
    imgs = torch.rand(n, 4, 3, 16, 16) * 2 + 1
    return [(x, (x.mean(1, keepdim=True) > 2).float()) for x in imgs]


net = TinyUNet()
bn = net.inc[1]
steps, eval_mode_steps = train_net(net, batches(12), batches(2))
print(f"training steps run in eval mode: {eval_mode_steps}/{steps}; "
      f"BatchNorm batches tracked: {bn.num_batches_tracked.item()}; running mean[0] {bn.running_mean[0].item():.3f}")
