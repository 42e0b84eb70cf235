"""One step factory for training and evaluation; grad mode follows the train flag."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def create_step(model, optimizer, loss_fn, train=True):
    def _step(batch):
        model.train(train)
        x, y = batch
        with torch.set_grad_enabled(train):
            loss = loss_fn(model(x), y)
        if train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return loss.item()
    return _step


model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_step = create_step(model, opt, F.cross_entropy)
eval_step = create_step(model, opt, F.cross_entropy, train=False)
data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
for epoch in range(2):
    for b in data:
        train_step(b)
    print(sum(eval_step(b) for b in data))
