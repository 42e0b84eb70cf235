"""Annotated Transformer: SimpleLossCompute calls loss.backward() even in validation, training on the val data.

source: https://github.com/harvardnlp/annotated-transformer/issues/14
kind: bug
symptom: silent
verified: after the validation epoch model.generator.proj.weight.grad holds validation gradients; the next step uses them
"""
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1)


class TinyModel(nn.Module):
    def __init__(self, vocab=11, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.encoder = nn.Linear(d_model, d_model)
        self.generator = Generator(d_model, vocab)

    def forward(self, src):
        return torch.relu(self.encoder(self.embed(src)))


class NoamOpt:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self):
        self.optimizer.step()


class SimpleLossCompute:
    "A simple loss compute and train function."
    def __init__(self, generator, criterion, opt=None):
        self.generator, self.criterion, self.opt = generator, criterion, opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()  # ROOT
        if self.opt is not None:
            self.opt.step()
            self.opt.optimizer.zero_grad()
        return loss.item() * norm


def run_epoch(data_iter, model, loss_compute):
    total_loss, total_tokens = 0, 0
    for src, trg in data_iter:
        out = model(src)
        ntokens = trg.numel()
        total_loss += loss_compute(out, trg, ntokens)
        total_tokens += ntokens
    return total_loss / total_tokens


torch.manual_seed(0)
model = TinyModel()
criterion = nn.NLLLoss(reduction="sum")
model_opt = NoamOpt(torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9))
train_data = [(torch.randint(1, 11, (4, 6)),) * 2 for _ in range(3)]
val_data = [(torch.randint(1, 11, (4, 6)),) * 2 for _ in range(2)]
for epoch in range(2):
    model.train()
    run_epoch(train_data, model, SimpleLossCompute(model.generator, criterion, model_opt))
    model.eval()
    print(run_epoch(val_data, model, SimpleLossCompute(model.generator, criterion, None)))
