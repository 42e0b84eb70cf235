import torch

from classification_model import ClassificationModel


def train(model, loader, optimizer):
    model.train()
    for images, labels in loader:
        optimizer.zero_grad()
        outputs = model.forward(images).detach()  # ROOT
        loss = model.compute_loss(outputs, labels)
        loss.backward()
        optimizer.step()


def main():
    net = ClassificationModel(8, 3)
    data = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
    train(net, data, torch.optim.SGD(net.parameters(), lr=0.1))


if __name__ == "__main__":
    main()
