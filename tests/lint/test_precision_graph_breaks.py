"""GT1xx and GT7xx stay silent on real-world shapes that look like their bugs.

Each snippet is written fresh after a shape met in real code (transformers, diffusers, timm,
fairseq, lightning, torchvision) or named in issue 3's look-alikes. A second test keeps each
bug next to its look-alike, so a rule that went silent everywhere fails too. A third runs the
GT7xx bugs on the installed torch and checks that the error our message quotes is real.
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

FAMILIES = ("GT1", "GT7")

SILENT = {
    # feature-level self-distillation: the gradient reaches the upstream features through the
    # argument itself (not named like input data), so detaching the head's output is no cut
    "head_output_detached_against_upstream_features": """
        import torch.nn.functional as F

        def consistency_loss(self, student_feats):
            teacher = self.ema_head(student_feats)
            return F.mse_loss(teacher.detach(), student_feats)
        """,
    # an adversarial input made trainable is a live path of its own
    "trainable_input_fed_to_the_model": """
        import torch.nn.functional as F

        def input_grad_step(self, x):
            x.requires_grad_(True)
            recon = self.model(x)
            loss = F.mse_loss(recon.detach(), x)
            loss.backward()
            return x.grad
        """,
    "trainer_step_runs_backward_and_returns_detached_loss": """
        class Trainer:
            def training_step(self, model, inputs):
                model.train()
                loss = self.compute_loss(model, inputs)
                self.accelerator.backward(loss)
                return loss.detach() / self.args.gradient_accumulation_steps
        """,
    "lightning_step_returns_loss_with_detached_logs": """
        import torch.nn.functional as F

        class Lit:
            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self.model(x)
                loss = F.cross_entropy(logits, y)
                self.log("train_acc", (logits.argmax(-1) == y).float().mean())
                return {"loss": loss, "preds": logits.detach()}
        """,
    "validation_loss_helper_returns_a_float": """
        import torch

        def compute_loss(model, loader, criterion):
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    total += criterion(model(x), y).item()
            return total / len(loader)
        """,
    "finite_check_on_item_before_backward": """
        import math
        import sys

        def train_one_epoch(model, criterion, loader, optimizer, loss_scaler):
            for samples, targets in loader:
                outputs = model(samples)
                loss = criterion(outputs, targets)
                loss_value = loss.item()
                if not math.isfinite(loss_value):
                    sys.exit(1)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
    "fairseq_style_criterion_logs_loss_data": """
        import torch.nn.functional as F

        class LabelSmoothedCrossEntropyCriterion:
            def forward(self, model, sample, reduce=True):
                net_output = model(**sample["net_input"])
                lprobs = F.log_softmax(net_output[0], dim=-1)
                loss = F.nll_loss(lprobs.view(-1, lprobs.size(-1)), sample["target"].view(-1))
                logging_output = {"loss": loss.data, "ntokens": sample["ntokens"]}
                return loss, sample["ntokens"], logging_output
        """,
    "straight_through_quantizer": """
        import torch
        import torch.nn as nn

        class Quantize(nn.Module):
            def forward(self, x):
                q = torch.round(x * 127) / 127
                return x + (q - x).detach()
        """,
    "value_replacement_keeps_the_surrogate_gradient": """
        def train_step(model, opt, x, reward_fn):
            logp = model(x)
            surrogate = (logp * reward_fn(x)).mean()
            true_value = reward_fn(x).mean()
            loss = surrogate - surrogate.detach() + true_value.detach()
            loss.backward()
            opt.step()
        """,
    "ddp_unused_parameter_trick": """
        def training_step(model, batch):
            out = model(batch["x"])
            loss = out.mean()
            loss = loss + 0.0 * sum(p.sum() for p in model.parameters())
            loss.backward()
        """,
    "actor_critic_with_detached_baseline": """
        import torch.nn.functional as F

        def a2c_update(policy, value_net, opt, states, actions, returns):
            log_probs = policy(states).log_prob(actions)
            values = value_net(states).squeeze(-1)
            advantage = returns - values.detach()
            loss = -(log_probs * advantage).mean() + 0.5 * F.mse_loss(values, returns)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    "diffusion_loss_in_float32": """
        import torch
        import torch.nn.functional as F

        def train_step(unet, scheduler, opt, latents, text_emb):
            noise = torch.randn_like(latents)
            t = torch.randint(0, 1000, (latents.shape[0],), device=latents.device)
            noisy = scheduler.add_noise(latents, noise, t)
            pred = unet(noisy, t, text_emb).sample
            loss = F.mse_loss(pred.float(), noise.float(), reduction="mean")
            loss.backward()
            opt.step()
            opt.zero_grad()
            return {"loss": loss.detach().item()}
        """,
    "simsiam_symmetric_stop_gradient": """
        import torch.nn.functional as F

        def simsiam_step(model, opt, x1, x2):
            z1, z2 = model.encoder(x1), model.encoder(x2)
            p1, p2 = model.predictor(z1), model.predictor(z2)
            loss = -0.5 * (F.cosine_similarity(p1, z2.detach()).mean()
                           + F.cosine_similarity(p2, z1.detach()).mean())
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    "loss_balanced_by_python_ratio": """
        def multitask_step(model, opt, batch):
            seg_loss, depth_loss = model(batch)
            ratio = seg_loss.item() / max(depth_loss.item(), 1e-8)
            loss = seg_loss + ratio * depth_loss
            loss.backward()
            opt.step()
        """,
    "class_weights_from_python_data": """
        import torch
        import torch.nn.functional as F

        def train_step(model, opt, x, y, class_counts):
            weights = torch.tensor([1.0 / c for c in class_counts])
            loss = F.cross_entropy(model(x), y, weight=weights / weights.sum())
            loss.backward()
            opt.step()
        """,
    "ema_of_weights_through_data": """
        import torch.nn as nn

        class EMA(nn.Module):
            def forward(self, model):
                for ema_p, p in zip(self.shadow.parameters(), model.parameters()):
                    ema_p.data.mul_(0.999).add_(p.data, alpha=0.001)
                return None
        """,
    "batchnorm_like_buffer_update_in_forward": """
        import torch.nn as nn

        class RunningNorm(nn.Module):
            def forward(self, x):
                if self.training:
                    self.running_mean.data.mul_(0.9).add_(x.mean(0).data, alpha=0.1)
                return (x - self.running_mean) / self.scale
        """,
    "r1_penalty_on_input_made_differentiable": """
        import torch

        def d_r1_loss(real_pred, real_img):
            grad_real, = torch.autograd.grad(outputs=real_pred.sum(), inputs=real_img,
                                             create_graph=True)
            return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()
        """,
    "grad_of_leaf_given_requires_grad_later": """
        import torch

        def input_grad(model, x):
            x = x.detach()
            x.requires_grad = True
            return torch.autograd.grad(model(x).sum(), x)[0]
        """,
    "custom_function_with_variadic_forward": """
        import torch

        class Gather(torch.autograd.Function):
            @staticmethod
            def forward(ctx, dim, *tensors):
                ctx.dim = dim
                return torch.cat(tensors, dim)

            @staticmethod
            def backward(ctx, grad):
                return (None,) + tuple(grad.chunk(2, ctx.dim))
        """,
    "custom_function_backward_built_by_helper": """
        import torch

        class Fused(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b, c):
                ctx.save_for_backward(a, b, c)
                return a * b + c

            @staticmethod
            def backward(ctx, g):
                return _fused_backward(g, *ctx.saved_tensors)
        """,
    "custom_function_backward_returns_variadic_grads": """
        import torch

        class Identity(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, a, b):
                return x.clone()

            @staticmethod
            def backward(ctx, *grads):
                return grads
        """,
    "trainable_leaves_made_by_hand": """
        import torch

        def fit(x, y, feats, steps=100):
            w = torch.randn(3, 1, requires_grad=True)
            b = torch.zeros(1)
            b.requires_grad_()
            scale = torch.tensor(1.0, requires_grad=True)
            for _ in range(steps):
                pred = x @ w + b
                loss = ((pred - y) ** 2).mean() + (scale * feats.detach()).sum()
                loss.backward()
        """,
    "learnable_criterion_on_frozen_features": """
        import torch.nn as nn

        class ProbeTrainer:
            def __init__(self, backbone, margin_loss_cls, opt):
                self.backbone = backbone
                self.criterion = margin_loss_cls(512, 1000)
                self.opt = opt

            def step(self, x, y):
                feats = self.backbone(x).detach()
                loss = self.criterion(feats, y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        """,
    "penalty_through_param_grads": """
        def double_backward_step(model, opt, x, y, criterion, lam=0.1):
            loss = criterion(model(x), y)
            loss.backward(create_graph=True)
            gp = sum((p.grad ** 2).sum() for p in model.parameters())
            scale = loss.detach().clamp(min=1e-8)
            (lam * gp / scale).backward()
            opt.step()
        """,
    "helper_closing_over_a_learnable_global": """
        import torch
        import torch.nn.functional as F

        W = torch.randn(512, 10, requires_grad=True)

        def project(z):
            return z @ W

        def probe_step(backbone, opt, x, y):
            feats = backbone(x).detach()
            loss = F.cross_entropy(project(feats), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    "gradient_accumulation": """
        def train(model, loader, opt, criterion, accum=4):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accum
                loss.backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
        """,
    # corpus2 (avalanche BatchRenorm): r and d are statistics of the input used as constants,
    # as the paper says; the input itself still reaches the output
    "batch_renorm_statistics_read_through_data": """
        import torch
        import torch.nn as nn

        class BatchRenorm2d(nn.Module):
            def forward(self, x):
                mean = torch.mean(x, dim=(0, 2, 3), keepdim=True)
                std = torch.sqrt(torch.var(x, dim=(0, 2, 3), keepdim=True) + self.eps)
                r = torch.clamp(std / self.running_std, 1.0 / self.r_max, self.r_max).data
                d = torch.clamp((mean - self.running_mean) / self.running_std, -3, 3).data
                x = (x - mean) * r / std + d
                return self.gamma * x + self.beta
        """,
    # corpus2 (torchrl Dreamer): imagination starts from the detached states of the batch
    "tensordict_states_read_through_data": """
        import torch.nn as nn

        class DreamerActorLoss(nn.Module):
            def forward(self, tensordict):
                tensordict = tensordict.select("state", "belief").data
                fake_data = self.model_based_env.rollout(policy=self.actor_model,
                                                         tensordict=tensordict)
                return -fake_data.get("lambda_target").mean()
        """,
    # corpus2 (torchmetrics NISQA): `.data` of a PackedSequence is the packed tensor itself
    "packed_sequence_data_field": """
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Framewise(nn.Module):
            def forward(self, x, n_wins):
                x_packed = pack_padded_sequence(x, n_wins, batch_first=True)
                x = self.model(x_packed.data.unsqueeze(1))
                x = x_packed._replace(data=x)
                x, _ = pad_packed_sequence(x, batch_first=True)
                return x
        """,
    # corpus2 (gpytorch tests, GradCache): detach + requires_grad_ makes a new input leaf
    "reference_gradient_on_a_fresh_leaf_copy": """
        import torch

        def test_backward(A, B):
            A_copy = A.clone().detach().requires_grad_(True)
            B_copy = B.detach().clone().requires_grad_(True)
            expected = torch.diagonal(B_copy.mT @ A_copy @ B_copy).sum()
            expected.backward()
            return A_copy.grad, B_copy.grad
        """,
    "cached_embeddings_made_leaves_for_a_first_loss": """
        import torch.nn as nn

        class CachedRankingLoss(nn.Module):
            def forward(self, features, labels):
                logits = []
                for minibatch_logits in self.predict_minibatch_iter(features, with_grad=False):
                    logits.append(minibatch_logits.detach().requires_grad_())
                return self.calculate_loss(logits)
        """,
    # corpus2 (deepspeed pipeline engine): a running total of detached losses, for logging
    "running_total_of_detached_losses": """
        import torch

        def add_to_total_loss(_total_loss, _loss):
            if _total_loss is None:
                _total_loss = torch.zeros_like(_loss)
            _total_loss += _loss.detach()
            return _total_loss
        """,
    # corpus2 (kornia): IRLS weights (an indicator) returned next to the differentiable cost
    "robust_loss_returns_weights_and_costs": """
        import torch

        def _robust_loss(r2, loss, scale2):
            if loss == "cauchy":
                return 1.0 / (1.0 + r2 / scale2), torch.log1p(r2 / scale2)
            return (r2 < scale2).to(r2.dtype), torch.fmin(r2, torch.as_tensor(scale2))
        """,
    # corpus2 (torchrl OpenVLA utils): token ids decoded by a tokenizer: no graph to lose
    "decoded_token_ids_rebuilt_as_tensor": """
        import torch

        def compute_actions_l1_loss(action_tokenizer, predicted_token_ids, gt_token_ids, mask):
            pred = torch.tensor(
                action_tokenizer.decode_token_ids_to_actions(predicted_token_ids[mask].cpu().numpy()))
            true = torch.tensor(
                action_tokenizer.decode_token_ids_to_actions(gt_token_ids[mask].cpu().numpy()))
            return torch.nn.functional.l1_loss(pred, true)
        """,
    # corpus4 (super-gradients SSD loss): `pred_labels` are the class logits, not targets; the
    # hard-negative mask multiplies the live cross-entropy
    "hard_negative_mask_on_predicted_labels": """
        import torch
        import torch.nn as nn

        class HardMiningCrossEntropyLoss(nn.Module):
            def __init__(self, neg_pos_ratio):
                super().__init__()
                self.neg_pos_ratio = neg_pos_ratio
                self.ce = nn.CrossEntropyLoss(reduction="none")

            def forward(self, pred_labels, target_labels):
                mask = target_labels > 0
                con = self.ce(pred_labels, target_labels)
                con_neg = con.clone()
                con_neg[mask] = 0
                _, con_idx = con_neg.sort(dim=1, descending=True)
                _, con_rank = con_idx.sort(dim=1)
                neg_num = torch.clamp(self.neg_pos_ratio * mask.sum(dim=1), max=mask.size(1))
                neg_mask = con_rank < neg_num.unsqueeze(-1)
                return (con * (mask.float() + neg_mask.float())).sum(dim=1)
        """,
    # corpus3 (axolotl LoRA test): `.data.clone().requires_grad_()` is the older spelling of
    # `.detach().clone().requires_grad_()`: a new input leaf for a reference gradient
    "new_leaf_from_data_clone": """
        import torch

        def test_scale_grad():
            A1 = torch.randn(4, requires_grad=True)
            x = torch.tensor([5.0, 5.0, 10.0, 20.0])
            (A1 * x).sum().backward()
            A2 = A1.data.clone().requires_grad_(True)
            out2 = (A2 * x).sum()
            out2.backward()
        """,
    # corpus3 (garage MAML): `compute_loss` is a method of the value function (a model), so it
    # runs a forward; its NumPy-made inputs are data
    "model_method_named_compute_loss": """
        import numpy as np
        import torch

        class MAML:
            def _train_value_function(self, paths):
                obs = np.concatenate([path["observations"] for path in paths], axis=0)
                obs = torch.Tensor(obs)
                vf_loss = self._value_function.compute_loss(obs)
                vf_loss.backward()
                return vf_loss
        """,
    # corpus3 (garage optimizer test): a stub loss returns a call counter of the enclosing test
    "stub_loss_returns_closure_counter": """
        import torch

        def test_line_search(optimizer, params):
            loss_calls = 0

            def f_loss():
                nonlocal loss_calls
                loss_calls += 1
                return -torch.tensor(loss_calls)

            optimizer.line_search(params, f_loss)
        """,
    # corpus3 (pytorch-adapt validators): a `loss_fn` property builds a loss *object*; the
    # comparison is a configuration flag
    "loss_fn_property_builds_loss_object": """
        class EntropyValidator(SimpleLossValidator):
            @property
            def loss_fn(self):
                return EntropyLoss(after_softmax=self.layer == "preds")
        """,
    # corpus3 (stanza char model, highway LSTM, POS tagger): `.data` of a PackedSequence (its
    # flat data field keeps the history); known from its `.batch_sizes` being read, or as the
    # output of an LSTM run on a `PackedSequence(...)`
    "packed_sequence_data_known_by_its_fields": """
        import torch
        from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

        class CharacterModel(torch.nn.Module):
            def forward(self, embs, lens):
                output = self.charlstm(embs, lens)
                char_reps = output[0]
                weights = torch.sigmoid(self.char_attn(char_reps.data))
                char_reps = PackedSequence(char_reps.data * weights, char_reps.batch_sizes)
                char_reps, _ = pad_packed_sequence(char_reps, batch_first=True)
                return char_reps.sum(1)
        """,
    "packed_sequence_data_from_an_lstm_on_packed_input": """
        import torch
        from torch.nn.utils.rnn import PackedSequence

        class Tagger(torch.nn.Module):
            def forward(self, inputs, sentlens):
                lstm_inputs = torch.cat([x.data for x in inputs], 1)
                lstm_inputs = PackedSequence(self.drop(lstm_inputs), inputs[0].batch_sizes)
                lstm_outputs, _ = self.taggerlstm(lstm_inputs, sentlens)
                lstm_outputs = lstm_outputs.data
                return self.upos_clf(self.drop(lstm_outputs))
        """,
}

CAUGHT = {
    # an autoencoder's reconstruction detached against the model's own input: no path left
    "autoencoder_reconstruction_detached": ("""
        class AutoEncoderTrainer:
            def training_forward(self, batch_data):
                x = batch_data.to(self.device)
                self.optimizer.zero_grad()
                x_recon = self.model(x)
                loss = self.criterion(x_recon.detach(), x)
                loss.backward()
                self.optimizer.step()
        """, {(6, "GT107")}),
    "accuracy_of_predicted_labels_as_loss": ("""
        def accuracy_loss(pred_labels, target_labels):
            return 1 - (pred_labels.argmax(1) == target_labels).float().mean()
        """, {(2, "GT108")}),
    "item_regulariser": ("""
        import torch.nn.functional as F

        def step(model, opt, x, y):
            out, emb = model(x)
            l2 = emb.norm(dim=1).mean().item()
            loss = F.cross_entropy(out, y) + 0.01 * l2
            loss.backward()
        """, {(5, "GT102")}),
    "accuracy_as_loss": ("""
        def step(model, opt, x, y):
            pred = model(x).argmax(1)
            loss = (pred != y).float().mean()
            loss.backward()
        """, {(2, "GT108")}),
    "stacked_through_tensor": ("""
        import torch

        def step(model, opt, xs):
            loss = torch.tensor([model(x).mean() for x in xs]).sum()
            loss.backward()
        """, {(4, "GT104")}),
    "band_aid_after_detach": ("""
        def step(model, opt, x, y, criterion):
            loss = criterion(model(x).detach(), y)
            loss.requires_grad_(True)
            loss.backward()
        """, {(2, "GT107"), (3, "GT106")}),
    "rewrapped_with_requires_grad": ("""
        import torch.nn.functional as F
        import torch

        def step(model, x, y):
            loss = F.mse_loss(model(x), y)
            loss = torch.tensor(loss, requires_grad=True)
            loss.backward()
        """, {(6, "GT104")}),
    "backward_count": ("""
        import torch

        class Mul(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g * b
        """, {(12, "GT701")}),
    "grad_of_plain_tensor": ("""
        import torch

        def penalty(D, real, fake):
            eps = torch.rand(real.size(0), 1)
            x_hat = torch.lerp(real, fake, eps).detach()
            out = D(x_hat)
            return torch.autograd.grad(out.sum(), x_hat)[0]
        """, {(5, "GT702")}),
    # twins of the corpus2 look-alikes above
    "layer_output_read_through_data_in_forward": ("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                std = torch.sqrt(torch.var(x, dim=0) + 1e-5)
                h = self.encoder(x / std).data
                return self.head(h)
        """, {(7, "GT105")}),
    # corpus2 (allennlp AugmentedLstm, a real bug): the state buffer is re-made from `.data`
    # each step and only the active rows are written back, so the final state of sequences
    # that ended earlier reaches the output without history
    "state_buffer_rebuilt_from_data_each_step": ("""
        import torch

        class AugmentedLstm(torch.nn.Module):
            def forward(self, x, lengths):
                state = x.new_zeros(x.size(0), self.hidden)
                for t in range(x.size(1)):
                    k = int((lengths > t).sum())
                    out = self.cell(x[:k, t], state[:k].clone())
                    state = state.data.clone()
                    state[:k] = out
                return state
        """, {(9, "GT105")}),
    "detached_copy_without_requires_grad": ("""
        import torch

        def test_backward(A, B):
            A_copy = A.clone().detach()
            expected = torch.diagonal(B.detach().mT @ A_copy @ B.detach()).sum()
            expected.backward()
        """, {(4, "GT107")}),
    "running_total_backwarded": ("""
        import torch
        import torch.nn.functional as F

        def train(model, batches, opt):
            total = torch.zeros(1)
            for x, y in batches:
                total += F.mse_loss(model(x), y).detach()
            total.backward()
        """, {(7, "GT107")}),
    "robust_loss_returns_only_indicators": ("""
        def robust_loss(r2, scale2):
            return (r2 < scale2).float(), (r2 > 0).float()
        """, {(2, "GT108")}),
    "decoded_logits_rebuilt_as_tensor": ("""
        import torch
        import torch.nn.functional as F

        def compute_actions_l1_loss(action_tokenizer, logits, gt_token_ids):
            pred = torch.tensor(action_tokenizer.decode(logits))
            true = torch.tensor(action_tokenizer.decode(gt_token_ids))
            return F.l1_loss(pred, true)
        """, {(5, "GT104")}),
    # twins of the corpus3 look-alikes
    "data_copy_without_requires_grad": ("""
        import torch

        def test_scale_grad():
            A1 = torch.randn(4, requires_grad=True)
            x = torch.tensor([5.0, 5.0, 10.0, 20.0])
            A2 = A1.data.clone()
            out2 = (A2 * x).sum()
            out2.backward()
        """, {(6, "GT105")}),
    "criterion_method_on_rebuilt_predictions": ("""
        import torch

        class Algo:
            def train_vf(self, preds, targets):
                vf_loss = self.criterion.compute_loss(torch.tensor(preds), targets)
                vf_loss.backward()
        """, {(5, "GT104")}),
    "closure_total_bound_to_model_output": ("""
        import torch

        def search(model, x, optimizer):
            total = model(x).sum()

            def f_loss():
                nonlocal total
                total += 1
                return torch.tensor(total)

            optimizer.line_search(f_loss)
        """, {(9, "GT104")}),
    "loss_fn_property_returns_indicator": ("""
        class Validator:
            @property
            def loss_fn(self):
                return entropy_loss(self.logits == "preds")
        """, {(4, "GT108")}),
    "lstm_output_on_padded_input_read_through_data": ("""
        import torch

        class Tagger(torch.nn.Module):
            def forward(self, inputs, sentlens):
                lstm_inputs = self.drop(torch.cat(inputs, 1))
                lstm_outputs, _ = self.taggerlstm(lstm_inputs, sentlens)
                lstm_outputs = lstm_outputs.data
                return self.upos_clf(self.drop(lstm_outputs))
        """, {(7, "GT105")}),
}


def _ours(src: str) -> list:
    text = textwrap.dedent(src).lstrip("\n")
    return [f for f in check_source(text, "snippet.py", select=list(FAMILIES))]


@pytest.mark.parametrize("name", sorted(SILENT))
def test_look_alike_is_silent(name: str, monkeypatch) -> None:
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    found = _ours(SILENT[name])
    assert found == [], [(f.line, f.code, f.message) for f in found]


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_bug_next_to_look_alike_is_caught(name: str, monkeypatch) -> None:
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    src, expected = CAUGHT[name]
    assert {(f.line, f.code) for f in _ours(src)} == expected


def test_gt7xx_messages_quote_real_torch_errors() -> None:
    """The errors GT701/GT702 quote are what the installed torch raises."""
    torch = pytest.importorskip("torch")

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):  # type: ignore[override]
            return a * b

        @staticmethod
        def backward(ctx, g):  # type: ignore[override]
            return g  # noqa: GT701 - the bug under test

    a = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"MulBackward returned an incorrect number of "
                                           r"gradients \(expected 2, got 1\)"):
        Mul.apply(a, a).sum().backward()
    found = _ours(CAUGHT["backward_count"][0])
    assert "(expected 2, got 1)" in found[0].message
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match="differentiated Tensors does not require grad"):
        torch.autograd.grad(y, a.detach(), retain_graph=True)
    unused = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="at index 0 appears to not have been used in the graph"):
        torch.autograd.grad(y, unused)  # noqa: GT702 - the bug under test


def test_deep_and_self_referencing_flows_do_not_crash(monkeypatch) -> None:
    """A 400-step chain of names and a container filled from itself stay cheap and silent."""
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    chain = "".join(f"    l{i} = l{i - 1} * 2 + l{i - 1}.detach()\n" for i in range(1, 400))
    deep = f"def train(model, x):\n    l0 = model(x)\n{chain}    l399.backward()\n"
    loop = ("def f(model, xs):\n    losses = []\n    for x in xs:\n"
            "        losses.append(model(x) + losses[-1].detach())\n"
            "    losses.extend(losses)\n    sum(losses).backward()\n")
    assert _ours(deep) == [] and _ours(loop) == []
