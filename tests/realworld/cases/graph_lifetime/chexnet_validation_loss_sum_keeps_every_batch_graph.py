"""zoogzog/chexnet's `ChexnetTrainer.epochVal` wraps the validation batches in `Variable(..., volatile=True)`, which PyTorch ignores since 0.4, so every validation forward records a graph; it then sums the loss tensors themselves (`losstensorMean += losstensor`) to hand the mean to the learning-rate scheduler. The running sum holds the graph of every validation batch, with the network's saved activations, until the epoch ends: memory grows with the size of the validation set (the report: out of memory at the end of the first epoch), with no error until then. The suggested fix accumulates the number (`losstensor.data[0]`, now `.item()`).

source: https://github.com/zoogzog/chexnet/issues/12
kind: bug
symptom: silent
verified: after validating 12 batches the mean loss handed to the scheduler still reaches 12 loss graphs holding 2,639,816 bytes of saved tensors; in the look-alike the mean is a float that reaches 0 graphs (0 bytes)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

CLASSES = 14


class DenseNet121(nn.Module):
    def __init__(self, class_count):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Sequential(nn.Linear(16, class_count), nn.Sigmoid())

    def forward(self, x):
        return self.classifier(self.features(x))


def saved_bytes(t):
    """Bytes of saved tensors and number of loss nodes reachable from a tensor's graph (read only)."""
    if not torch.is_tensor(t) or t.grad_fn is None:
        return 0, 0
    seen, stack, total, losses = set(), [t.grad_fn], 0, 0
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        losses += type(fn).__name__.startswith("BinaryCrossEntropy")
        for name in dir(fn):
            if name.startswith("_saved_"):
                value = getattr(fn, name)
                if torch.is_tensor(value):
                    total += value.numel() * value.element_size()
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return total, losses


class ChexnetTrainer:
    @staticmethod
    def epochTrain(model, batches, optimizer, loss):
        model.train()
        for inp, target in batches:
            lossvalue = loss(model(inp), target)
            optimizer.zero_grad()
            lossvalue.backward()
            optimizer.step()

    @staticmethod
    def epochVal(model, batches, loss):
        model.eval()
        lossVal, lossValNorm, losstensorMean = 0, 0, 0
        for inp, target in batches:
            losstensor = loss(model(inp), target)
            losstensorMean += losstensor  # ROOT
            lossVal += losstensor.item()
            lossValNorm += 1
        return lossVal / lossValNorm, losstensorMean / lossValNorm

    @staticmethod
    def train(epochs=1):
        model = DenseNet121(CLASSES)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=1e-5)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.1, patience=5)
        loss = nn.BCELoss()
        gen = torch.Generator().manual_seed(1)

        def batches(n):
            return [(torch.randn(4, 3, 15, 15, generator=gen),
                     (torch.rand(4, CLASSES, generator=gen) > 0.8).float()) for _ in range(n)]

        train_set, val_set = batches(6), batches(12)
        for epoch in range(epochs):
            ChexnetTrainer.epochTrain(model, train_set, optimizer, loss)
            lossVal, losstensor = ChexnetTrainer.epochVal(model, val_set, loss)
            nbytes, graphs = saved_bytes(losstensor)
            print(f"epoch {epoch} val loss {lossVal:.4f}: the mean handed to the scheduler reaches "
                  f"{graphs} loss graphs holding {nbytes:,} bytes of saved tensors")
            scheduler.step(losstensor.item())


if __name__ == "__main__":
    ChexnetTrainer.train()
