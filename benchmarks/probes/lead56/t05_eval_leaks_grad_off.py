"""An evaluation helper switches gradients off globally and never switches them back."""
import torch
import torch.nn as nn


def evaluate(model, batches):
    model.eval()
    torch.set_grad_enabled(False)  # ROOT
    total = 0.0
    for x, y in batches:
        total += nn.functional.l1_loss(model(x), y).item()
    model.train()
    return total / len(batches)


def train(model, batches, epochs=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    print("initial", evaluate(model, batches))
    for _ in range(epochs):
        for x, y in batches:
            loss = nn.functional.l1_loss(model(x), y)
            opt.zero_grad()
            loss.backward()  # SYMPTOM
            opt.step()


if __name__ == "__main__":
    batches = [(torch.randn(4, 5), torch.randn(4, 2)) for _ in range(3)]
    train(nn.Linear(5, 2), batches)
