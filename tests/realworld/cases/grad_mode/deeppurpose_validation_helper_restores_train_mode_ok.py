"""DeepPurpose's `DBTA.test_` after its fix: the validation helper called at the end of every training epoch puts the drug-target model in eval mode for its pass and calls `model.train()` before returning, so every epoch of `DBTA.train` trains with dropout active.

source: https://github.com/kexinhuang12345/DeepPurpose/commit/00fca16ef368970729396ccc2b5c4e435aaa529c
kind: lookalike
"""
import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class MLPEncoder(nn.Sequential):
    """Stands in for DeepPurpose's drug/protein encoders (CNN, transformer, ...): an MLP over a fingerprint."""

    def __init__(self, input_dim, hidden_dim):
        super().__init__(nn.Linear(input_dim, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, hidden_dim))


class Classifier(nn.Sequential):
    def __init__(self, model_drug, model_protein, hidden_dim_drug, hidden_dim_protein, cls_hidden_dims):
        super().__init__()
        self.model_drug = model_drug
        self.model_protein = model_protein
        self.dropout = nn.Dropout(0.1)
        dims = [hidden_dim_drug + hidden_dim_protein] + cls_hidden_dims + [1]
        self.predictor = nn.ModuleList([nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1)])

    def forward(self, v_D, v_P):
        v_f = torch.cat((self.model_drug(v_D), self.model_protein(v_P)), 1)
        for i, l in enumerate(self.predictor):
            if i == len(self.predictor) - 1:
                v_f = l(v_f)
            else:
                v_f = F.relu(self.dropout(l(v_f)))
        return v_f


class DBTA:
    def __init__(self):
        self.model = Classifier(MLPEncoder(32, 16), MLPEncoder(48, 16), 16, 16, [64, 32])
        self.train_mode_epochs = 0

    def test_(self, data_generator, model):
        y_pred, y_label = [], []
        model.eval()
        for v_d, v_p, label in data_generator:
            score = self.model(v_d, v_p)
            y_pred += torch.squeeze(score, 1).detach().numpy().tolist()
            y_label += label.numpy().tolist()
        model.train()
        y_pred, y_label = np.asarray(y_pred), np.asarray(y_label)
        return float(np.mean((y_pred - y_label) ** 2)), float(np.corrcoef(y_pred, y_label)[0, 1])

    def train(self, train, val, train_epoch=4, lr=1e-3):
        opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        training_generator = DataLoader(train, batch_size=32, shuffle=True)
        validation_generator = DataLoader(val, batch_size=64)
        max_MSE = float("inf")
        model_max = None
        for epo in range(train_epoch):
            epoch_in_train_mode = True
            for v_d, v_p, label in training_generator:
                epoch_in_train_mode &= self.model.training  # measurement: the mode each training batch runs in
                score = self.model(v_d, v_p)
                loss = nn.MSELoss()(torch.squeeze(score, 1), label)
                opt.zero_grad()
                loss.backward()
                opt.step()
            self.train_mode_epochs += epoch_in_train_mode
            with torch.set_grad_enabled(False):
                mse, r2 = self.test_(validation_generator, self.model)
                if mse < max_MSE:
                    model_max = copy.deepcopy(self.model)
                    max_MSE = mse
                print(f"Validation at Epoch {epo + 1}, MSE: {mse:.4f}, Pearson Correlation: {r2:.4f}")
        return model_max


drugs, proteins = torch.randn(256, 32), torch.randn(256, 48)
affinity = (drugs[:, :4].sum(1) * proteins[:, :4].sum(1)) / 4
train = TensorDataset(drugs[:192], proteins[:192], affinity[:192])
val = TensorDataset(drugs[192:], proteins[192:], affinity[192:])
dbta = DBTA()
dbta.train(train, val)
print(f"epochs trained in train mode: {dbta.train_mode_epochs}/4")
