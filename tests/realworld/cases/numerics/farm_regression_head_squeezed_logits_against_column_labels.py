"""Regression head squeezes its logits to (B,) while the labels stay (B, 1): MSELoss broadcasts to (B, B).

source: https://github.com/deepset-ai/FARM/issues/229
kind: bug
symptom: silent
verified: UserWarning "Using a target size (torch.Size([32, 1])) that is different to the input size (torch.Size([32]))"; predictions are pulled to the batch mean, held-out MSE / var 0.95 vs 0.004 without the squeeze
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class RegressionHead(nn.Module):
    def __init__(self, layer_dims):
        super().__init__()
        self.feed_forward = nn.Linear(*layer_dims)
        self.loss_fct = nn.MSELoss(reduction="none")

    def forward(self, x):
        return self.feed_forward(x)

    def logits_to_loss(self, logits, label_ids):
        return self.loss_fct(logits, label_ids.float())

    def logits_to_preds(self, logits):
        return logits.squeeze(-1)


head = RegressionHead([16, 1])
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
true_w = torch.randn(16, 1)
for step in range(300):
    x = torch.randn(32, 16)
    label_ids = x @ true_w
    logits = head(x)
    preds = head.logits_to_preds(logits)  # ROOT
    per_sample_losses = head.logits_to_loss(preds, label_ids)
    loss = per_sample_losses.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
x = torch.randn(256, 16)
print(nn.functional.mse_loss(head(x), x @ true_w).item() / (x @ true_w).var().item())
