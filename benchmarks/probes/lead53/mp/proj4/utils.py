import torch


@torch.no_grad()  # ROOT
def predict(model, x):
    model.eval()
    out = model(x)
    model.train()
    return out
