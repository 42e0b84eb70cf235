"""CURL update_cpc: the contrastive loss backpropagates into the critic's encoder, then both encoder_optimizer.step() and cpc_optimizer.step() are called, and cpc_optimizer was built from CURL.parameters(), which include that same encoder; the encoder takes two Adam steps on the same gradient per update.

source: https://github.com/MishaLaskin/curl/issues/28
kind: bug
symptom: silent
verified: after one update_cpc both optimizers hold Adam state (step 1) for the encoder weight and its largest change is 2e-3, two Adam steps of lr 1e-3
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PixelEncoder(nn.Module):
    def __init__(self, feature_dim=16):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Flatten())
        self.fc = nn.Linear(8 * 7 * 7, feature_dim)

    def forward(self, obs):
        return self.fc(self.convs(obs))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = PixelEncoder()
        self.Q1 = nn.Linear(16, 1)


class CURL(nn.Module):
    def __init__(self, critic, critic_target, z_dim=16):
        super().__init__()
        self.encoder = critic.encoder
        self.encoder_target = critic_target.encoder
        self.W = nn.Parameter(torch.rand(z_dim, z_dim))

    def encode(self, x, detach=False, ema=False):
        if ema:
            with torch.no_grad():
                return self.encoder_target(x)
        z = self.encoder(x)
        return z.detach() if detach else z

    def compute_logits(self, z_a, z_pos):
        logits = z_a @ (self.W @ z_pos.T)
        return logits - torch.max(logits, 1)[0][:, None]


class CurlSacAgent:
    def __init__(self, encoder_lr=1e-3):
        self.critic, self.critic_target = Critic(), Critic()
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.CURL = CURL(self.critic, self.critic_target)
        self.encoder_optimizer = torch.optim.Adam(self.critic.encoder.parameters(), lr=encoder_lr)
        self.cpc_optimizer = torch.optim.Adam(self.CURL.parameters(), lr=encoder_lr)  # ROOT

    def update_cpc(self, obs_anchor, obs_pos):
        z_a = self.CURL.encode(obs_anchor)
        z_pos = self.CURL.encode(obs_pos, ema=True)
        logits = self.CURL.compute_logits(z_a, z_pos)
        labels = torch.arange(logits.shape[0]).long()
        loss = F.cross_entropy(logits, labels)
        self.encoder_optimizer.zero_grad()
        self.cpc_optimizer.zero_grad()
        loss.backward()
        self.encoder_optimizer.step()
        self.cpc_optimizer.step()


torch.manual_seed(0)
agent = CurlSacAgent()
w = agent.critic.encoder.fc.weight
before = w.detach().clone()
agent.update_cpc(torch.rand(4, 3, 16, 16), torch.rand(4, 3, 16, 16))
print(agent.encoder_optimizer.state[w]['step'], agent.cpc_optimizer.state[w]['step'], (w - before).abs().max().item())
