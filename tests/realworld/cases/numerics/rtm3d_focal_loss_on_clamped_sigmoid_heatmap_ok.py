"""RTM3D after the maintainer's fix: the heatmap logits go through `_sigmoid`, which clamps the probabilities to [1e-4, 1 - 1e-4], before the CornerNet focal loss, so `log(pred)` and `log(1 - pred)` stay finite however confident the network becomes, and training keeps finite losses and weights.

source: https://github.com/maudzung/RTM3D/issues/13
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

H = W = 16


def _neg_loss(pred, gt, alpha=2, beta=4):
    """Modified focal loss, as in CornerNet."""
    pos_inds = gt.eq(1).float()
    neg_inds = gt.lt(1).float()
    neg_weights = torch.pow(1 - gt, beta)
    pos_loss = (torch.log(pred) * torch.pow(1 - pred, alpha) * pos_inds).sum()
    neg_loss = (torch.log(1 - pred) * torch.pow(pred, alpha) * neg_weights * neg_inds).sum()
    num_pos = pos_inds.sum()
    if num_pos == 0:
        return -neg_loss
    return -(pos_loss + neg_loss) / num_pos


class FocalLoss(nn.Module):
    def forward(self, out, target):
        return _neg_loss(out, target)


def _sigmoid(x):
    return torch.clamp(x.sigmoid_(), min=1e-4, max=1 - 1e-4)


class Compute_Loss(nn.Module):
    def __init__(self):
        super().__init__()
        self.focal_loss = FocalLoss()

    def forward(self, outputs, tg):
        outputs["hm_mc"] = _sigmoid(outputs["hm_mc"])
        return self.focal_loss(outputs["hm_mc"], tg["hm_mc"])


class HeatmapHead(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.hm_mc = nn.Conv2d(16, num_classes, 1)
        self.hm_mc.bias.data.fill_(-2.19)  # CenterNet's heatmap bias init

    def forward(self, x):
        return {"hm_mc": self.hm_mc(self.body(x))}


def gaussian_heatmap(centers, num_classes=3, sigma=1.5):
    ys, xs = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing="ij")
    hm = torch.zeros(num_classes, H, W)
    for c, cy, cx in centers:
        hm[c] = torch.maximum(hm[c], torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / (2 * sigma ** 2)))
    return hm


images = torch.randn(4, 3, H, W)
targets = {"hm_mc": torch.stack([gaussian_heatmap([(0, 4, 5), (1, 10, 11)]), gaussian_heatmap([(2, 7, 3)]),
                                 gaussian_heatmap([(0, 12, 12), (2, 3, 9)]), gaussian_heatmap([(1, 8, 8)])])}
model, criterion = HeatmapHead(), Compute_Loss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
losses, first_nan = [], None
for step in range(100):
    loss = criterion(model(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if first_nan is None and loss.isnan():
        first_nan = step
finite = [v for v in losses if v == v]
print(f"heatmap loss {losses[0]:.3g} -> {finite[-1]:.3g} (last finite); first NaN at step {first_nan}; "
      f"weights finite at the end: {all(p.isfinite().all().item() for p in model.parameters())}")
