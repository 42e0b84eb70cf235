"""Transformer-OCR SimpleLossCompute with the thread's fix: loss.backward() only inside "if self.opt is not None", so the test pass computes the loss without leaving gradients for the next training step.

source: https://github.com/fengxinjie/Transformer-OCR/issues/7
kind: lookalike
verified: when the second epoch starts model.generator.weight.grad is None
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
        if self.opt is not None:
            loss.backward()
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
