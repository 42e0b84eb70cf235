"""MAVEN's learner after the fix: z_policy's parameters are part of self.eval_parameters, so the RMSprop optimizer steps the hierarchical latent-space policy along with the agent network, the mixer and the MI network.

source: https://github.com/starry-sky6688/MARL-Algorithms/issues/32
kind: lookalike
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as f


class HierarchicalPolicy(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.fc_1 = nn.Linear(args.state_shape, 32)
        self.fc_2 = nn.Linear(32, args.noise_dim)

    def forward(self, state):
        return f.softmax(self.fc_2(f.relu(self.fc_1(state))), dim=-1)


class MAVEN:
    def __init__(self, args):
        self.args = args
        self.z_policy = HierarchicalPolicy(args)
        self.eval_rnn = nn.Linear(args.obs_shape + args.noise_dim, args.n_actions)
        self.eval_qmix_net = nn.Linear(args.n_agents + args.state_shape, 1)
        self.mi_net = nn.Linear(args.n_agents * args.n_actions + args.state_shape, args.noise_dim)
        self.eval_parameters = list(self.eval_qmix_net.parameters()) + list(self.eval_rnn.parameters()) + list(self.mi_net.parameters()) + list(self.z_policy.parameters())
        self.optimizer = torch.optim.RMSprop(self.eval_parameters, lr=args.lr)

    def learn(self, batch):
        s, o, u, r, z = batch["s"], batch["o"], batch["u"], batch["r"], batch["z"]
        z_prob = self.z_policy(s)
        log_z_prob = torch.log(z_prob)
        entropy = -(z_prob * log_z_prob).sum(dim=-1).detach()
        class_z = z.long().argmax(dim=-1, keepdim=True)
        z_prob_taken = torch.gather(z_prob, index=class_z, dim=-1).squeeze(-1)
        rl_loss = -(z_prob_taken * (r + self.args.entropy_coefficient * entropy)).mean()
        q_evals = self.eval_rnn(torch.cat([o, z.unsqueeze(1).expand(-1, self.args.n_agents, -1)], dim=-1))
        mi_prob = self.mi_net(torch.cat([q_evals.flatten(1), s], dim=-1))
        mi_loss = f.cross_entropy(mi_prob, class_z.squeeze(-1))
        q_taken = torch.gather(q_evals, dim=2, index=u).squeeze(2)
        q_total_eval = self.eval_qmix_net(torch.cat([q_taken, s], dim=-1)).squeeze(-1)
        ql_loss = ((q_total_eval - r) ** 2).mean()
        loss = rl_loss + self.args.lambda_mi * mi_loss + self.args.lambda_ql * ql_loss
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.eval_parameters, self.args.grad_norm_clip)
        self.optimizer.step()


torch.manual_seed(0)
args = SimpleNamespace(state_shape=12, obs_shape=10, n_actions=5, n_agents=3, noise_dim=4, lr=5e-4,
                       entropy_coefficient=0.001, lambda_mi=0.001, lambda_ql=1.0, grad_norm_clip=10)
learner = MAVEN(args)
z_start = [p.detach().clone() for p in learner.z_policy.parameters()]
rnn_start = [p.detach().clone() for p in learner.eval_rnn.parameters()]
for _ in range(50):
    batch = {"s": torch.randn(8, 12), "o": torch.randn(8, 3, 10), "u": torch.randint(0, 5, (8, 3, 1)),
             "r": torch.randn(8), "z": f.one_hot(torch.randint(0, 4, (8,)), 4).float()}
    learner.learn(batch)
moved = lambda ps, qs: sum((p - q).norm() for p, q in zip(ps, qs)).item()
grad_norm = sum(p.grad.norm() for p in learner.z_policy.parameters()).item()
print("z_policy moved", moved(learner.z_policy.parameters(), z_start), "grad", grad_norm,
      "eval_rnn moved", moved(learner.eval_rnn.parameters(), rnn_start))
