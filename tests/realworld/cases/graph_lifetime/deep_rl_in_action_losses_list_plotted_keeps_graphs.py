"""Deep Reinforcement Learning in Action, appendix A.4: the MNIST training loop appends the loss tensor itself to `losses` (keeping every iteration's graph alive) and the plot at the end hands that list of grad-requiring tensors to matplotlib, which converts them with numpy().

source: https://github.com/DeepReinforcementLearning/DeepReinforcementLearningInAction/issues/42
kind: bug
symptom: crash
verified: Can't call numpy() on Tensor that requires grad
"""
import matplotlib

matplotlib.use("Agg")
import numpy as np
import torch
from matplotlib import pyplot as plt


def nn(x, w1, w2):
    l1 = x @ w1
    l1 = torch.relu(l1)
    l2 = l1 @ w2
    return l2


torch.manual_seed(0)
w1 = torch.randn(784, 200, requires_grad=True)
w2 = torch.randn(200, 10, requires_grad=True)
train_data = torch.randint(0, 256, (2000, 28, 28), dtype=torch.uint8)  # stands in for MNIST
train_labels = torch.randint(0, 10, (2000,))

lr = 0.0001
epochs = 25
batch_size = 100
losses = []
lossfn = torch.nn.CrossEntropyLoss()
for i in range(epochs):
    rid = np.random.randint(0, train_data.shape[0], size=batch_size)
    x = train_data[rid].float().flatten(start_dim=1)
    x /= x.max()
    pred = nn(x, w1, w2)
    target = train_labels[rid]
    loss = lossfn(pred, target)
    losses.append(loss)  # ROOT
    loss.backward()
    with torch.no_grad():
        w1 -= lr * w1.grad
        w2 -= lr * w2.grad

plt.figure(figsize=(10, 7))
plt.xlabel("Training Time", fontsize=22)
plt.ylabel("Loss", fontsize=22)
plt.plot(losses)  # SYMPTOM
