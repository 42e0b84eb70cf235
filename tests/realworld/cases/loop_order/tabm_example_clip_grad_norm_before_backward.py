"""TabM's example notebook clips the gradients right after zero_grad and before loss.backward(), so clip_grad_norm_ sees zeroed gradients and the optimizer steps on unclipped ones.

source: https://github.com/yandex-research/tabm/issues/20
kind: bug
symptom: silent
verified: with gradient_clipping_norm = 1.0 the gradient norm the optimizer steps on is 1.48, 1.67 and 1.84 at the first 3 steps (nothing is clipped); with the clip between backward and step it is 1.0 each time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TabM(nn.Module):
    def __init__(self, n_num_features, d_block=64, k=4, d_out=1):
        super().__init__()
        self.k = k
        self.backbone = nn.Sequential(nn.Linear(n_num_features, d_block), nn.ReLU(),
                                      nn.Linear(d_block, d_block), nn.ReLU())
        self.output = nn.Linear(d_block, k * d_out)

    def forward(self, x_num):
        return self.output(self.backbone(x_num)).view(len(x_num), self.k, -1)


torch.manual_seed(0)
data = {'train': {'x_num': torch.randn(512, 8), 'y': torch.randn(512) * 10}}
model = TabM(n_num_features=8)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=3e-4)
gradient_clipping_norm = 1.0
share_training_batches = True


def apply_model(part, idx):
    return model(data[part]['x_num'][idx]).squeeze(-1).float()


def loss_fn(y_pred, y_true):
    k = y_pred.shape[1]
    return F.mse_loss(y_pred.flatten(0, 1), y_true.repeat_interleave(k))


batch_size = 128
for batch_idx in torch.randperm(len(data['train']['y'])).split(batch_size):
    model.train()
    optimizer.zero_grad()
    if gradient_clipping_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping_norm)  # ROOT
    loss = loss_fn(apply_model('train', batch_idx), data['train']['y'][batch_idx])
    loss.backward()
    optimizer.step()
