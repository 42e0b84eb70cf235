"""PEFT's LoRA Embedding after PR 1372 adds its low-rank delta out of place, result = result + (after_A @ embedding_B) * scaling, so the leaf that the enable_input_require_grads() hook makes of the base embedding's output is left alone and the adapter trains.

source: https://github.com/huggingface/peft/pull/1372
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn


class TinyCausalLM(nn.Module):  # stands for the transformers model: embed_tokens, one block, lm_head
    def __init__(self, vocab_size=50, hidden_size=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.block = nn.Sequential(nn.LayerNorm(hidden_size), nn.Linear(hidden_size, hidden_size), nn.GELU())
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.embed_tokens

    def enable_input_require_grads(self):  # transformers' PreTrainedModel.enable_input_require_grads
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)
        self._require_grads_hook = self.get_input_embeddings().register_forward_hook(make_inputs_require_grads)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        return self.lm_head(h + self.block(h))


class Embedding(nn.Module):  # peft.tuners.lora.layer.Embedding, one adapter, no merge/unmerge
    def __init__(self, base_layer, adapter_name="default", r=4, lora_alpha=8):
        super().__init__()
        self.base_layer = base_layer
        self.lora_embedding_A = nn.ParameterDict({adapter_name: nn.Parameter(torch.randn(r, base_layer.num_embeddings))})
        self.lora_embedding_B = nn.ParameterDict({adapter_name: nn.Parameter(torch.zeros(base_layer.embedding_dim, r))})
        self.scaling = {adapter_name: lora_alpha / r}
        self.active_adapters = [adapter_name]

    def _embed(self, input, weight):
        return F.embedding(input, weight, padding_idx=self.base_layer.padding_idx)

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        for active_adapter in self.active_adapters:
            embedding_A = self.lora_embedding_A[active_adapter].T
            embedding_B = self.lora_embedding_B[active_adapter].T
            scaling = self.scaling[active_adapter]
            after_A = self._embed(x, embedding_A)
            result = result + (after_A @ embedding_B) * scaling
        result = result.to(torch_result_dtype)
        return result


torch.manual_seed(0)
model = TinyCausalLM()
for p in model.parameters():  # prepare_model_for_kbit_training: freeze the base model ...
    p.requires_grad_(False)
model.enable_input_require_grads()  # ... and make the input embeddings' output require grad
model.embed_tokens = Embedding(model.embed_tokens)  # get_peft_model(model, LoraConfig(target_modules=["embed_tokens"]))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(3):
    input_ids = torch.randint(0, 50, (2, 12))
    logits = model(input_ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), input_ids[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, round(loss.item(), 4))
