import torch

from losses import RegressionCriterion


def fit(model, batches, epochs=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = RegressionCriterion()
    for _ in range(epochs):
        for x, y in batches:
            pred = model(x)
            loss = criterion(pred.detach(), y)  # ROOT
            opt.zero_grad()
            loss.backward()
            opt.step()


def main():
    net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    fit(net, [(torch.randn(6, 5), torch.randn(6, 1))] * 2)


if __name__ == "__main__":
    main()
