"""TextBrewer's GeneralDistiller adds its intermediate-match projection layers (kept in a plain list, `self.projs`, outside the student) to the optimizer as extra param groups, but BasicDistiller.train clears gradients with `self.model_S.zero_grad()`: the projections' gradients are never cleared, every optimizer step applies the sum of all past gradients to them, and the hidden-state match drifts while the loss is logged as usual.

source: https://github.com/airaria/TextBrewer/commit/7a8d3c7e324b4b05dbce0b1fc5025bfda6d1cfc0
kind: bug
symptom: silent
verified: after 6 steps the projection layer .grad is 6.0x the gradient of the last batch alone (the student .grad was cleared to None): the projection gradients are never cleared
"""
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

IntermediateMatch = namedtuple("IntermediateMatch", "layer_T layer_S feature loss weight proj")
PROJ_MAP = {"linear": nn.Linear}
MATCH_LOSS_MAP = {"hidden_mse": lambda s, t, mask=None: F.mse_loss(s, t)}


class DistillationConfig:
    def __init__(self, temperature=4, intermediate_matches=()):
        self.temperature = temperature
        self.intermediate_matches = list(intermediate_matches)


class TrainingConfig:
    def __init__(self, gradient_accumulation_steps=1, device="cpu"):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.device = device


class BasicDistiller:
    def __init__(self, train_config, distill_config, model_T, model_S, adaptor_T, adaptor_S):
        self.t_config = train_config
        self.d_config = distill_config
        self.model_T, self.model_S = model_T, model_S
        self.adaptor_T, self.adaptor_S = adaptor_T, adaptor_S

    def train(self, optimizer, scheduler, dataloader, num_epochs, **args):
        for current_epoch in range(int(num_epochs)):
            for step, batch in enumerate(dataloader):
                total_loss = self.train_on_batch(batch, args)
                total_loss /= self.t_config.gradient_accumulation_steps
                total_loss.backward()
                if (step + 1) % self.t_config.gradient_accumulation_steps == 0:
                    optimizer.step()
                    if scheduler is not None:
                        scheduler.step()
                    self.model_S.zero_grad()  # ROOT


class GeneralDistiller(BasicDistiller):
    def __init__(self, train_config, distill_config, model_T, model_S, adaptor_T, adaptor_S):
        super().__init__(train_config, distill_config, model_T, model_S, adaptor_T, adaptor_S)
        self.projs = []
        self.projs_group = []
        for im in self.d_config.intermediate_matches:
            if im.proj is not None:
                projection, dim_in, dim_out = im.proj[0], im.proj[1], im.proj[2]
                self.projs_group.append(im.proj[3])
                self.projs.append(PROJ_MAP[projection](dim_in, dim_out))
                self.projs[-1].to(self.t_config.device)
            else:
                self.projs.append(None)
                self.projs_group.append(None)

    def train(self, optimizer, scheduler, dataloader, num_epochs, **args):
        # update optimizer for projection layer
        for proj, proj_group in zip(self.projs, self.projs_group):
            if proj is not None:
                assert isinstance(proj, nn.Module)
                optimizer.add_param_group({**{"params": proj.parameters()}, **proj_group})
        super().train(optimizer, scheduler, dataloader, num_epochs, **args)

    def train_on_batch(self, batch, args):
        with torch.no_grad():
            results_T = self.adaptor_T(batch, self.model_T(batch[0]))
        results_S = self.adaptor_S(batch, self.model_S(batch[0]))
        total_loss = 0
        for l_T, l_S in zip(results_T["logits"], results_S["logits"]):
            T = self.d_config.temperature
            total_loss += F.kl_div(F.log_softmax(l_S / T, -1), F.softmax(l_T / T, -1), reduction="batchmean")
        for ith, inter_match in enumerate(self.d_config.intermediate_matches):
            inter_S = results_S[inter_match.feature][inter_match.layer_S]
            inter_T = results_T[inter_match.feature][inter_match.layer_T]
            if self.projs[ith]:
                inter_S = self.projs[ith](inter_S)
            total_loss += MATCH_LOSS_MAP[inter_match.loss](inter_S, inter_T) * inter_match.weight
        for loss in results_S["losses"]:
            total_loss += loss.mean()
        return total_loss


class Encoder(nn.Module):
    def __init__(self, dim, n_layers, n_classes=3):
        super().__init__()
        self.embed = nn.Linear(10, dim)
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.cls = nn.Linear(dim, n_classes)

    def forward(self, x):
        hidden = [torch.tanh(self.embed(x))]
        for layer in self.layers:
            hidden.append(torch.tanh(layer(hidden[-1])))
        return self.cls(hidden[-1]), hidden


def simple_adaptor(batch, model_outputs):
    logits, hidden = model_outputs
    return {"logits": [logits], "hidden": hidden, "losses": [F.cross_entropy(logits, batch[1])]}


teacher, student = Encoder(32, 4), Encoder(16, 2)
distill_config = DistillationConfig(intermediate_matches=[
    IntermediateMatch(layer_T=4, layer_S=2, feature="hidden", loss="hidden_mse", weight=1,
                      proj=["linear", 16, 32, {"lr": 0.05}]),
])
distiller = GeneralDistiller(TrainingConfig(), distill_config, teacher, student, simple_adaptor, simple_adaptor)
optimizer = torch.optim.SGD(student.parameters(), lr=0.05)
dataloader = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(6)]
distiller.train(optimizer, None, dataloader, num_epochs=1)

# measurement: gradients of the last batch alone, against what .grad holds
proj = distiller.projs[0]
last = distiller.train_on_batch(dataloader[-1], {})
g_proj, g_student = torch.autograd.grad(last, [proj.weight, student.cls.weight])
def ratio(held, fresh):
    return None if held is None else round((held.norm() / fresh.norm()).item(), 2)


ratio_proj = ratio(proj.weight.grad, g_proj)
ratio_student = ratio(student.cls.weight.grad, g_student)
print(f"projection .grad / last-batch grad = {ratio_proj}; student .grad / last-batch grad = {ratio_student}")
