"""ESPnet's PITSolver after PR 5974: with independent_perm=False the per-speaker losses under the inherited permutation are combined with torch.stack, so the loss keeps its graph and every loss wrapper trains the separator.

source: https://github.com/espnet/espnet/pull/5974
kind: lookalike
"""
from collections import defaultdict
from itertools import permutations

import torch
import torch.nn as nn


class SNRLoss(nn.Module):
    name = "snr_loss"

    def forward(self, ref, inf):
        noise = inf - ref
        return -10 * torch.log10(ref.pow(2).sum(-1) / (noise.pow(2).sum(-1) + 1e-8) + 1e-8)


class L1Loss(nn.Module):
    name = "l1_loss"

    def forward(self, ref, inf):
        return (ref - inf).abs().mean(-1)


class PITSolver(nn.Module):
    def __init__(self, criterion, weight=1.0, independent_perm=True):
        super().__init__()
        self.criterion, self.weight, self.independent_perm = criterion, weight, independent_perm

    def forward(self, ref, inf, others={}):
        perm = others["perm"] if "perm" in others else None
        num_spk = len(ref)
        stats = defaultdict(list)

        def pre_hook(func, *args, **kwargs):
            return func(*args, **kwargs)

        def pair_loss(permutation):
            return sum([pre_hook(self.criterion, ref[s], inf[t]) for s, t in enumerate(permutation)]) / len(permutation)

        if self.independent_perm or perm is None:
            all_permutations = list(permutations(range(num_spk)))
            losses = torch.stack([pair_loss(p) for p in all_permutations], dim=1)
            loss, perm_ = torch.min(losses, dim=1)
            perm = torch.index_select(torch.tensor(all_permutations, dtype=torch.long), 0, perm_)
        else:
            loss = torch.stack(
                [
                    torch.stack(
                        [
                            pre_hook(self.criterion, ref[s][batch].unsqueeze(0), inf[t][batch].unsqueeze(0))
                            for s, t in enumerate(p)
                        ]
                    ).mean()
                    for batch, p in enumerate(perm)
                ]
            )
        loss = loss.mean()
        stats[self.criterion.name] = loss.detach()
        return loss.mean(), dict(stats), {"perm": perm}


torch.manual_seed(0)
separator = nn.Linear(64, 2 * 64)
loss_wrappers = [PITSolver(L1Loss(), weight=1.0), PITSolver(SNRLoss(), weight=1.0, independent_perm=False)]
mix = torch.randn(4, 64)
speech_ref = [torch.randn(4, 64), torch.randn(4, 64)]
speech_pre = list(separator(mix).view(4, 2, 64).unbind(1))

loss, o, losses = 0.0, {}, []
for loss_wrapper in loss_wrappers:
    cur_loss, cur_stats, o = loss_wrapper(speech_ref, speech_pre, o)
    losses.append(cur_loss)
    loss = loss + cur_loss * loss_wrapper.weight
first_only = torch.autograd.grad(losses[0], separator.weight, retain_graph=True)[0]
total = torch.autograd.grad(loss, separator.weight)[0]
print("second loss requires_grad", losses[1].requires_grad,
      "extra gradient from the second loss", round((total - first_only).norm().item(), 4))
