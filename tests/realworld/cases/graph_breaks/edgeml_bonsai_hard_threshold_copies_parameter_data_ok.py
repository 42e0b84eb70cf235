"""EdgeML Bonsai trainer after the fix: the hard-thresholding step copies the weights from W.data (no autograd history) before np.copy, then writes the thresholded values back through .data between optimizer steps.

source: https://github.com/microsoft/EdgeML/issues/119
kind: lookalike
verified: three epochs run; half of W's entries are zero after each thresholding and the loss still trains Z and V
"""
import numpy as np
import torch
import torch.nn as nn


def hardThreshold(A, s):
    A_ = np.copy(A).ravel()
    if len(A_) > 0:
        th = np.percentile(np.abs(A_), (1 - s) * 100.0, method='higher')
        A_[np.abs(A_) < th] = 0.0
    return A_.reshape(A.shape)


class Bonsai(nn.Module):
    def __init__(self, numClasses=3, dataDimension=10, projectionDimension=4):
        super().__init__()
        self.Z = nn.Parameter(torch.randn(projectionDimension, dataDimension) * 0.1)
        self.W = nn.Parameter(torch.randn(numClasses, projectionDimension) * 0.1)
        self.V = nn.Parameter(torch.randn(numClasses, projectionDimension) * 0.1)

    def forward(self, X):
        XZ = X @ self.Z.t()
        return (XZ @ self.W.t()) * torch.tanh(XZ @ self.V.t())


class BonsaiTrainer:
    def __init__(self, bonsaiObj, sW=0.5, lr=0.01):
        self.bonsaiObj = bonsaiObj
        self.sW = sW
        self.optimizer = torch.optim.Adam(bonsaiObj.parameters(), lr=lr)

    def runHardThrsd(self):
        currW = np.copy(self.bonsaiObj.W.data.numpy())
        self.bonsaiObj.W.data = torch.from_numpy(hardThreshold(currW, self.sW)).float()

    def train(self, X, y, epochs=3):
        for epoch in range(epochs):
            loss = nn.functional.cross_entropy(self.bonsaiObj(X), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.runHardThrsd()


torch.manual_seed(0)
trainer = BonsaiTrainer(Bonsai())
trainer.train(torch.randn(32, 10), torch.randint(0, 3, (32,)))
