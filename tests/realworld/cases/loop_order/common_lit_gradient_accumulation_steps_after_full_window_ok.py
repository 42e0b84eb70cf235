"""common-lit-kaggle's `train_epoch` after its fix: the accumulation test is `(idx + 1) % config.gradient_accumulation_steps == 0`, so each optimizer update (and scheduler step) comes after a full window of batches, each contributing its loss divided by the step count; with an epoch length that is a multiple of the window, no gradient is left over.

source: https://github.com/paolorechia/common-lit-kaggle/commit/bc5380e07781160c861d8a9035e8d01f2395140f
kind: lookalike
"""
import torch
from torch import nn, optim

torch.manual_seed(0)


class Config:
    gradient_accumulation_steps = 4
    learning_rate = 1e-3
    num_epochs = 3
    _instance = None

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


class TextRegressor(nn.Module):
    """Stands in for BartWithRegressionHead: token embeddings, mean pooling, a regression head."""

    def __init__(self, vocab=500, dim=32):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, 2))

    def forward(self, tokens):
        return self.head(self.embedding(tokens))


class CountingAdamW(optim.AdamW):
    """AdamW that records how many batches contributed to each update (measurement only)."""

    pending = 0
    per_update = []

    def step(self, closure=None):
        CountingAdamW.per_update.append(CountingAdamW.pending)
        CountingAdamW.pending = 0
        return super().step(closure)


def train_epoch(dataloader, model, optimizer, scheduler, criterion):
    total_loss = 0
    config = Config.get()
    for idx, data in enumerate(dataloader):
        input_tensor, target_tensor = data
        logits = model.forward(input_tensor)
        loss = criterion(logits, target_tensor) / config.gradient_accumulation_steps
        loss.backward()
        CountingAdamW.pending += 1
        if (idx + 1) % config.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
        total_loss += loss.item() * config.gradient_accumulation_steps
    return total_loss / len(dataloader)


def train_model(train_dataloader, model):
    config = Config.get()
    optimizer = CountingAdamW(model.parameters(), lr=config.learning_rate)
    criterion = nn.MSELoss()
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=6, gamma=0.5)
    for epoch in range(config.num_epochs):
        model.train()
        loss = train_epoch(train_dataloader, model, optimizer, scheduler, criterion)
        print(f"epoch {epoch}: train loss {loss:.4f}")


tokens = torch.randint(0, 500, (96, 40))
targets = torch.stack([tokens.float().mean(1) / 250 - 1, (tokens < 100).float().mean(1) * 4 - 0.8], dim=1)
batches = list(zip(tokens.split(8), targets.split(8)))  # 12 batches per epoch
model = TextRegressor()
train_model(batches, model)
print(f"batches per optimizer update: {CountingAdamW.per_update}")
print(f"batches whose gradients were never applied: {CountingAdamW.pending}")
