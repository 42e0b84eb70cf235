import torch


def build_optimizer(model, lr=1e-3, wd=0.05):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not name.startswith(("stem.", "blocks.", "head.")):  # ROOT
            continue
        (no_decay if p.ndim == 1 else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr)
