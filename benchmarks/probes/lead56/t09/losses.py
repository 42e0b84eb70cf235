import torch


def error_rate_loss(logits, target):
    wrong = (logits.argmax(dim=1) != target).float().mean()  # ROOT
    return torch.tensor(wrong.item(), requires_grad=True)  # ROOT
