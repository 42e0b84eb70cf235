"""MiniCPM-o LoRA fine-tuning (LLaMA-Factory): with the LLM embeddings frozen, enable_input_require_grads() makes embed_tokens' output a leaf that requires grad, and get_vllm_embedding scatters the vision hidden states into a per-sample view of it with scatter_.

source: https://github.com/OpenBMB/MiniCPM-V/issues/730
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn


class MiniCPMO(nn.Module):
    def __init__(self, vocab=64, dim=16, patch_dim=12):
        super().__init__()
        self.llm = nn.Module()
        self.llm.model = nn.Module()
        self.llm.model.embed_tokens = nn.Embedding(vocab, dim)
        self.llm.lm_head = nn.Linear(dim, vocab)
        self.vpm = nn.Linear(patch_dim, dim)
        self.resampler = nn.Linear(dim, dim)

    def enable_input_require_grads(self):
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)
        self.llm.model.embed_tokens.register_forward_hook(make_inputs_require_grads)

    def get_vllm_embedding(self, data):
        vision_hidden_states = [self.resampler(self.vpm(p)) for p in data["pixel_values"]]
        vllm_embedding = self.llm.model.embed_tokens(data["input_ids"])
        bs = len(data["input_ids"])
        for i in range(bs):
            cur_vs_hs = vision_hidden_states[i]
            if len(cur_vs_hs) > 0:
                cur_vllm_emb = vllm_embedding[i]
                cur_image_bound = data["image_bound"][i]
                image_indices = torch.stack(
                    [torch.arange(r[0], r[1], dtype=torch.long) for r in cur_image_bound]).to(vllm_embedding.device)
                cur_vllm_emb.scatter_(  # ROOT
                    0,
                    image_indices.view(-1, 1).repeat(1, cur_vllm_emb.shape[-1]),
                    cur_vs_hs.view(-1, cur_vs_hs.shape[-1]),
                )
        return vllm_embedding, vision_hidden_states

    def forward(self, data):
        vllm_embedding, _ = self.get_vllm_embedding(data)
        return self.llm.lm_head(vllm_embedding)


torch.manual_seed(0)
model = MiniCPMO()
model.llm.model.embed_tokens.weight.requires_grad_(False)
model.enable_input_require_grads()
data = {
    "input_ids": torch.randint(0, 64, (2, 10)),
    "pixel_values": [torch.randn(4, 12), torch.randn(4, 12)],
    "image_bound": [torch.tensor([[2, 6]]), torch.tensor([[3, 7]])],
}
logits = model(data)
loss = nn.functional.cross_entropy(logits.view(-1, 64), torch.randint(0, 64, (20,)))
loss.backward()
