"""torchtitan's RL PolicyTrainer after PR 3575 calls self.optimizers.zero_grad() in optim_step, after the optimizer and scheduler steps, so the gradients of all the micro-batches the controller runs through forward_backward accumulate and the optimizer steps on the whole batch's gradient.

source: https://github.com/pytorch/torchtitan/pull/3575
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def compute_logprobs(logits, labels):
    return torch.gather(F.log_softmax(logits, dim=-1), -1, labels.unsqueeze(-1)).squeeze(-1)


def policy_gradient_loss(policy_logprobs, generator_logprobs, loss_mask, advantages, num_global_valid_tokens):
    ratio = torch.exp(policy_logprobs - generator_logprobs.detach())
    per_token = -(ratio * advantages.unsqueeze(-1)) * loss_mask
    return per_token.sum() / num_global_valid_tokens, {}


class PolicyTrainer:  # the Actor/endpoint machinery, parallel dims, metrics and tracing left out
    def __init__(self, model, lr=1e-2):
        self.model_parts = [model]
        self.optimizers = torch.optim.AdamW(model.parameters(), lr=lr)
        self.lr_schedulers = torch.optim.lr_scheduler.LambdaLR(self.optimizers, lambda step: 1.0)
        self.loss_fn = policy_gradient_loss
        self.policy_version = 0

    def forward_backward(self, local_batch, num_global_valid_tokens):
        model = self.model_parts[0]
        logits = model(local_batch["token_ids"])
        policy_logprobs = compute_logprobs(logits, local_batch["labels"])
        loss, loss_metrics = self.loss_fn(policy_logprobs=policy_logprobs,
                                          generator_logprobs=local_batch["generator_logprobs"],
                                          loss_mask=local_batch["loss_mask"], advantages=local_batch["advantages"],
                                          num_global_valid_tokens=num_global_valid_tokens)
        loss.backward()
        return {"loss": loss.item()}

    def optim_step(self):
        grad_norm = torch.nn.utils.clip_grad_norm_([p for m in self.model_parts for p in m.parameters()], 1.0)
        self.applied_grad = self.model_parts[0][0].weight.grad.detach().clone()
        self.optimizers.step()
        self.lr_schedulers.step()
        self.optimizers.zero_grad()
        self.policy_version += 1
        return {"train/grad_norm/mean": float(grad_norm)}


torch.manual_seed(0)
vocab, seq = 20, 6
model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))
reference = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))
reference.load_state_dict(model.state_dict())
micro_batches = [{"token_ids": torch.randint(0, vocab, (2, seq)), "labels": torch.randint(0, vocab, (2, seq)),
                  "generator_logprobs": torch.full((2, seq), -3.0), "loss_mask": torch.ones(2, seq),
                  "advantages": torch.randn(2)} for _ in range(4)]
num_global_valid_tokens = sum(int(mb["loss_mask"].sum()) for mb in micro_batches)
trainer = PolicyTrainer(model)
for mb in micro_batches:  # the controller: forward_backward per micro-batch, then one optimizer step
    trainer.forward_backward(mb, num_global_valid_tokens)
trainer.optim_step()
total = sum(policy_gradient_loss(compute_logprobs(reference(mb["token_ids"]), mb["labels"]), mb["generator_logprobs"],
                                 mb["loss_mask"], mb["advantages"], num_global_valid_tokens)[0] for mb in micro_batches)
full_grad = torch.autograd.grad(total, reference[0].weight)[0]
applied = trainer.applied_grad
print("applied grad norm:", round(applied.norm().item(), 4), "whole-batch grad norm:", round(full_grad.norm().item(), 4),
      "relative difference:", round(((applied - full_grad).norm() / full_grad.norm()).item(), 4))
