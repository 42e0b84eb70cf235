"""DeepCTR-Torch: the L2 regularization loss is computed once in __init__ and re-added to every batch's loss.

source: https://github.com/shenweichen/DeepCTR-Torch/issues/69
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BaseModel(nn.Module):
    def __init__(self, feature_sizes, embedding_size=4, l2_reg_embedding=1e-5):
        super(BaseModel, self).__init__()
        self.reg_loss = torch.zeros((1,))
        self.aux_loss = torch.zeros((1,))
        self.embedding_dict = nn.ModuleDict({name: nn.Embedding(size, embedding_size) for name, size in feature_sizes.items()})
        self.add_regularization_loss(self.embedding_dict.parameters(), l2_reg_embedding)  # ROOT
        self.linear = nn.Linear(embedding_size * len(feature_sizes), 1)

    def add_regularization_loss(self, weight_list, weight_decay, p=2):
        reg_loss = torch.zeros((1,))
        for w in weight_list:
            reg_loss = reg_loss + torch.norm(w, p=p)
        self.reg_loss = self.reg_loss + weight_decay * reg_loss

    def forward(self, X):
        emb = [self.embedding_dict[name](X[:, i]) for i, name in enumerate(self.embedding_dict)]
        return torch.sigmoid(self.linear(torch.cat(emb, dim=-1)))

    def fit(self, x, y, batch_size=4, epochs=1):
        optim = torch.optim.Adagrad(self.parameters(), lr=0.01)
        loss_func = F.binary_cross_entropy
        for epoch in range(epochs):
            for start in range(0, len(x), batch_size):
                y_pred = self(x[start:start + batch_size]).squeeze()
                optim.zero_grad()
                loss = loss_func(y_pred, y[start:start + batch_size].squeeze(), reduction='sum')
                total_loss = loss + self.reg_loss + self.aux_loss
                total_loss.backward(retain_graph=True)  # SYMPTOM
                optim.step()


torch.manual_seed(0)
model = BaseModel({"user_id": 10, "item_id": 12})
x = torch.stack([torch.randint(0, 10, (12,)), torch.randint(0, 12, (12,))], dim=1)
y = torch.randint(0, 2, (12,)).float()
model.fit(x, y)
