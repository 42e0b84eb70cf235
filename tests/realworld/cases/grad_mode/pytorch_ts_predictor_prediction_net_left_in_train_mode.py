"""pytorch-ts's `PTSPredictor` wraps the prediction network that the estimator's `create_predictor` builds (a fresh module, so in training mode) and copies the trained weights into, and runs it under `torch.no_grad()` in `predict` without ever calling `prediction_net.eval()`: the network's dropout stays active at forecast time, so the same series gets a different, noisier forecast on every call, with no error.

source: https://github.com/zalandoresearch/pytorch-ts/commit/0a8e9fdec8549a97a501e0a21b820925498e8ff4
kind: bug
symptom: silent
verified: two `predict` calls on the same series give different mean forecasts (identical: False, max difference 1.06) and the mean absolute forecast error is 0.217 against 0.169 for the look-alike, whose two forecasts are identical: True
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

CONTEXT, PREDICTION = 24, 8


class DeepARTrainingNetwork(nn.Module):
    def __init__(self, num_layers=2, num_cells=16, dropout_rate=0.3):
        super().__init__()
        self.rnn = nn.LSTM(1, num_cells, num_layers, dropout=dropout_rate, batch_first=True)
        self.dropout = nn.Dropout(dropout_rate)
        self.proj = nn.Linear(num_cells, 2)

    def distribution(self, past_target):
        out, state = self.rnn(past_target.unsqueeze(-1))
        loc, raw_scale = self.proj(self.dropout(out)).unbind(-1)
        return loc, nn.functional.softplus(raw_scale) + 1e-3, state

    def forward(self, past_target, future_target):
        series = torch.cat([past_target, future_target], dim=1)
        loc, scale, _ = self.distribution(series[:, :-1])
        return -torch.distributions.Normal(loc, scale).log_prob(series[:, 1:]).mean()


class DeepARPredictionNetwork(DeepARTrainingNetwork):
    def forward(self, past_target):
        """Greedy decoding of the mean over the prediction range."""
        loc, _, state = self.distribution(past_target)
        nxt, means = loc[:, -1:], []
        for _ in range(PREDICTION):
            means.append(nxt)
            out, state = self.rnn(nxt.unsqueeze(-1), state)
            nxt = self.proj(self.dropout(out))[..., 0]
        return torch.cat(means, dim=1)


class PTSPredictor:
    def __init__(self, prediction_net, batch_size, prediction_length):
        self.prediction_net = prediction_net  # ROOT
        self.batch_size = batch_size
        self.prediction_length = prediction_length

    def predict(self, dataset):
        with torch.no_grad():
            for batch in dataset.split(self.batch_size):
                yield from self.prediction_net(batch)


class DeepAREstimator:
    def create_training_network(self):
        return DeepARTrainingNetwork()

    def create_predictor(self, trained_network):
        prediction_network = DeepARPredictionNetwork()
        prediction_network.load_state_dict(trained_network.state_dict())
        return PTSPredictor(prediction_network, batch_size=16, prediction_length=PREDICTION)

    def train(self, series, epochs=8):
        net = self.create_training_network()
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        net.train()
        for epoch in range(epochs):
            for batch in series[torch.randperm(len(series))].split(32):
                loss = net(batch[:, :CONTEXT], batch[:, CONTEXT:])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return self.create_predictor(net)


t = torch.arange(CONTEXT + PREDICTION).float()
phase = torch.rand(128, 1) * 6.28
series = torch.sin(t / 3 + phase) + 0.05 * torch.randn(128, CONTEXT + PREDICTION)

predictor = DeepAREstimator().train(series)
test = series[:32]
first = torch.stack(list(predictor.predict(test[:, :CONTEXT])))
second = torch.stack(list(predictor.predict(test[:, :CONTEXT])))
error = (first - test[:, CONTEXT:]).abs().mean().item()
print(f"two forecasts identical: {torch.equal(first, second)} (max difference {(first - second).abs().max().item():.3g})")
print(f"mean absolute forecast error: {error:.3f}")
