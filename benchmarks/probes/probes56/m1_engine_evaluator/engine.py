import torch


def create_trainer(model, optimizer, loss_fn):
    def update(batch):
        model.train()
        x, y = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()
    return update


def create_evaluator(model, metric_fn):
    model.eval()
    torch.set_grad_enabled(False)  # ROOT

    def evaluate(batches):
        scores = [metric_fn(model(x), y) for x, y in batches]
        return sum(scores) / len(scores)
    return evaluate
