"""The mixture-of-experts model after the fix: `compute_domain_encs` runs the encoder over each batch under `torch.no_grad()` and keeps only a running sum of the batch means, so the stored domain encodings are plain tensors with no graph behind them (the gate's distances were detached anyway).

source: https://github.com/CAVED123/Bayesian-Graph-Neural-Networks-for-Molecular-Property-Prediction/commit/ce09638e4df7666a5cbdc5297eda15364cb46add
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

HIDDEN, RANK, SOURCES, FEATURES = 32, 4, 3, 24


def saved_graph(tensors):
    """Autograd nodes and bytes of saved tensors reachable from `tensors` (read only)."""
    seen, stack, nbytes, ptrs = set(), [t.grad_fn for t in tensors if t.grad_fn is not None], 0, set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                value = getattr(node, name)
                if isinstance(value, torch.Tensor) and value.data_ptr() not in ptrs:
                    ptrs.add(value.data_ptr())
                    nbytes += value.numel() * value.element_size()
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return len(seen), nbytes


class MOE(nn.Module):
    def __init__(self, batch_size=16):
        super().__init__()
        self.batch_size = batch_size
        self.encoder = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, HIDDEN), nn.ReLU())
        self.experts = nn.ModuleList(nn.Linear(HIDDEN, 1) for _ in range(SOURCES))
        self.Us = nn.ParameterList(nn.Parameter(0.1 * torch.randn(HIDDEN, RANK)) for _ in range(SOURCES))
        self.domain_encs = None

    def mahalanobis_metric(self, p, mu, j):
        diff = p - mu
        return (diff @ self.Us[j] @ self.Us[j].t() * diff).sum(1).sqrt().detach()

    def compute_domain_encs(self, all_train_x):
        domain_encs = []
        for train_x in all_train_x:
            batches = train_x.split(self.batch_size)
            means_sum = torch.zeros(HIDDEN)
            for batch in batches:
                with torch.no_grad():
                    batch_encs = self.encoder(batch)
                means_sum += batch_encs.mean(dim=0)
            domain_encs.append(means_sum / len(batches))
        self.domain_encs = domain_encs

    def forward(self, x):
        enc = self.encoder(x)
        alphas = torch.stack([-self.mahalanobis_metric(enc, self.domain_encs[j], j) for j in range(SOURCES)], 1)
        gate = F.softmax(alphas, dim=1)
        outputs = torch.cat([expert(enc) for expert in self.experts], 1)
        return (gate * outputs).sum(1)


sources = [torch.randn(96, FEATURES) + j for j in range(SOURCES)]
targets = [x[:, :3].sum(1) for x in sources]
model = MOE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    model.compute_domain_encs(sources)
    nodes, nbytes = saved_graph(model.domain_encs)
    for x, y in zip(sources, targets):
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}; domain encodings require grad: {model.domain_encs[0].requires_grad}, "
          f"graph kept alive: {nodes} nodes, {nbytes / 1024:.0f} KB saved tensors")
