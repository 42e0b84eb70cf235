"""ALF's summarize_tensor_gradients registers a gradient hook on the action tensor, which is also called in the prediction step run under torch.no_grad().

source: https://github.com/HorizonRobotics/alf/pull/1089
kind: bug
symptom: crash
verified: RuntimeError: cannot register a hook on a tensor that doesn't require gradient
"""
import torch
import torch.nn as nn

_summaries = {}


def summarize_tensor_gradients(name, tensor):
    def _hook(grad):
        _summaries[name] = grad.norm().item()
        return grad
    tensor.register_hook(_hook)  # ROOT
    return tensor


class ActorNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, observation):
        action = self.net(observation)
        return summarize_tensor_gradients("actor/action", action)


class SacAlgorithm:
    def __init__(self):
        self.actor_network = ActorNetwork()
        self.optimizer = torch.optim.Adam(self.actor_network.parameters(), lr=3e-4)

    def train_step(self, observation):
        action = self.actor_network(observation)
        loss = (action ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def predict_step(self, observation):
        with torch.no_grad():
            return self.actor_network(observation)  # SYMPTOM


torch.manual_seed(0)
alg = SacAlgorithm()
alg.train_step(torch.randn(16, 6))
alg.predict_step(torch.randn(1, 6))
