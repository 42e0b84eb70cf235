"""SPiRL's SkillPriorMdl builds, when the decoder is not state-conditioned, a FixedTrainableInitializer for the LSTM decoder's first input and hidden state whose value is self.val = torch.zeros((1, size), requires_grad=True): a plain tensor attribute is not registered by nn.Module, so it is missing from model.parameters() and the optimizer; it gets a .grad every step but keeps its zero initial value.

source: https://github.com/clvrai/spirl/pull/3
kind: bug
symptom: silent
verified: the model has 6 parameter tensors (no initializer value); after 20 Adam steps both initializers' val moved 0.0 while their accumulated .grad norms are 0.0434 and 0.0944; with self.val = nn.Parameter(...) (the fix) there are 8 tensors and the values move 0.3917 and 0.7611
"""
import torch
import torch.nn as nn


class SkillPriorMdl(nn.Module):
    def __init__(self, action_dim=4, nz_vae=6, hidden=16, n_rollout_steps=10, cond_decode=False, device="cpu"):
        super().__init__()
        self.action_dim, self.nz_vae, self.hidden = action_dim, nz_vae, hidden
        self.n_rollout_steps, self.cond_decode, self.device = n_rollout_steps, cond_decode, device
        self.decoder = nn.LSTMCell(action_dim + nz_vae, hidden)
        self.decoder_head = nn.Linear(hidden, action_dim)
        self.decoder_input_initalizer = self._build_decoder_initializer(size=action_dim)
        self.decoder_hidden_initalizer = self._build_decoder_initializer(size=2 * hidden)

    def _build_decoder_initializer(self, size):
        device = self.device

        class FixedTrainableInitializer(nn.Module):
            def __init__(self):
                super().__init__()
                self.val = torch.zeros((1, size), requires_grad=True, device=device)  # ROOT

            def forward(self, state):
                return self.val.repeat(state.shape[0], 1)
        return FixedTrainableInitializer()

    def decode(self, z, cond_inputs, steps):
        x_t = self.decoder_input_initalizer(cond_inputs)
        h, c = self.decoder_hidden_initalizer(cond_inputs).chunk(2, dim=-1)
        preds = []
        for _ in range(steps):
            h, c = self.decoder(torch.cat([x_t, z], dim=-1), (h, c))
            x_t = self.decoder_head(h)
            preds.append(x_t)
        return torch.stack(preds, dim=1)


torch.manual_seed(0)
model = SkillPriorMdl()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
inits = [model.decoder_input_initalizer.val, model.decoder_hidden_initalizer.val]
start = [v.detach().clone() for v in inits]
states = torch.randn(8, 5)
actions = torch.randn(8, model.n_rollout_steps, model.action_dim)
for step in range(20):
    z = torch.randn(8, model.nz_vae)
    loss = (model.decode(z, states, model.n_rollout_steps) - actions).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("parameter tensors", len(list(model.parameters())),
      "initializer moved", [round((v - s).norm().item(), 4) for v, s in zip(inits, start)],
      "initializer .grad", [round(v.grad.norm().item(), 4) for v in inits])
