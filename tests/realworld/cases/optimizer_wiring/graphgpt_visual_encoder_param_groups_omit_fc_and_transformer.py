"""An image-to-graph generator (visual encoder + sequence decoder predicting node pairs) builds its optimizer from nested `get_params_group` methods; `VisualEncoder.get_params_group` returns groups for the backbone and the positional embedding only, so the encoder's output projection `fc` and its transformer layer, both used in every forward pass, get gradients but are never updated by the optimizer made in `build_optimizer`, and training runs with them stuck at their initial values, with no error.

source: https://github.com/jayroxis/ordering-in-graph-generation/commit/cbec6e12be51ea0dc84ed333967335b945a2569b
kind: bug
symptom: silent
verified: after 150 steps the encoder's `fc` and transformer weights moved by 0.0 although their gradients are non-zero (True), final training loss 0.0648; in the look-alike, whose groups include both modules, they move by 0.48 and 0.47 (final loss 0.0637)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

IMG, CHANS, DIM, N_PAIRS = 16, 3, 16, 4


def collect_params_group(module, lr, weight_decay=0.0):
    """One optimizer group per module, or the module's own groups when it defines them."""
    if not any(p.requires_grad for p in module.parameters()):
        return []
    if hasattr(module, "get_params_group"):
        return module.get_params_group(lr=lr, weight_decay=weight_decay)
    return [{"params": module.parameters(), "lr": lr, "weight_decay": weight_decay}]


class ConvBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(CHANS, 8, 3, stride=2, padding=1), nn.GELU(),
                                  nn.Conv2d(8, DIM, 3, stride=2, padding=1), nn.GELU())

    def forward_features(self, x):
        return self.stem(x)


class VisualEncoder(nn.Module):
    def __init__(self, output_dim=DIM, num_heads=2):
        super().__init__()
        self.encoder = ConvBackbone()
        num_tokens = (IMG // 4) ** 2
        self.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, DIM))
        self.fc = nn.Sequential(nn.Linear(DIM, output_dim), nn.GELU(), nn.Linear(output_dim, output_dim))
        self.transformer_encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(output_dim, num_heads, output_dim * 2, dropout=0.0,
                                       batch_first=True, norm_first=True),
            num_layers=1, enable_nested_tensor=False)

    def forward(self, x):
        features = self.encoder.forward_features(x)
        tokens = features.flatten(2).transpose(1, 2) + self.pos_embed
        return self.transformer_encoder(self.fc(tokens))

    def get_params_group(self, lr=1e-3, weight_decay=1e-4):
        params = collect_params_group(self.encoder, lr, weight_decay)  # ROOT
        params += [{"params": [self.pos_embed], "lr": lr, "weight_decay": 0.0}]
        return params


class PairDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(1, N_PAIRS, DIM) * 0.1)
        self.attn = nn.MultiheadAttention(DIM, 2, batch_first=True)
        self.head = nn.Linear(DIM, 4)

    def forward(self, tokens):
        out, _ = self.attn(self.queries.expand(tokens.size(0), -1, -1), tokens, tokens)
        return self.head(out)


class GraphGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = VisualEncoder()
        self.decoder = PairDecoder()

    def forward(self, images):
        return self.decoder(self.visual(images))

    def get_params_group(self, lr=1e-3, weight_decay=1e-4):
        return (collect_params_group(self.visual, lr, weight_decay)
                + collect_params_group(self.decoder, lr, weight_decay))


def build_optimizer(model, lr=3e-3):
    return torch.optim.AdamW(model.get_params_group(lr=lr), lr=lr)


def make_batch(n=32):
    """Images with four bright squares; the targets are the squares' coordinate pairs."""
    images = torch.zeros(n, CHANS, IMG, IMG)
    pairs = torch.randint(0, IMG - 2, (n, N_PAIRS, 2))
    for b in range(n):
        for k, (r, c) in enumerate(pairs[b].tolist()):
            images[b, k % CHANS, r:r + 2, c:c + 2] = 1.0
    coords = pairs.float() / IMG
    return images, torch.cat([coords, coords.flip(-1)], dim=-1)


def main():
    model = GraphGenerator()
    optimizer = build_optimizer(model)
    watched = {"fc": model.visual.fc[0].weight, "transformer": model.visual.transformer_encoder.layers[0].linear1.weight}
    before = {k: w.detach().clone() for k, w in watched.items()}
    torch.manual_seed(1)
    grads_seen = False
    for step in range(150):
        images, targets = make_batch()
        loss = nn.functional.mse_loss(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        grads_seen = grads_seen or all(w.grad is not None and w.grad.abs().sum() > 0 for w in watched.values())
        optimizer.step()
    moved = {k: round((w.detach() - before[k]).norm().item(), 2) for k, w in watched.items()}
    print(f"encoder weights moved by: {moved} (non-zero gradients: {grads_seen})")
    print(f"final training loss: {loss.item():.4f}")


if __name__ == "__main__":
    main()
