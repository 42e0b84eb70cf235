"""ImVisible's training script after its fix: the epoch totals of the training and validation loops (total loss, MSE and cross-entropy parts) are summed with `loss.item()`, `mse.item()`, `cross_entropy.item()`, so they are Python floats and no batch's autograd graph outlives its iteration.

source: https://github.com/samuelyu2002/ImVisible/issues/2
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class LYTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.light = nn.Linear(16, 5)
        self.direction = nn.Linear(16, 4)

    def forward(self, x):
        h = self.features(x)
        return self.light(h), self.direction(h)


def make_loader(n_batches):
    return [(torch.randn(8, 3, 24, 32), torch.randint(0, 5, (8,)), torch.rand(8, 4)) for _ in range(n_batches)]


def compute_losses(net, images, labels, points):
    pred_classes, pred_direc = net(images)
    cross_entropy = nn.functional.cross_entropy(pred_classes, labels)
    mse = nn.functional.mse_loss(pred_direc, points)
    return cross_entropy + 0.5 * mse, mse, cross_entropy


def train_epoch(net, optimizer, loader):
    net.train()
    running_loss = running_mse = running_ce = 0.0
    for images, labels, points in loader:
        optimizer.zero_grad()
        loss, mse, cross_entropy = compute_losses(net, images, labels, points)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        running_mse += mse.item()
        running_ce += cross_entropy.item()
    return running_loss, running_mse, running_ce


def validate(net, loader):
    net.eval()
    val_running_loss = val_mse_loss = val_ce_loss = 0.0
    for images, labels, points in loader:
        loss, mse, cross_entropy = compute_losses(net, images, labels, points)
        val_running_loss += loss.item()
        val_mse_loss += mse.item()
        val_ce_loss += cross_entropy.item()
    return val_running_loss, val_mse_loss, val_ce_loss


def graph_size(total):
    """Autograd nodes reachable from a running total, and the saved tensors they hold (read only)."""
    fn = getattr(total, "grad_fn", None)
    seen, stack, saved = set(), [fn] if fn is not None else [], 0
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        saved += sum(1 for name in dir(node) if name.startswith("_saved_") and isinstance(getattr(node, name, None), torch.Tensor))
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return len(seen), saved


def main():
    net = LYTNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    train_epoch(net, optimizer, make_loader(6))
    val_total, _, _ = validate(net, make_loader(12))
    nodes, saved = graph_size(val_total)
    print("validation total requires_grad:", getattr(val_total, "requires_grad", False))
    print("autograd nodes kept alive:", nodes, "saved tensors:", saved)


if __name__ == "__main__":
    main()
