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
