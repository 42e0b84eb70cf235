"""A DFS-code graph transformer is pretrained on ChEMBL molecules (masked DFS-code tokens predicted from the rest of the code) by a loop that calls `loss.backward()` and `optim.step()` for every batch but never `optim.zero_grad()`: each step's gradient is the running sum of every batch's gradient since the start of training, so Adam follows a stale, ever-growing accumulated direction instead of the batch's gradient, silently.

source: https://github.com/wendlerc/dfs-graph-transformer/commit/763f2d870c3cc93a8bc6484e462b267501fdf9bb
kind: bug
symptom: silent
verified: at batch 20 the gradient Adam receives has norm 9.85 against 0.98 for the batch's own gradient (cosine 0.28); in the look-alike they are equal (0.97 and 0.97, cosine 1.00)
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, MASK, SEQ = 40, 0, 12


class DFSCodeTransformer(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(SEQ, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, codes):
        return self.head(self.encoder(self.embed(codes) + self.pos))


def masked_batch(n=16):
    start = torch.randint(1, VOCAB - SEQ, (n, 1))
    codes = (start + torch.arange(SEQ)) % (VOCAB - 1) + 1
    mask = torch.rand(n, SEQ) < 0.2
    return codes.masked_fill(mask, MASK), codes, mask


model = DFSCodeTransformer()
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
params = list(model.parameters())
for epoch in range(1):
    epoch_loss = 0.0
    for i in range(1, 21):
        inputs, codes, mask = masked_batch()
        logits = model(inputs)
        loss = F.cross_entropy(logits[mask], codes[mask])
        own = torch.autograd.grad(loss, params, retain_graph=True)
        loss.backward()  # ROOT
        if i == 20:
            own_flat = torch.cat([g.flatten() for g in own])
            used_flat = torch.cat([p.grad.flatten() for p in params])
            cosine = F.cosine_similarity(own_flat, used_flat, dim=0).item()
            print(f"batch {i}: gradient given to Adam has norm {used_flat.norm().item():.2f}, "
                  f"the batch's own gradient {own_flat.norm().item():.2f} (cosine {cosine:.2f})")
        optim.step()
        epoch_loss += loss.item()
    print(f"epoch {epoch}: mean loss {epoch_loss / 20:.3f}")
