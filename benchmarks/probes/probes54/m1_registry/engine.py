import torch.nn.functional as F


def train_epoch(model, optimizer, batches):
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
