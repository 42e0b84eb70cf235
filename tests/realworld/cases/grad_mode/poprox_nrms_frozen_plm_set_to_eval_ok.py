"""poprox-recommender's `NewsEncoder` after its fix: right after freezing the pretrained language model with `requires_grad_(False)` the constructor also switches it to eval mode (`self.plm.eval()`), so the serving component's embeddings are deterministic and the same headline always gets the same vector.

source: https://github.com/CCRI-POPROX/poprox-recommender/commit/99bed734d1418ab8d3d7bce7dd0954504aba0595
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, HIDDEN, TITLE_LENGTH_LIMIT = 200, 32, 12


class PLMOutput:
    def __init__(self, last_hidden_state):
        self.last_hidden_state = last_hidden_state


class TinyPLM(nn.Module):
    """Stand-in for the DistilBERT that `AutoModel.from_config` builds (dropout 0.1)."""

    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.dropout = nn.Dropout(0.1)
        self.layer = nn.TransformerEncoderLayer(HIDDEN, 4, 64, dropout=0.1, batch_first=True)

    def forward(self, input_ids, attention_mask):
        hidden = self.dropout(self.embeddings(input_ids))
        return PLMOutput(self.layer(hidden, src_key_padding_mask=~attention_mask.bool()))


class AdditiveAttention(nn.Module):
    def __init__(self, in_dim, hidden_dim):
        super().__init__()
        self.proj = nn.Linear(in_dim, hidden_dim)
        self.query = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, x, padding_mask):
        scores = self.query(torch.tanh(self.proj(x))).squeeze(-1)
        scores = scores.masked_fill(padding_mask, -1e9)
        weights = torch.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * x).sum(1), weights, scores


class NewsEncoder(nn.Module):
    def __init__(self, num_attention_heads, additive_attn_hidden_dim):
        super().__init__()
        self.plm = TinyPLM()
        self.plm.requires_grad_(False)
        self.plm.eval()

        self.multihead_attention = nn.MultiheadAttention(
            embed_dim=HIDDEN, num_heads=num_attention_heads, batch_first=True)
        self.additive_attention = AdditiveAttention(HIDDEN, additive_attn_hidden_dim)

    @property
    def embedding_size(self):
        return HIDDEN

    def forward(self, article_tokens):
        nonzero_inputs = article_tokens.bool()
        token_embeddings = self.plm(article_tokens, attention_mask=nonzero_inputs.int()).last_hidden_state
        mha_padding_mask = ~nonzero_inputs
        mha_padding_mask[:, 0] = False
        multihead_attn_output, _ = self.multihead_attention(
            token_embeddings, token_embeddings, token_embeddings, key_padding_mask=mha_padding_mask)
        article_vectors, _, _ = self.additive_attention(multihead_attn_output, padding_mask=~nonzero_inputs)
        return article_vectors


class NRMSArticleEmbedder:
    def __init__(self, checkpoint):
        self.news_encoder = NewsEncoder(num_attention_heads=4, additive_attn_hidden_dim=16)
        self.news_encoder.load_state_dict(checkpoint)
        self.embedding_cache = {}

    @torch.inference_mode()
    def __call__(self, articles):
        uncached = [key for key in articles if key not in self.embedding_cache]
        if uncached:
            tokens = torch.stack([articles[key] for key in uncached])
            embeddings = self.news_encoder(tokens)
            for i, key in enumerate(uncached):
                self.embedding_cache[key] = embeddings[i, :].clone()
        return torch.stack([self.embedding_cache[key] for key in articles])


# A checkpoint as the training script saves it.
checkpoint = NewsEncoder(num_attention_heads=4, additive_attn_hidden_dim=16).state_dict()

headlines = {}
for i in range(16):
    length = int(torch.randint(4, TITLE_LENGTH_LIMIT, ()))
    tokens = torch.zeros(TITLE_LENGTH_LIMIT, dtype=torch.long)
    tokens[:length] = torch.randint(1, VOCAB, (length,))
    headlines[f"article-{i}"] = tokens

first = NRMSArticleEmbedder(checkpoint)(headlines)
second = NRMSArticleEmbedder(checkpoint)(headlines)

reference = NewsEncoder(num_attention_heads=4, additive_attn_hidden_dim=16)
reference.load_state_dict(checkpoint)
reference.eval()
with torch.inference_mode():
    expected = reference(torch.stack(list(headlines.values())))
cosine = nn.functional.cosine_similarity(first, expected, dim=-1).mean().item()
print(f"two embedders, same headlines: identical {torch.equal(first, second)} "
      f"(max difference {(first - second).abs().max().item():.2g})")
print(f"mean cosine similarity to the deterministic embeddings: {cosine:.3f}")
