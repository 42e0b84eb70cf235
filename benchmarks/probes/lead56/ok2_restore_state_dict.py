"""Look-alike: early stopping restores the best weights in place with load_state_dict."""
import copy
import torch
import torch.nn as nn


def fit(model, data, epochs=8, patience=1):
    opt = torch.optim.Adam(model.parameters(), lr=1.0)
    best, best_state, bad = float("inf"), copy.deepcopy(model.state_dict()), 0
    for epoch in range(epochs):
        for x, y in data:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = sum(nn.functional.mse_loss(model(x), y).item() for x, y in data)
        if val < best:
            best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad > patience:
                model.load_state_dict(best_state)
                bad = 0
    return model


if __name__ == "__main__":
    torch.manual_seed(3)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    fit(nn.Linear(4, 1), data)
