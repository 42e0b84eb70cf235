"""pytorch-forecasting's TiDEModel.forward with the PR's fix: the per-target predictions are cloned without detach, prediction = [i.clone().requires_grad_(True) for i in prediction], so the multivariate loss backpropagates into the TiDE encoder and decoder.

source: https://github.com/sktime/pytorch-forecasting/pull/2208
kind: lookalike
"""
import torch
import torch.nn as nn


class _TideModule(nn.Module):
    def __init__(self, input_chunk_length, output_chunk_length, output_dim, hidden_size=32):
        super().__init__()
        self.output_chunk_length, self.output_dim = output_chunk_length, output_dim
        self.encoder = nn.Sequential(nn.Linear(input_chunk_length * output_dim, hidden_size), nn.ReLU())
        self.decoder = nn.Linear(hidden_size, output_chunk_length * output_dim)

    def forward(self, x_in):
        input_vector, decoder_x_t, x_s = x_in
        y = self.decoder(self.encoder(input_vector.flatten(1)))
        return y.view(-1, self.output_chunk_length, self.output_dim)


class TiDEModel(nn.Module):
    def __init__(self, input_chunk_length=12, output_chunk_length=4, output_dim=2):
        super().__init__()
        self.output_dim = output_dim
        self.model = _TideModule(input_chunk_length, output_chunk_length, output_dim)

    def transform_output(self, prediction, target_scale):
        return [p * scale[:, 1:2] + scale[:, 0:1] for p, scale in zip(prediction, target_scale)]

    def forward(self, x):
        input_vector = x["encoder_cont"]
        x_in = (input_vector, None, None)
        prediction = self.model(x_in)
        if self.output_dim > 1:
            prediction = prediction.permute(2, 0, 1)
            prediction = [i.clone().requires_grad_(True) for i in prediction]
        prediction = self.transform_output(prediction, target_scale=x["target_scale"])
        return dict(prediction=prediction)


torch.manual_seed(0)
net = TiDEModel()
optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
start = [p.detach().clone() for p in net.parameters()]
x = {"encoder_cont": torch.randn(64, 12, 2), "target_scale": [torch.tensor([[0.0, 1.0]]).expand(64, 2)] * 2}
targets = [torch.randn(64, 4), torch.randn(64, 4)]
losses = []
for _ in range(30):
    out = net(x)
    loss = sum(nn.functional.mse_loss(p, t) for p, t in zip(out["prediction"], targets))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
moved = sum((p - q).norm() for p, q in zip(net.parameters(), start)).item()
print("weights moved", moved, "grad is None", net.model.decoder.weight.grad is None, "loss", losses[0], "->", losses[-1])
