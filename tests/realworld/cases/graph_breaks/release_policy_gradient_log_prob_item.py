"""Policy-gradient loss accumulated from log_probs[...].item(): the loss is a Python float.

source: https://github.com/isayev/ReLeaSE/issues/39
kind: bug
symptom: crash
verified: 'float' object has no attribute 'backward'
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StackRNN(nn.Module):
    def __init__(self, n_chars=10, hidden_size=16):
        super().__init__()
        self.hidden_size = hidden_size
        self.encoder = nn.Embedding(n_chars, hidden_size)
        self.rnn = nn.GRUCell(hidden_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, n_chars)
        self.optimizer = torch.optim.Adadelta(self.parameters(), lr=0.01)

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)

    def forward(self, inp, hidden):
        hidden = self.rnn(self.encoder(inp.view(1)), hidden)
        return self.decoder(hidden), hidden


class Reinforcement:
    def __init__(self, generator, get_reward):
        self.generator = generator
        self.get_reward = get_reward

    def policy_gradient(self, trajectories, gamma=0.97):
        rl_loss = 0
        self.generator.optimizer.zero_grad()
        for trajectory_input in trajectories:
            discounted_reward = self.get_reward(trajectory_input)
            hidden = self.generator.init_hidden()
            for p in range(len(trajectory_input) - 1):
                output, hidden = self.generator(trajectory_input[p], hidden)
                log_probs = F.log_softmax(output, dim=1)
                top_i = trajectory_input[p + 1]
                rl_loss -= (log_probs[0, top_i].item() * discounted_reward)  # ROOT
                discounted_reward = discounted_reward * gamma
        rl_loss = rl_loss / len(trajectories)
        rl_loss.backward()  # SYMPTOM
        self.generator.optimizer.step()
        return rl_loss.item()


torch.manual_seed(0)
rl = Reinforcement(StackRNN(), lambda t: float(t.sum() % 3))
print(rl.policy_gradient([torch.randint(0, 10, (6,)) for _ in range(3)]))
