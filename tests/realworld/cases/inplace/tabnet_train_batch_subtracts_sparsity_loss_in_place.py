"""pytorch-tabnet's TabModel._train_batch adds the sparsity regularisation with `loss -= self.lambda_sparse * M_loss`, in place on the tensor the user's loss_fn returned: with the RMSELoss of the report that tensor is the output of torch.sqrt, which SqrtBackward saved for its gradient, so backward() fails on the first batch.

source: https://github.com/dreamquark-ai/tabnet/issues/312
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn


class RMSELoss(torch.nn.Module):
    def __init__(self):
        super(RMSELoss, self).__init__()

    def forward(self, x, y):
        criterion = nn.MSELoss()
        eps = 1e-6
        loss = torch.sqrt(criterion(x, y) + eps)
        return loss


class TabNet(nn.Module):  # the encoder's attentive masks and their entropy (M_loss), reduced to two steps
    def __init__(self, input_dim, output_dim, n_steps=2, epsilon=1e-15):
        super().__init__()
        self.n_steps, self.epsilon = n_steps, epsilon
        self.att_transformers = nn.ModuleList([nn.Linear(input_dim, input_dim) for _ in range(n_steps)])
        self.feat_transformers = nn.ModuleList([nn.Linear(input_dim, 8) for _ in range(n_steps)])
        self.final_mapping = nn.Linear(8, output_dim)

    def forward(self, x):
        M_loss = 0
        prior = torch.ones_like(x)
        res = 0
        for step in range(self.n_steps):
            M = torch.softmax(self.att_transformers[step](x) * prior, dim=-1)
            M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + self.epsilon)), dim=1))
            prior = torch.mul(1.3 - M, prior)
            res = res + torch.relu(self.feat_transformers[step](torch.mul(M, x)))
        M_loss /= self.n_steps
        return self.final_mapping(res), M_loss


class TabModel:  # TabNetRegressor reduced to what _train_batch uses
    def __init__(self, loss_fn, lambda_sparse=1e-3):
        self.network = TabNet(6, 1)
        self.loss_fn = loss_fn
        self.lambda_sparse = lambda_sparse
        self._optimizer = torch.optim.Adam(self.network.parameters(), lr=2e-2)

    def compute_loss(self, y_pred, y_true):
        return self.loss_fn(y_pred, y_true)

    def _train_batch(self, X, y):
        batch_logs = {"batch_size": X.shape[0]}
        X = X.float()
        y = y.float()
        for param in self.network.parameters():
            param.grad = None
        output, M_loss = self.network(X)
        loss = self.compute_loss(output, y)
        # Add the overall sparsity loss
        loss -= self.lambda_sparse * M_loss  # ROOT
        # Perform backward pass and optimization
        loss.backward()  # SYMPTOM
        self._optimizer.step()
        batch_logs["loss"] = loss.cpu().detach().numpy().item()
        return batch_logs


torch.manual_seed(0)
X_train = torch.randn(64, 6)
y_train = X_train[:, :1] * 2 + 0.1 * torch.randn(64, 1)
clf = TabModel(loss_fn=RMSELoss())
for epoch in range(3):
    for start in range(0, 64, 32):
        logs = clf._train_batch(X_train[start:start + 32], y_train[start:start + 32])
    print("epoch", epoch, "loss", round(logs["loss"], 4))
