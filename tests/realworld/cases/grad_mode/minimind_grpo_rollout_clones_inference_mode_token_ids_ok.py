"""minimind's GRPO rollout after the maintainer's fix for issue #754 (commit bdee223): TorchRolloutEngine.rollout clones the token ids returned by the @torch.inference_mode() generate inside its torch.no_grad() block, so output_ids is a normal tensor and the policy's training forward on it can save the ids for backward.

source: https://github.com/jingyaogong/minimind/issues/754
kind: lookalike
"""
from contextlib import nullcontext
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class MiniMindForCausalLM(nn.Module):  # a 1-layer stand-in: no KV cache, no MoE
    def __init__(self, vocab_size=32, hidden_size=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layer = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.lm_head = nn.Linear(hidden_size, vocab_size)

    def forward(self, input_ids, attention_mask=None, logits_to_keep=0, **kwargs):
        h, _ = self.layer(self.embed_tokens(input_ids))
        logits = self.lm_head(h[:, -logits_to_keep:, :])
        return SimpleNamespace(logits=logits, aux_loss=torch.tensor(0.0))

    @torch.inference_mode()
    def generate(self, inputs=None, attention_mask=None, max_new_tokens=8, temperature=0.85, eos_token_id=2, **kwargs):
        input_ids = kwargs.pop("input_ids", inputs)
        for _ in range(max_new_tokens):
            logits = self.forward(input_ids, attention_mask).logits[:, -1, :] / temperature
            next_token = torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)
            input_ids = torch.cat([input_ids, next_token], dim=-1)
        return input_ids


def compute_per_token_logps(model, input_ids, n_keep, attention_mask=None):
    input_ids = input_ids.detach().clone() if input_ids.is_inference() else input_ids
    logits = model(input_ids, attention_mask=attention_mask, logits_to_keep=n_keep + 1).logits[:, :-1, :]
    return torch.gather(logits.log_softmax(dim=-1), 2, input_ids[:, -n_keep:].unsqueeze(-1)).squeeze(-1)


class TorchRolloutEngine:
    def __init__(self, policy_model, tokenizer, autocast_ctx=None):
        self.policy_model, self.tokenizer, self.autocast_ctx = policy_model, tokenizer, autocast_ctx

    def rollout(self, prompt_ids, attention_mask, num_generations, max_new_tokens, temperature=0.8):
        model = self.policy_model
        ctx = self.autocast_ctx if self.autocast_ctx else nullcontext()
        with torch.no_grad(), ctx:
            output_ids = model.generate(input_ids=prompt_ids.repeat_interleave(num_generations, dim=0), attention_mask=attention_mask.repeat_interleave(num_generations, dim=0), max_new_tokens=max_new_tokens, temperature=temperature, eos_token_id=self.tokenizer.eos_token_id).clone()
            prompt_len = prompt_ids.size(1)
            completion_ids = output_ids[:, prompt_len:]
            full_mask = (output_ids != self.tokenizer.pad_token_id).long()
            per_token_logps = compute_per_token_logps(self.policy_model, output_ids, completion_ids.size(1), attention_mask=full_mask)
        return SimpleNamespace(output_ids=output_ids, completion_ids=completion_ids, per_token_logps=per_token_logps,
                               prompt_lens=prompt_ids.new_full((output_ids.size(0),), prompt_len))


torch.manual_seed(0)
tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=2)
model = MiniMindForCausalLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
rollout_engine = TorchRolloutEngine(model, tokenizer)
num_generations, beta, epsilon = 4, 0.02, 0.2
for step in range(2):
    prompt_ids = torch.randint(3, 32, (2, 5))
    rollout_result = rollout_engine.rollout(prompt_ids, torch.ones_like(prompt_ids), num_generations, max_new_tokens=6)
    outputs, completion_ids = rollout_result.output_ids, rollout_result.completion_ids
    old_per_token_logps = rollout_result.per_token_logps
    full_mask = (outputs != tokenizer.pad_token_id).long()
    logp_pos = rollout_result.prompt_lens.unsqueeze(1) - 1 + torch.arange(completion_ids.size(1)).unsqueeze(0)
    res = model(outputs, attention_mask=full_mask)
    per_token_logps = F.log_softmax(res.logits[:, :-1, :], dim=-1).gather(2, outputs[:, 1:].unsqueeze(-1)).squeeze(-1).gather(1, logp_pos)
    rewards = (completion_ids % 3 == 0).float().mean(1)  # stands for the reward model
    grouped_rewards = rewards.view(-1, num_generations)
    advantages = (rewards - grouped_rewards.mean(1).repeat_interleave(num_generations)) / (grouped_rewards.std(1, unbiased=False).repeat_interleave(num_generations) + 1e-4)
    ratio = torch.exp(per_token_logps - old_per_token_logps)
    per_token_loss = -torch.min(ratio * advantages.unsqueeze(1), torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages.unsqueeze(1))
    loss = per_token_loss.mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(step, round(loss.item(), 4))
