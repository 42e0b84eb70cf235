"""code-lora-finetuner after its fix: with gradient checkpointing on, the loader also calls `model.enable_input_require_grads()`, whose forward hook marks the frozen embedding output as requiring grad, so every reentrant checkpointed block builds its graph, the loss has a `grad_fn` and the LoRA adapters inside the blocks receive gradients and train.

source: https://github.com/cuolm/code-lora-finetuner/commit/c89ff057c0fb8d1c28a9966ac6cb1299a3be94c5
kind: lookalike
"""
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

warnings.filterwarnings("ignore", message="None of the inputs have requires_grad")
torch.manual_seed(0)
torch.set_num_threads(1)


@dataclass
class Config:
    vocab: int = 64
    dim: int = 32
    layers: int = 2
    lora_r: int = 4
    lora_alpha: int = 8
    trainer_gradient_checkpointing: bool = True
    lr: float = 1e-3
    steps: int = 5


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int, alpha: int):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, h):
        x = self.norm(h)
        q, v = self.q_proj(x), self.v_proj(x)
        att = torch.softmax(q @ x.transpose(1, 2) / math.sqrt(x.shape[-1]), dim=-1)
        h = h + att @ v
        return h + self.mlp(h)


class TinyCausalLM(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg.dim) for _ in range(cfg.layers))
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def enable_input_require_grads(self):
        def make_inputs_require_grad(module, inputs, output):
            output.requires_grad_(True)
        self.embed_tokens.register_forward_hook(make_inputs_require_grad)

    def forward(self, input_ids, labels):
        h = self.embed_tokens(input_ids)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(block, h, use_reentrant=True)
            else:
                h = block(h)
        logits = self.lm_head(h)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def load_and_configure_lora_model(config: Config) -> TinyCausalLM:
    model = TinyCausalLM(config)  # stands in for AutoModelForCausalLM.from_pretrained
    model.requires_grad_(False)
    for block in model.blocks:
        block.q_proj = LoRALinear(block.q_proj, config.lora_r, config.lora_alpha)
        block.v_proj = LoRALinear(block.v_proj, config.lora_r, config.lora_alpha)
    if config.trainer_gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    return model


def train(model: TinyCausalLM, config: Config):
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"trainable parameters: {sum(p.numel() for p in trainable)}")
    optimizer = torch.optim.AdamW(trainable, lr=config.lr)
    model.train()
    for step in range(config.steps):
        ids = torch.randint(0, config.vocab, (4, 16))
        loss = model(ids, labels=ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


config = Config()
model = load_and_configure_lora_model(config)
train(model, config)
