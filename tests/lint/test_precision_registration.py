"""GT4xx stays silent on shapes of correct code met in real projects (written fresh), and
still fires on the near-identical buggy shape next to each, so a silent rule cannot pass."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def gt4(src: str) -> list[tuple[int, str]]:
    found = check_source(textwrap.dedent(src).lstrip("\n"), "shape.py", select=["GT4"])
    return sorted((f.line, f.code) for f in found)


SILENT = {
    # an empty placeholder list in one branch, a filled ModuleList in the other
    "empty-placeholder-in-one-branch": """
        import torch.nn as nn

        class Down(nn.Module):
            def __init__(self, n, use):
                super().__init__()
                if use:
                    self.blocks = nn.ModuleList()
                    for _ in range(n):
                        self.blocks.append(nn.Linear(4, 4))
                else:
                    self.blocks = []
        """,
    # the same layers also go into an nn.Sequential: registered there
    "local-list-also-wrapped-in-sequential": """
        import torch.nn as nn
        from .blocks import ResBlock

        class Trunk(nn.Module):
            def __init__(self, n):
                super().__init__()
                layers = [ResBlock(4) for _ in range(n)]
                self.seq = nn.Sequential(*layers)
                self.layers = layers
        """,
    # modules handed in by the caller: whoever built them registers them
    "modules-passed-in": """
        import torch.nn as nn

        class Ensemble(nn.Module):
            def __init__(self, members):
                super().__init__()
                self.members = members
        """,
    # a list built in __init__ and wrapped later in it: registered after all
    "list-wrapped-later-in-init": """
        import torch.nn as nn
        from .layers import CrossLayer

        class EDCN(nn.Module):
            def __init__(self, dims, n):
                super().__init__()
                self.cross_layers = [CrossLayer(dims) for _ in range(n)]
                self.cross_layers = nn.ModuleList(self.cross_layers)
        """,
    # set in __init__ and reset in another method: a cache, rebuilt elsewhere
    "attribute-reset-in-another-method": """
        import torch.nn as nn
        from .blocks import DecoderBlock

        class Decoder(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.pending = [DecoderBlock() for _ in range(n)]

            def build(self):
                self.pending = []
        """,
    # objects of other files not named like layers (transforms, samplers, configs)
    "list-of-non-layer-objects": """
        import torch.nn as nn
        from .aug import RandomCrop, Normalize

        class Augment(nn.Module):
            def __init__(self):
                super().__init__()
                self.ops = [RandomCrop(32), Normalize()]
        """,
    # corpus2 (speechbrain SpeedPerturb): a list of resamplers that own no parameter or buffer
    "list-of-parameter-free-modules": """
        import torch
        import torchaudio

        class Resample(torch.nn.Module):
            def __init__(self, orig_freq=16000, new_freq=16000):
                super().__init__()
                self.orig_freq = orig_freq
                self.resampler = torchaudio.transforms.Resample(orig_freq=orig_freq,
                                                                new_freq=new_freq)

            def forward(self, x):
                return self.resampler(x)

        class SpeedPerturb(torch.nn.Module):
            def __init__(self, orig_freq, speeds=(90, 100, 110)):
                super().__init__()
                self.resamplers = []
                for speed in speeds:
                    self.resamplers.append(Resample(orig_freq, orig_freq * 100 // speed))

            def forward(self, x):
                return self.resamplers[0](x)
        """,
    # corpus2 (espnet asr.py): one optimizer per branch of an if/elif over the optimizer name
    "generator-given-to-one-optimizer-per-branch": """
        import torch

        def setup(model, args):
            model_params = model.parameters()
            if args.opt == "adadelta":
                optimizer = torch.optim.Adadelta(model_params, rho=0.95)
            elif args.opt == "adam":
                optimizer = torch.optim.Adam(model_params)
            return optimizer
        """,
    # corpus2 (torch_geometric GraphMaskExplainer): a Lagrange multiplier made per training
    # run and handed to its own optimizer
    "multiplier-optimized-directly": """
        import torch

        class GraphMaskExplainer(torch.nn.Module):
            def _train(self, model, x):
                self.lambda_op = torch.tensor(self.init_lambda, requires_grad=True)
                optimizer_lambda = torch.optim.RMSprop([self.lambda_op], lr=0.01)
                loss = self._loss(model(x)) * self.lambda_op
                loss.backward()
                optimizer_lambda.step()
        """,
    # corpus3 (RecBole Pop): a popularity baseline returns a dummy loss for the trainer
    "dummy-loss-of-a-model-with-nothing-to-train": """
        import torch

        class Pop(torch.nn.Module):
            def calculate_loss(self, interaction):
                self.item_cnt[interaction["item_id"], :] += 1
                return torch.nn.Parameter(torch.zeros(1)).to(self.device)
        """,
}

BUGGY = {
    # a local list filled in a loop, then stored on self
    "local-list-of-layers-stored-on-self": ("""
        import torch.nn as nn

        class Fns(nn.Module):
            def __init__(self, dims):
                super().__init__()
                fns = []
                for d in dims:
                    fns.append(nn.Linear(d, d))
                self.fns = fns
        """, [(9, "GT401")]),
    # one branch of an if/elif in __init__ keeps the layers in a plain list
    "layers-in-a-list-in-one-branch": ("""
        import torch.nn as nn

        class BiLinear(nn.Module):
            def __init__(self, dim, n, kind):
                super().__init__()
                if kind == "all":
                    self.bilinear = nn.Linear(dim, dim, bias=False)
                elif kind == "each":
                    self.bilinear = [nn.Linear(dim, dim, bias=False) for _ in range(n)]
                else:
                    self.bilinear = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n)])
        """, [(9, "GT401")]),
    # layers of a class imported from another file, named like a layer
    "imported-layers-in-a-plain-list": ("""
        import torch.nn as nn
        from .layers import CrossLayer

        class EDCN(nn.Module):
            def __init__(self, dims, n):
                super().__init__()
                self.cross_layers = [CrossLayer(dims) for _ in range(n)]
        """, [(7, "GT401")]),
    # a trailing comma makes a tuple of one layer (espnet's linear encoder)
    "layer-in-a-one-element-tuple": ("""
        import torch

        class LinearEncoder(torch.nn.Module):
            def __init__(self, n, d, kind):
                super().__init__()
                if kind == "embed":
                    self.embed = (
                        torch.nn.Embedding(n, d),
                    )
                else:
                    self.embed = torch.nn.Linear(n, d)
        """, [(7, "GT401")]),
    "parameter-moved-after-wrapping-in-a-helper": ("""
        import torch

        class Pop(torch.nn.Module):
            def make_bias(self):
                return torch.nn.Parameter(torch.zeros(1)).to(self.device)
        """, [(5, "GT403")]),
    "multiplier-never-optimized": ("""
        import torch

        class GraphMaskExplainer(torch.nn.Module):
            def _train(self, model, x, optimizer):
                self.lambda_op = torch.tensor(self.init_lambda, requires_grad=True)
                loss = self._loss(model(x)) * self.lambda_op
                loss.backward()
                optimizer.step()
        """, [(5, "GT402")]),
    "list-of-modules-with-a-layer": ("""
        import torch

        class Block(torch.nn.Module):
            def __init__(self, dim=8):
                super().__init__()
                self.proj = torch.nn.Linear(dim, dim)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = []
                for _ in range(3):
                    self.blocks.append(Block())
        """, [(11, "GT401")]),
    "list-of-modules-wrapping-the-callers-module": ("""
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

        class Net(torch.nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.wrapped = [Wrapper(layer) for layer in layers]
        """, [(11, "GT401")]),
    "generator-given-to-two-optimizers-in-one-branch": ("""
        import torch

        def setup(model, args):
            model_params = model.parameters()
            if args.swa:
                optimizer = torch.optim.SGD(model_params, lr=0.1)
                swa_optimizer = torch.optim.SGD(model_params, lr=0.05)
            return optimizer
        """, [(6, "GT405")]),
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_real_world_shape_is_silent(name: str) -> None:
    assert gt4(SILENT[name]) == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_twin_is_reported(name: str) -> None:
    src, expected = BUGGY[name]
    assert gt4(src) == expected
