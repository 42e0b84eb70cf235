"""GT2xx and GT6xx stay silent on real-world shapes that look like their bugs.

Each snippet is written fresh after a shape met in real code (transformers, diffusers, timm,
fairseq, lightning, torchvision) or named in issue 3's look-alikes. A second test keeps the bug
next to its look-alike so that a rule that went silent everywhere fails too.
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

FAMILIES = ("GT2", "GT6")

SILENT = {
    "autograd_function_forward_masks_softmax_in_place": """
        import torch

        class MaskedSoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, mask, dim):
                out = torch.softmax(x.masked_fill(~mask, float("-inf")), dim)
                out.masked_fill_(~mask, 0)
                ctx.save_for_backward(out)
                return out
        """,
    "inference_agent_disables_grad_for_good": """
        import torch

        class StreamingAgent:
            def __init__(self, model):
                self.model = model.eval()
                torch.set_grad_enabled(False)

            def policy(self, states):
                return self.model(states).argmax(-1)
        """,
    "set_grad_enabled_restored_in_finally": """
        import torch

        def evaluate(model, loader):
            was = torch.is_grad_enabled()
            torch.set_grad_enabled(False)
            try:
                return [model(x).argmax(-1) for x in loader]
            finally:
                torch.set_grad_enabled(was)

        def fit(model, loader, opt):
            for x in loader:
                model(x).sum().backward()
                opt.step()
            evaluate(model, loader)
        """,
    "detector_postprocess_in_eval_branch": """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, feats):
                logits = self.cls(feats)
                if not self.training:
                    scores = logits.sigmoid()
                    scores[scores < self.thresh] = 0
                    return scores
                return logits
        """,
    "generate_caches_under_inference_mode": """
        import torch
        from torch import nn

        class LM(nn.Module):
            def forward(self, ids):
                return self.lm_head(self.body(self.embed(ids)))

            @torch.inference_mode()
            def generate(self, ids, steps):
                for _ in range(steps):
                    self.past = self.body(self.embed(ids))
                    ids = torch.cat([ids, self.lm_head(self.past)[:, -1:].argmax(-1)], 1)
                return ids
        """,
    "positional_table_added_not_saved": """
        import torch
        from torch import nn

        class PosEnc(nn.Module):
            @torch.inference_mode()
            def build(self, n, d):
                self.table = torch.randn(n, d) * 0.02

            def forward(self, x):
                return x + self.table[: x.shape[1]]
        """,
    "timm_style_checkpoint_of_hidden_states": """
        from torch.utils.checkpoint import checkpoint

        def forward_features(self, x):
            x = self.patch_embed(x)
            for blk in self.blocks:
                x = checkpoint(blk, x, use_reentrant=True)
            return self.norm(x)
        """,
    "dqn_target_under_no_grad": """
        import torch
        import torch.nn.functional as F

        def dqn_update(q_net, target_net, batch, opt, gamma=0.99):
            s, a, r, s2, done = batch
            with torch.no_grad():
                target = r + gamma * (1 - done) * target_net(s2).max(1).values
            q = q_net(s).gather(1, a[:, None]).squeeze(1)
            loss = F.smooth_l1_loss(q, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    "distillation_teacher_under_no_grad_reversed_args": """
        import torch
        import torch.nn.functional as F

        def distill_step(student, teacher, x, opt):
            with torch.no_grad():
                t = teacher(x)
            loss = F.mse_loss(t, student(x))
            loss.backward()
            opt.step()
        """,
    "lightning_validation_step": """
        import torch
        import torch.nn.functional as F

        class Lit:
            def training_step(self, batch, batch_idx):
                x, y = batch
                return F.cross_entropy(self(x), y)

            @torch.no_grad()
            def validation_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self(x), y)
                self.log("val_loss", loss)
        """,
    "value_guidance_grad_without_backward": """
        import torch

        def guide(value_fn, x, scale):
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                y = value_fn(x)
                grad = torch.autograd.grad([y.sum()], [x])[0]
            return x.detach() + scale * grad
        """,
    "first_order_maml": """
        import torch
        from torch.func import functional_call

        def maml_step(model, params, xs, ys, xq, yq, opt, inner_lr, loss_fn):
            loss = loss_fn(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(loss, list(params.values()))
            fast = {k: p - inner_lr * g for (k, p), g in zip(params.items(), grads)}
            outer = loss_fn(functional_call(model, fast, (xq,)), yq)
            outer.backward()
            opt.step()
        """,
    "gradient_norm_logged_not_trained": """
        import torch

        def train_step(D, real, fake, opt):
            real.requires_grad_(True)
            out = D(real)
            g = torch.autograd.grad(out.sum(), real, retain_graph=True)[0]
            grad_norm = g.norm(2, dim=1).mean()
            loss = out.mean() - D(fake).mean()
            loss.backward()
            opt.step()
            return grad_norm.item()
        """,
    "retain_graph_on_purpose_then_one_step": """
        def multitask_step(model, x, y1, y2, opt, crit1, crit2):
            out1, out2 = model(x)
            crit1(out1, y1).backward(retain_graph=True)
            crit2(out2, y2).backward()
            opt.step()
            opt.zero_grad()
        """,
    "gan_recomputes_discriminator_after_its_step": """
        def gan_step(G, D, z, real, opt_d, opt_g, bce, ones, zeros):
            fake = G(z)
            d_loss = bce(D(real), ones) + bce(D(fake), zeros)
            d_loss.backward(retain_graph=True)
            opt_d.step()
            opt_g.zero_grad()
            g_loss = bce(D(fake), ones)
            g_loss.backward()
            opt_g.step()
        """,
    "residual_add_before_relu": """
        from torch import nn

        class Bottleneck(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 1)
                self.bn = nn.BatchNorm2d(c)
                self.relu = nn.ReLU(inplace=True)

            def forward(self, x):
                out = self.relu(self.bn(self.conv(x)))
                out = self.bn(self.conv(out))
                out += x
                out = self.relu(out)
                return out
        """,
    "relu6_and_silu_do_not_save_output": """
        import torch.nn.functional as F
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                a = F.relu6(self.conv(x), inplace=True)
                a += x
                b = F.silu(self.conv2(x), inplace=True)
                b += a
                return b
        """,
    "softmax_written_after_clone": """
        import torch
        from torch import nn

        class Attn(nn.Module):
            def forward(self, q, k, mask):
                attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                attn = attn.clone()
                attn[mask] = 0
                return attn
        """,
    "frozen_backbone_features_under_no_grad": """
        import torch

        def train(backbone, head, loader, opt, criterion):
            backbone.requires_grad_(False)
            for images, labels in loader:
                with torch.no_grad():
                    feats = backbone(images)
                loss = criterion(head(feats), labels)
                loss.backward()
                opt.step()
        """,
    "backward_under_no_grad_on_loss_built_outside": """
        import torch

        def step(model, x, opt):
            loss = model(x).pow(2).mean()
            with torch.no_grad():
                loss.backward()
                for p in model.parameters():
                    p -= 0.1 * p.grad
        """,
    "training_function_turns_grad_back_on": """
        import torch

        def evaluate(model, loader):
            torch.set_grad_enabled(False)
            return [model(x).argmax(-1) for x in loader]

        def train(model, loader, opt):
            torch.set_grad_enabled(True)
            for x in loader:
                model(x).sum().backward()
                opt.step()

        def fit(model, loader, opt):
            for epoch in range(3):
                train(model, loader, opt)
                evaluate(model, loader)
        """,
    "forward_rebuilds_the_cache_it_uses": """
        import torch
        from torch import nn

        class Rope(nn.Module):
            @torch.inference_mode()
            def warm(self, n):
                self.cos = torch.cos(torch.arange(n)[:, None] * self.freq)

            def forward(self, q):
                self.cos = torch.cos(torch.arange(q.shape[0])[:, None] * self.freq)
                return q * self.cos
        """,
    "no_grad_forward_only_in_one_branch": """
        import torch

        def train(model, loader, opt, crit, warmup_steps):
            for step, (x, y) in enumerate(loader):
                if step >= warmup_steps:
                    output = model(x)
                else:
                    with torch.no_grad():
                        output = model(x)
                    output.requires_grad_(True)
                loss = crit(output, y)
                loss.backward()
                opt.step()

        def train_frozen_sometimes(model, loader, opt, crit, probe):
            for x, y in loader:
                output = model(x)
                if probe:
                    with torch.no_grad():
                        output = model(x)
                loss = crit(output, y)
                loss.backward()
        """,
    "inference_teacher_only_through_an_op_outside_inference_mode": """
        import torch
        import torch.nn.functional as F

        def distill(student, teacher, loader, opt):
            for x, y in loader:
                with torch.inference_mode():
                    t = teacher(x)
                target = F.softmax(t / 2.0, dim=-1)
                loss = F.kl_div(F.log_softmax(student(x), -1), target, reduction="batchmean")
                loss.backward()
                opt.step()
        """,
    "saliency_map_input_requires_grad": """
        import torch

        def saliency(model, x, target):
            with torch.no_grad():
                x = x.clone()
            x.requires_grad_(True)
            score = model(x)[0, target]
            score.backward()
            return x.grad.abs().amax(1)
        """,
    # corpus2 (accelerate test_ds_multiple_model.py): the trained model comes out of
    # `accelerator.prepare`; a frozen noise model adds its output under no_grad
    "prepared_model_plus_frozen_noise_model": """
        import torch

        def train(model, noise_model, optimizer, train_dataloader, accelerator):
            train_model, optimizer = accelerator.prepare(model, optimizer)
            for step, batch in enumerate(train_dataloader):
                outputs_1 = train_model(**batch)
                with torch.no_grad():
                    outputs_2 = noise_model(outputs_1.loss)
                loss = outputs_1.loss + outputs_2
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """,
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_real_world_shape_is_silent(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    src = textwrap.dedent(SILENT[name])
    found = [(f.line, f.code) for f in check_source(src, f"{name}.py", select=list(FAMILIES))]
    assert found == []


CAUGHT = {
    # (snippet, expected (line, code))
    "softmax_written_in_place": ("""
        import torch
        from torch import nn

        class Attn(nn.Module):
            def forward(self, q, k, mask):
                attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                attn[mask] = 0
                return attn
        """, (7, "GT602")),
    "moe_renormalises_routing_weights_in_place": ("""
        import torch.nn.functional as F
        from torch import nn

        class Router(nn.Module):
            def forward(self, scores):
                routing_weights = F.softmax(scores, dim=-1)
                if self.norm_topk_prob:
                    routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
                return routing_weights
        """, (8, "GT602")),
    "residual_add_after_relu": ("""
        from torch import nn

        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 1)
                self.relu = nn.ReLU(inplace=True)

            def forward(self, x):
                out = self.relu(self.conv(x))
                out += x
                return out
        """, (11, "GT603")),
    "teacher_output_as_prediction": ("""
        import torch
        import torch.nn.functional as F

        def distill_step(student, teacher, x, y, opt):
            with torch.no_grad():
                t = teacher(x)
                s = student(x)
            loss = F.cross_entropy(s, y) + F.mse_loss(s, t)
            loss.backward()
            opt.step()
        """, (5, "GT201")),
    "inference_teacher_saved_by_the_loss": ("""
        import torch
        import torch.nn.functional as F

        def distill(student, teacher, loader, opt):
            for x, y in loader:
                with torch.inference_mode():
                    t = teacher(x)
                loss = F.mse_loss(student(x), t)
                loss.backward()
                opt.step()
        """, (6, "GT204")),
    "prepared_model_run_under_no_grad": ("""
        import torch

        def train(model, noise_model, optimizer, train_dataloader, accelerator):
            train_model, optimizer = accelerator.prepare(model, optimizer)
            for step, batch in enumerate(train_dataloader):
                with torch.no_grad():
                    outputs_1 = train_model(**batch)
                    outputs_2 = noise_model(outputs_1.loss)
                loss = outputs_1.loss + outputs_2
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """, (6, "GT201")),
    "checkpoint_of_token_ids": ("""
        import torch.utils.checkpoint as cp

        def forward(self, input_ids):
            return cp.checkpoint(self.embed, input_ids)
        """, (4, "GT205")),
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_bug_next_to_look_alike_is_caught(name: str) -> None:
    src, expected = CAUGHT[name]
    found = [(f.line, f.code) for f in check_source(textwrap.dedent(src).strip("\n") + "\n",
                                                    f"{name}.py", select=list(FAMILIES))]
    assert found == [expected]
