import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # ROOT
        optimizer.step()
        total += loss.item()
    return total / len(loader)
