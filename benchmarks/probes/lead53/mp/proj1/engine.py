from losses import dice_loss


def train_one_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = dice_loss(model(x), y)
        loss.backward()
        optimizer.step()
