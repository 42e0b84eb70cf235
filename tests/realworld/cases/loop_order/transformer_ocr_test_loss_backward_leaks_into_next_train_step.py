"""Transformer-OCR SimpleLossCompute calls loss.backward() on every call and only steps and zeroes the optimizer when one is given; the test pass (opt=None) therefore leaves the test-set gradients in .grad, and the first training step of the next epoch applies them with its own.

source: https://github.com/fengxinjie/Transformer-OCR/issues/7
kind: bug
symptom: silent
verified: when the second epoch starts model.generator.weight.grad still holds the 3 test batches' gradients (norm 0.64), which its first optimizer step adds to the training batch's; with the backward only when an optimizer is given it is None
"""
import torch
import torch.nn as nn


class SimpleLossCompute:
    def __init__(self, generator, criterion, opt=None):
        self.generator = generator
        self.criterion = criterion
        self.opt = opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()  # ROOT
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad()
        return loss.item() * norm


class OCRModel(nn.Module):
    def __init__(self, d_model=16, vocab=12):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, d_model), nn.ReLU())
        self.generator = nn.Linear(d_model, vocab)

    def forward(self, src):
        return self.encoder(src)


def run_epoch(dataloader, model, loss_compute):
    total_loss = 0
    for src, tgt in dataloader:
        out = model(src)
        total_loss += loss_compute(out, tgt, tgt.numel())
    return total_loss


torch.manual_seed(0)
model = OCRModel()
criterion = nn.CrossEntropyLoss(reduction="sum")
model_opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_dataloader = [(torch.randn(4, 6, 8), torch.randint(0, 12, (4, 6))) for _ in range(3)]
val_dataloader = [(torch.randn(4, 6, 8), torch.randint(0, 12, (4, 6))) for _ in range(3)]
for epoch in range(2):
    model.train()
    leftover = model.generator.weight.grad
    print(epoch, None if leftover is None else leftover.norm().item())
    run_epoch(train_dataloader, model, SimpleLossCompute(model.generator, criterion, model_opt))
    model.eval()
    test_loss = run_epoch(val_dataloader, model, SimpleLossCompute(model.generator, criterion, None))
    print("test_loss", test_loss)
