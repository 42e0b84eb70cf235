"""audiocraft's MusicGenSolver._prepare_tokens_and_attributes carried a @torch.no_grad() decorator, and it computes the condition tensors with self.model.condition_provider(tokenized): the T5 conditioner's output_proj (the Linear applied to the frozen T5 embeddings) runs without a graph, so the language model's cross-entropy never reaches it and the projection keeps its initial weights while the rest of the model trains.

source: https://github.com/facebookresearch/audiocraft/pull/335
kind: bug
symptom: silent
verified: after 20 AdamW steps the T5 conditioner's output_proj.weight.grad is None after every backward and the weight moved 0.0, while the LM's output linear moved 3.1797; with the decorator removed (the fix, v1.1.0) output_proj.weight gets a gradient and moves 1.5179
"""
import torch
from torch import nn


class T5Conditioner(nn.Module):  # BaseConditioner + T5Conditioner; the frozen T5 is an embedding table
    def __init__(self, dim=12, output_dim=16, finetune=False):
        super().__init__()
        self.output_proj = nn.Linear(dim, output_dim)
        self.finetune = finetune
        self.__dict__['t5'] = nn.Embedding(50, dim).requires_grad_(False)  # not part of the checkpoint

    def forward(self, inputs):
        mask = inputs['attention_mask']
        with torch.set_grad_enabled(self.finetune):
            embeds = self.t5(inputs['input_ids'])
        embeds = self.output_proj(embeds.to(self.output_proj.weight))
        embeds = (embeds * mask.unsqueeze(-1))
        return embeds, mask


class ConditioningProvider(nn.Module):
    def __init__(self, conditioners):
        super().__init__()
        self.conditioners = nn.ModuleDict(conditioners)

    def forward(self, tokenized):
        output = {}
        for attribute, inputs in tokenized.items():
            condition, mask = self.conditioners[attribute](inputs)
            output[attribute] = (condition, mask)
        return output


class LMModel(nn.Module):  # the transformer is one embedding plus one cross-attention over the description
    def __init__(self, card=32, dim=16):
        super().__init__()
        self.condition_provider = ConditioningProvider({'description': T5Conditioner(output_dim=dim)})
        self.emb = nn.Embedding(card + 1, dim)
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.linear = nn.Linear(dim, card)

    def compute_predictions(self, codes, conditions, condition_tensors):
        x = self.emb(codes)
        cond, mask = condition_tensors['description']
        x = x + self.attn(x, cond, cond, key_padding_mask=mask == 0)[0]
        return self.linear(x)


class MusicGenSolver:
    def __init__(self):
        self.model = LMModel()
        self.compression_model = lambda audio: (audio * 8).long().clamp(0, 31)  # frozen EnCodec: tokens only
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2)

    @torch.no_grad()  # ROOT
    def _prepare_tokens_and_attributes(self, batch):
        audio, descriptions = batch
        tokenized = {'description': {'input_ids': descriptions, 'attention_mask': torch.ones_like(descriptions)}}
        with torch.no_grad():
            audio_tokens = self.compression_model(audio)
        condition_tensors = self.model.condition_provider(tokenized)
        return condition_tensors, audio_tokens

    def run_step(self, batch):
        condition_tensors, audio_tokens = self._prepare_tokens_and_attributes(batch)
        logits = self.model.compute_predictions(audio_tokens[:, :-1], [], condition_tensors)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 32), audio_tokens[:, 1:].reshape(-1))
        loss.backward()
        self.output_proj_grad = self.model.condition_provider.conditioners['description'].output_proj.weight.grad
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item()


torch.manual_seed(0)
solver = MusicGenSolver()
output_proj = solver.model.condition_provider.conditioners['description'].output_proj
proj_before, lm_before = output_proj.weight.detach().clone(), solver.model.linear.weight.detach().clone()
audio, descriptions = torch.rand(8, 20), torch.randint(0, 50, (8, 6))
for step in range(20):
    loss = solver.run_step((audio, descriptions))
print("output_proj grad", None if solver.output_proj_grad is None else "set")
print("output_proj moved", round((output_proj.weight - proj_before).norm().item(), 4),
      "LM linear moved", round((solver.model.linear.weight - lm_before).norm().item(), 4))
