"""OpenRLHF's DPOLoss returns the per-pair losses, -logsigmoid(beta * logits), without reducing them, and DPOTrainer.fit hands that vector to strategy.backward(loss, ...): backward on a non-scalar tensor without a gradient argument fails at the first training step.

source: https://github.com/OpenRLHF/OpenRLHF/pull/145
kind: bug
symptom: crash
verified: RuntimeError: grad can be implicitly created only for scalar outputs
"""
import copy
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class DPOLoss(nn.Module):
    def __init__(self, beta: float = None) -> None:
        super().__init__()
        self.beta = beta

    def forward(self, policy_chosen_logps, policy_rejected_logps, reference_chosen_logps, reference_rejected_logps):
        pi_logratios = policy_chosen_logps - policy_rejected_logps
        ref_logratios = reference_chosen_logps - reference_rejected_logps
        logits = pi_logratios - ref_logratios
        losses = -F.logsigmoid(self.beta * logits)
        chosen_rewards = self.beta * (policy_chosen_logps - reference_chosen_logps).detach()
        rejected_rewards = self.beta * (policy_rejected_logps - reference_rejected_logps).detach()
        return losses, chosen_rewards, rejected_rewards  # ROOT


class Actor(nn.Module):  # stands for openrlhf.models.Actor around a causal LM
    def __init__(self, vocab_size=32, dim=16):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab_size, dim), nn.Linear(dim, vocab_size)

    def forward(self, input_ids, attention_mask=None, return_output=True):
        return {"logits": self.head(torch.tanh(self.embed(input_ids).cumsum(dim=1)))}


class Strategy:  # stands for DeepspeedStrategy on one CPU process
    def backward(self, loss, model, optimizer):
        loss.backward()  # SYMPTOM

    def optimizer_step(self, optimizer, model, scheduler):
        optimizer.step()
        optimizer.zero_grad()


class DPOTrainer:  # tqdm, wandb, evaluation, checkpoints and the padding of unequal lengths left out
    def __init__(self, model, ref_model, strategy, tokenizer, optim, train_dataloader, beta=0.1):
        self.model, self.ref_model, self.strategy, self.tokenizer = model, ref_model, strategy, tokenizer
        self.optimizer, self.train_dataloader = optim, train_dataloader
        self.loss_fn = DPOLoss(beta)

    def fit(self):
        self.model.train()
        self.ref_model.eval()
        for chosen_ids, c_mask, reject_ids, r_mask, _ in self.train_dataloader:
            chosen_logps, rejected_logps = self.concatenated_forward(self.model, chosen_ids, c_mask, reject_ids, r_mask)
            with torch.no_grad():
                reference_chosen_logps, reference_rejected_logps = self.concatenated_forward(
                    self.ref_model, chosen_ids, c_mask, reject_ids, r_mask)
            loss, chosen_reward, reject_reward = self.loss_fn(
                chosen_logps, rejected_logps, reference_chosen_logps, reference_rejected_logps)
            self.strategy.backward(loss, self.model, self.optimizer)
            self.strategy.optimizer_step(self.optimizer, self.model, None)
            print("train_loss", round(loss.item(), 4), "acc", (chosen_reward > reject_reward).float().mean().item())

    def concatenated_forward(self, model, chosen_ids, c_mask, reject_ids, r_mask):
        input_ids, att_masks = torch.cat((chosen_ids, reject_ids), dim=0), torch.cat((c_mask, r_mask), dim=0)
        all_logits = model(input_ids, attention_mask=att_masks, return_output=True)["logits"]
        all_logps = self._get_batch_logps(all_logits, input_ids, average_log_prob=False)
        return all_logps[: chosen_ids.shape[0]], all_logps[chosen_ids.shape[0]:]

    def _get_batch_logps(self, logits, labels, average_log_prob=False):
        labels = labels[:, 1:].clone()
        logits = logits[:, :-1, :]
        loss_mask = labels != self.tokenizer.pad_token_id
        labels[labels == self.tokenizer.pad_token_id] = 0
        per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
        return (per_token_logps * loss_mask).sum(-1)


torch.manual_seed(0)
model = Actor()
ref_model = copy.deepcopy(model)
tokenizer = SimpleNamespace(pad_token_id=0)
batches = [(torch.randint(1, 32, (4, 10)), torch.ones(4, 10), torch.randint(1, 32, (4, 10)), torch.ones(4, 10), None)
           for _ in range(3)]  # stands for RewardDataset batches: chosen ids/mask, rejected ids/mask, extra
trainer = DPOTrainer(model, ref_model, Strategy(), tokenizer, torch.optim.Adam(model.parameters(), lr=1e-3), batches)
trainer.fit()
