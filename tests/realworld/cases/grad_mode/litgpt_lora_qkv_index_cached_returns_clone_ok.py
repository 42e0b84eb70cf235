"""litgpt after PR #2225: LoRAQKVLinear still caches `lora_ind` as a non-persistent buffer on first use (possibly under `generate`'s inference mode), but the property returns `self._lora_ind.clone()`; a clone made outside inference mode is a normal tensor, so fine-tuning after sampling can save it for backward.

source: https://github.com/Lightning-AI/litgpt/pull/2225
kind: lookalike
"""
import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LoRALayer(nn.Module):
    def __init__(self, r: int, lora_alpha: int, lora_dropout: float):
        super().__init__()
        assert r >= 0
        self.r = r
        self.lora_alpha = lora_alpha
        self.lora_dropout = nn.Dropout(p=lora_dropout) if lora_dropout > 0.0 else (lambda x: x)
        self.merged = False


class LoRAQKVLinear(LoRALayer):
    def __init__(self, in_features, out_features, head_size, n_head, n_query_groups, r=0, lora_alpha=1,
                 lora_dropout=0.0, enable_lora=False, **kwargs: Any):
        super().__init__(r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout)
        self.linear = torch.nn.Linear(in_features, out_features, **kwargs)
        self.head_size = head_size
        self.n_head = n_head
        self.n_query_groups = n_query_groups
        if isinstance(enable_lora, bool):
            enable_lora = [enable_lora] * 3
        self.enable_lora = enable_lora
        if r > 0 and any(enable_lora):
            self.lora_A = nn.Parameter(torch.empty((r * sum(enable_lora), in_features)))
            enable_q, enable_k, enable_v = enable_lora
            qkv_shapes = (head_size * n_head * enable_q, head_size * n_query_groups * enable_k,
                          head_size * n_query_groups * enable_v)
            self.qkv_shapes = [s for s in qkv_shapes if s]
            self.lora_B = nn.Parameter(torch.empty(sum(self.qkv_shapes), r))
            self.scaling = self.lora_alpha / self.r
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    @property
    def lora_ind(self) -> torch.Tensor:
        """Lazy creation of a buffer with LoRA indices to overcome the limitation when FSDP with meta device is used."""
        if not hasattr(self, "_lora_ind"):
            enable_q, enable_k, enable_v = self.enable_lora
            q_embd_size = self.head_size * self.n_head
            kv_embd_size = self.head_size * self.n_query_groups
            lora_ind = []
            if enable_q:
                lora_ind.extend(range(0, q_embd_size))
            if enable_k:
                lora_ind.extend(range(q_embd_size, q_embd_size + kv_embd_size))
            if enable_v:
                lora_ind.extend(range(q_embd_size + kv_embd_size, self.linear.out_features))
            self.register_buffer(
                "_lora_ind", torch.tensor(lora_ind, device=self.linear.weight.device), persistent=False
            )
        return self._lora_ind.clone()

    def zero_pad(self, x: torch.Tensor) -> torch.Tensor:
        if all(self.enable_lora):
            return x
        result = x.new_zeros(*x.shape[:-1], self.linear.out_features)
        return result.index_copy_(dim=-1, index=self.lora_ind, source=x)

    def conv1d(self, input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.n_head == self.n_query_groups:
            return F.conv1d(input, weight, groups=sum(self.enable_lora))
        input_splitted = input.chunk(sum(self.enable_lora), dim=1)
        weight_splitted = weight.split(self.qkv_shapes)
        return torch.cat([F.conv1d(a, b) for a, b in zip(input_splitted, weight_splitted)], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pretrained = self.linear(x)
        if self.r == 0 or not any(self.enable_lora) or self.merged:
            return pretrained
        after_A = F.linear(self.lora_dropout(x), self.lora_A)
        after_B = self.conv1d(after_A.transpose(-2, -1), self.lora_B.unsqueeze(-1)).transpose(-2, -1)
        lora = self.zero_pad(after_B) * self.scaling
        return pretrained + lora


class GPT(nn.Module):
    """One causal self-attention block with a LoRA qkv (query and value only), as litgpt's default LoRA config."""

    def __init__(self, vocab_size=64, n_embd=32, n_head=4):
        super().__init__()
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.qkv = LoRAQKVLinear(n_embd, 3 * n_embd, self.head_size, n_head, n_head, r=4, lora_alpha=8,
                                 enable_lora=(True, False, True))
        self.proj = nn.Linear(n_embd, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx):
        x = self.wte(idx)
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, self.head_size).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        return self.lm_head(x + self.proj(y))


def mark_only_lora_as_trainable(model: nn.Module) -> None:
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad = False


@torch.inference_mode()
def generate(model, prompt, max_returned_tokens):
    tokens = prompt
    for _ in range(max_returned_tokens - prompt.shape[-1]):
        logits = model(tokens[None])[0, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)])
    return tokens


model = GPT()
mark_only_lora_as_trainable(model)
print("sample before fine-tuning:", generate(model, torch.tensor([1, 2, 3]), max_returned_tokens=8).tolist())

optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model.train()
for step in range(3):
    batch = torch.randint(0, 64, (4, 9))
    logits = model(batch[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
