"""glide-finetune trains the GLIDE model in half precision (use_fp16) with torch.optim.AdamW at its default eps=1e-8: in float16 eps rounds to 0 and small squared gradients flush to 0, so Adam's denominator sqrt(v) + eps is 0 for those weights and the first step writes inf/NaN into the model (the issue: NaN values right after the first iteration whatever the data).

source: https://github.com/afiaka87/glide-finetune/pull/6
kind: bug
symptom: silent
verified: the first loss is finite (10.0465) and every gradient is finite, but after the first AdamW step 1619 weights of the half-precision model are inf or NaN and the loss is NaN from then on; with eps=1e-4 (the PR) no weight is inf or NaN and the loss goes 10.0465 -> 7.5772 in 10 steps
"""
import torch as th
import torch.nn as nn
import torch.nn.functional as F


class TinyGlide(nn.Module):
    def __init__(self, channels=16, text_ctx=8, xf_width=16):
        super().__init__()
        self.token_embedding = nn.Embedding(50, xf_width)
        self.time_embed = nn.Sequential(nn.Linear(1, channels), nn.SiLU(), nn.Linear(channels, channels))
        self.inp = nn.Linear(3 * 4 * 4, channels)
        self.mid = nn.Sequential(nn.SiLU(), nn.Linear(channels, channels), nn.SiLU())
        self.out = nn.Linear(channels, 3 * 4 * 4)

    def forward(self, x, timesteps, tokens):
        h = self.inp(x.flatten(1)) + self.time_embed(timesteps[:, None].to(x.dtype))
        h = h + self.token_embedding(tokens).mean(1)
        return self.out(self.mid(h)).view_as(x)


def train_step(glide_model, batch):
    tokens, reals = batch
    timesteps = th.randint(0, 100, (reals.shape[0],))
    noise = th.randn_like(reals)
    x_t = reals + 0.5 * noise
    epsilon = glide_model(x_t, timesteps, tokens)
    return F.mse_loss(epsilon.float(), noise.float())


th.manual_seed(0)
use_fp16 = True
learning_rate, adam_weight_decay = 1e-4, 0.0
glide_model = TinyGlide()
if use_fp16:
    glide_model.half()
optimizer = th.optim.AdamW([x for x in glide_model.parameters() if x.requires_grad], lr=learning_rate, weight_decay=adam_weight_decay)  # ROOT
batch = (th.randint(0, 50, (4, 8)), th.randn(4, 3, 4, 4, dtype=th.float16))
for step in range(10):
    optimizer.zero_grad()
    loss = train_step(glide_model, batch)
    loss.backward()
    if step == 0:
        print("first loss", loss.item(), "finite grads", all(bool(p.grad.isfinite().all()) for p in glide_model.parameters()))
    optimizer.step()
    if step == 0:
        print("non-finite weights after step 1", sum(int((~p.isfinite()).sum()) for p in glide_model.parameters()))
print("last loss", loss.item())
