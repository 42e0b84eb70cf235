"""The same ELR replication after its fix: `ELRLoss.forward` clamps the softmax to [1e-4, 1 - 1e-4] before the regulariser, so `1 - <target, p>` stays positive, `log` stays finite and the classifier keeps training on the noisy labels.

source: https://github.com/YinengWang/Supervised-Image-Classification-with-Noisy-Labels-Using-Deep-Learning/commit/1a04fec68fa3f86eefaa1694c1a6619d922d80f7
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

N_EXAMPLES, N_FEATURES, N_CLASSES = 512, 32, 10


def make_noisy_dataset(noise_rate=0.4):
    centers = torch.randn(N_CLASSES, N_FEATURES) * 3
    clean = torch.randint(0, N_CLASSES, (N_EXAMPLES,))
    images = centers[clean] + torch.randn(N_EXAMPLES, N_FEATURES)
    noisy = clean.clone()
    flip = torch.rand(N_EXAMPLES) < noise_rate
    noisy[flip] = torch.randint(0, N_CLASSES, (int(flip.sum()),))
    return images, noisy, clean


class ELRLoss(nn.Module):
    """Cross-entropy plus the early-learning regularisation towards a running average of the predictions."""

    def __init__(self, n_examples, n_classes=N_CLASSES, beta=0.3, lam=3.0):
        super().__init__()
        self.beta, self.lam = beta, lam
        self.register_buffer("stored_targets", torch.zeros(n_examples, n_classes))

    def forward(self, indices, output, label):
        pred = F.softmax(output, dim=1)
        pred = torch.clamp(pred, 1e-4, 1.0 - 1e-4)
        ce_loss = F.cross_entropy(output, label)
        with torch.no_grad():
            running = pred / pred.sum(dim=1, keepdim=True)
            self.stored_targets[indices] = self.beta * self.stored_targets[indices] + (1 - self.beta) * running
        agreement = (self.stored_targets[indices] * pred).sum(dim=1)
        elr_term = (1 - agreement).log().mean()
        return ce_loss + self.lam * elr_term


def build_classifier():
    return nn.Sequential(nn.Linear(N_FEATURES, 64), nn.ReLU(), nn.Linear(64, N_CLASSES))


def train(model, criterion, images, labels, epochs=30, batch_size=64):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    first_bad_epoch = None
    for epoch in range(epochs):
        for indices in torch.randperm(len(images)).split(batch_size):
            loss = criterion(indices, model(images[indices]), labels[indices])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if first_bad_epoch is None and not torch.isfinite(loss):
                first_bad_epoch = epoch
    return first_bad_epoch


def main():
    images, noisy, clean = make_noisy_dataset()
    torch.manual_seed(1)
    model = build_classifier()
    first_bad_epoch = train(model, ELRLoss(N_EXAMPLES), images, noisy)
    with torch.no_grad():
        accuracy = (model(images).argmax(dim=1) == clean).float().mean().item()
    broken = any(not torch.isfinite(p).all() for p in model.parameters())
    print(f"first non-finite loss in epoch: {first_bad_epoch}")
    print(f"non-finite parameters: {broken}, clean accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
