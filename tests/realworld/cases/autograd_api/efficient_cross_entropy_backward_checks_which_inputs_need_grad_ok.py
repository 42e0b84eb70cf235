"""efficient_cross_entropy's fused projection + cross-entropy `autograd.Function` after the fix: `backward` starts from `grad_in_feat = grad_proj_weight = None` and scales only the gradients that were computed, so training with a frozen output projection returns None for the weight and trains the rest of the model.

source: https://github.com/mgmalek/efficient_cross_entropy/pull/8
kind: lookalike
"""
from math import sqrt

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class FusedCrossEntropyLossFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, in_feat, proj_weight, targ, n_loop_iters, ignore_index):
        n_tokens = in_feat.shape[0]
        chunk = n_tokens // n_loop_iters
        grad_in_feat = torch.zeros_like(in_feat) if in_feat.requires_grad else None
        grad_proj_weight = torch.zeros_like(proj_weight) if proj_weight.requires_grad else None
        divisor = (targ != ignore_index).sum().clamp(min=1).to(in_feat.dtype)
        loss = in_feat.new_zeros(())
        for start in range(0, n_tokens, chunk):
            feat = in_feat[start:start + chunk]
            t = targ[start:start + chunk]
            logits = feat @ proj_weight.T
            logits = logits - logits.max(dim=1, keepdim=True).values
            log_z = logits.exp().sum(dim=1).log()
            valid = t != ignore_index
            safe_t = t.clamp(min=0)
            loss += ((log_z - logits.gather(1, safe_t[:, None]).squeeze(1)) * valid).sum() / divisor
            grad_logits = logits.softmax(dim=1)
            grad_logits[torch.arange(len(t)), safe_t] -= 1.0
            grad_logits = grad_logits * valid[:, None] / divisor
            if grad_in_feat is not None:
                grad_in_feat[start:start + chunk] = grad_logits @ proj_weight
            if grad_proj_weight is not None:
                grad_proj_weight += grad_logits.T @ feat
        ctx.in_feat_requires_grad = in_feat.requires_grad
        ctx.proj_weight_requires_grad = proj_weight.requires_grad
        if in_feat.requires_grad and proj_weight.requires_grad:
            ctx.save_for_backward(grad_in_feat, grad_proj_weight)
        elif proj_weight.requires_grad:
            ctx.save_for_backward(grad_proj_weight)
        elif in_feat.requires_grad:
            ctx.save_for_backward(grad_in_feat)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        grad_in_feat = grad_proj_weight = None
        if ctx.in_feat_requires_grad and ctx.proj_weight_requires_grad:
            grad_in_feat, grad_proj_weight = ctx.saved_tensors
        elif ctx.proj_weight_requires_grad:
            grad_proj_weight, = ctx.saved_tensors
        elif ctx.in_feat_requires_grad:
            grad_in_feat, = ctx.saved_tensors
        if grad_in_feat is not None:
            grad_in_feat = grad_in_feat * grad_output
        if grad_proj_weight is not None:
            grad_proj_weight = grad_proj_weight * grad_output
        return grad_in_feat, grad_proj_weight, None, None, None


class FusedProjectionPlusCrossEntropyLoss(nn.Module):
    def __init__(self, dim, n_classes, n_loop_iters=2, ignore_index=-100):
        super().__init__()
        self.n_loop_iters = n_loop_iters
        self.ignore_index = ignore_index
        self.proj_weight = nn.Parameter(torch.empty(n_classes, dim))
        nn.init.kaiming_uniform_(self.proj_weight, a=sqrt(5))

    def forward(self, x, targ):
        return FusedCrossEntropyLossFunction.apply(x, self.proj_weight, targ, self.n_loop_iters, self.ignore_index)


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.loss_head = FusedProjectionPlusCrossEntropyLoss(dim, vocab)

    def forward(self, tokens):
        h = self.body(self.embed(tokens[:, :-1])).reshape(-1, self.embed.embedding_dim)
        return self.loss_head(h, tokens[:, 1:].reshape(-1))


def freeze_output_head(model):
    model.loss_head.proj_weight.requires_grad_(False)


def main():
    model = TinyLM()
    freeze_output_head(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    tokens = torch.randint(0, 50, (8, 9))
    for step in range(5):
        loss = model(tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("final loss:", round(loss.item(), 4))


if __name__ == "__main__":
    main()
