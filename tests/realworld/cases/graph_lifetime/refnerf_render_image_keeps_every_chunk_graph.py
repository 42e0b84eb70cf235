"""refnerf-pytorch renders a full test image chunk by chunk in `render_image` and appends every chunk's rendering to a list before concatenating them. Rendering runs with gradients enabled, because the MLP marks the sample positions `means.requires_grad_()` and backpropagates the density into them to get normals, so every chunk's outputs carry their autograd graph, and `render_image` keeps all of them (and the concatenated image keeps them after it returns): the memory of every chunk's forward pass is held at once, growing with image size, until the rendering is dropped; nothing fails on a small image. The fix detaches each chunk's rendering before appending it (and computes the normals only in training).

source: https://github.com/gkouros/refnerf-pytorch/commit/864ae2ba9d37168558162bbfd55d26960b0d35d9
kind: bug
symptom: silent
verified: after rendering a 32x32 test image in 8 chunks, 62.4 MB of activations saved for backward are still held by the rendering's graph (rgb requires grad: True); in the look-alike 0 MB are held (rgb requires grad: False)
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

N_SAMPLES = 32


class MLP(nn.Module):
    def __init__(self, disable_density_normals=False):
        super().__init__()
        self.disable_density_normals = disable_density_normals
        self.spatial_net = nn.Sequential(nn.Linear(3 * 2 * 4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.raw_density = nn.Linear(128, 1)
        self.rgb = nn.Sequential(nn.Linear(128 + 3 + 3, 64), nn.ReLU(), nn.Linear(64, 3))

    def forward(self, means, viewdirs):
        means.requires_grad_()
        freqs = 2.0 ** torch.arange(4.0)
        enc = (means[..., None] * freqs).flatten(-2)
        x = self.spatial_net(torch.cat([torch.sin(enc), torch.cos(enc)], dim=-1))
        raw_density = self.raw_density(x)[..., 0]
        normals = None
        if not self.disable_density_normals:
            raw_density.backward(gradient=torch.ones_like(raw_density), inputs=means, retain_graph=True)
            normals = -F.normalize(means.grad, dim=-1)
        dirs = viewdirs[:, None].expand_as(means)
        rgb = torch.sigmoid(self.rgb(torch.cat([x, dirs, normals if normals is not None else torch.zeros_like(means)], -1)))
        return F.softplus(raw_density), rgb


def render_fn(model, origins, directions):
    t = torch.linspace(0.5, 4.0, N_SAMPLES)
    means = origins[:, None] + directions[:, None] * t[None, :, None]
    density, rgb = model(means.detach(), directions)
    alpha = 1 - torch.exp(-density * (t[1] - t[0]))
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1] + 1e-10], -1), -1)
    weights = alpha * trans
    return {"rgb": (weights[..., None] * rgb).sum(1), "acc": weights.sum(1)}


def render_image(render, origins, directions, chunk_size):
    chunks = []
    for idx0 in range(0, origins.shape[0], chunk_size):
        chunk_rendering = render(origins[idx0:idx0 + chunk_size], directions[idx0:idx0 + chunk_size])
        chunks.append(chunk_rendering)  # ROOT
    return {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}


def make_rays(n):
    origins = torch.zeros(n, 3)
    directions = F.normalize(torch.randn(n, 3) * 0.2 + torch.tensor([0.0, 0.0, 1.0]), dim=-1)
    return origins, directions


model = MLP()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
target = torch.rand(256, 3)
for step in range(1, 4):
    origins, directions = make_rays(256)
    loss = F.mse_loss(render_fn(model, origins, directions)["rgb"], target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

# test-set render of a 32x32 image, as the training loop does every few steps
model.eval()
origins, directions = make_rays(32 * 32)
rendering = render_image(lambda o, d: render_fn(model, o, d), origins, directions, chunk_size=128)
model.train()


def held_activation_bytes(tensors, params):
    """Read-only probe: bytes of the tensors saved for backward in the graphs reachable from `tensors`."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    seen, storages = set(), {}
    stack = [t.grad_fn for t in tensors if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if name.startswith("_saved_"):
                value = getattr(node, name)
                if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() not in param_ptrs:
                    storages[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
        stack.extend(fn for fn, _ in node.next_functions)
    return sum(storages.values())


held = held_activation_bytes(list(rendering.values()), model.parameters())
print(f"activations saved for backward still held by the rendering: {held / 2**20:.3g} MB "
      f"(rgb requires grad: {rendering['rgb'].requires_grad})")
