"""DCG DeepCoordinationGraphMAC.payoffs: output[1] = output[1].transpose(dim0=-2, dim1=-1) writes the transposed backward-message payoffs into the very memory they are read from, an overlapping in-place copy that current PyTorch refuses.

source: https://github.com/wendelinboehmer/dcg/pull/19
kind: bug
symptom: crash
verified: unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location
"""
import torch as th
import torch.nn as nn


class DeepCoordinationGraphMAC(nn.Module):
    def __init__(self, n_agents=3, n_actions=4, rnn_hidden_dim=16):
        super().__init__()
        self.n_agents, self.n_actions = n_agents, n_actions
        self.edges_from = th.tensor([0, 1, 0])
        self.edges_to = th.tensor([1, 2, 2])
        self.utility_fun = nn.Linear(rnn_hidden_dim, n_actions)
        self.payoff_fun = nn.Sequential(nn.Linear(2 * rnn_hidden_dim, 32), nn.ReLU(), nn.Linear(32, n_actions * n_actions))

    def utilities(self, hidden_states):
        return self.utility_fun(hidden_states)

    def payoffs(self, hidden_states):
        n = self.n_actions
        inputs = th.stack([th.cat([hidden_states[:, self.edges_from], hidden_states[:, self.edges_to]], dim=-1),
                           th.cat([hidden_states[:, self.edges_to], hidden_states[:, self.edges_from]], dim=-1)], dim=0)
        output = self.payoff_fun(inputs)
        output = output.view(*(list(output.shape[:-1]) + [n, n]))
        output[1] = output[1].transpose(dim0=-2, dim1=-1)  # ROOT
        return output.mean(dim=0)

    def q_values(self, f_i, f_ij, actions):
        n_batches = actions.shape[0]
        q_i = f_i.gather(dim=-1, index=actions).squeeze(dim=-1)
        f_ij = f_ij.view(n_batches, len(self.edges_from), self.n_actions * self.n_actions)
        edge_actions = actions.gather(dim=-2, index=self.edges_from.view(1, -1, 1).expand(n_batches, -1, 1)) \
            * self.n_actions + actions.gather(dim=-2, index=self.edges_to.view(1, -1, 1).expand(n_batches, -1, 1))
        q_ij = f_ij.gather(dim=-1, index=edge_actions).squeeze(dim=-1)
        return q_i.sum(dim=-1) / self.n_agents + q_ij.sum(dim=-1) / len(self.edges_from)


th.manual_seed(0)
mac = DeepCoordinationGraphMAC()
optimiser = th.optim.RMSprop(mac.parameters(), lr=5e-4)
hidden_states = th.randn(8, 3, 16)
actions = th.randint(0, 4, (8, 3, 1))
targets = th.randn(8)
f_i = mac.utilities(hidden_states)
f_ij = mac.payoffs(hidden_states)
chosen_action_qvals = mac.q_values(f_i, f_ij, actions)
loss = ((chosen_action_qvals - targets) ** 2).mean()
optimiser.zero_grad()
loss.backward()
optimiser.step()
