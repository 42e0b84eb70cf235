"""The knowledge-tracing DKVMN after its fix: the key memory `Mk` and the initial value memory `Mv` are wrapped in `Parameter`, so `model.parameters()` hands them to the optimizer built in `main`, training updates them, and `state_dict()` saves them (a reloaded model predicts exactly as the trained one).

source: https://github.com/hcnoh/knowledge-tracing-collection-pytorch/commit/871a1992e832013dc764fb13ea4769dfda7698a8
kind: lookalike
"""
import torch
from torch.nn import Embedding, Linear, Module, Parameter
from torch.nn.functional import binary_cross_entropy
from torch.nn.init import normal_

torch.manual_seed(0)
torch.set_num_threads(1)

NUM_Q, SEQ_LEN = 12, 20


class DKVMN(Module):
    def __init__(self, num_q, dim_k, dim_v, n_slots):
        super().__init__()
        self.num_q = num_q
        self.k_emb_layer = Embedding(num_q, dim_k)
        self.Mk = Parameter(torch.Tensor(dim_k, n_slots))
        self.Mv = Parameter(torch.Tensor(n_slots, dim_v))
        normal_(self.Mk)
        normal_(self.Mv)
        self.v_emb_layer = Embedding(num_q * 2, dim_v)
        self.f_layer = Linear(dim_k * 2, dim_k)
        self.p_layer = Linear(dim_k, 1)
        self.e_layer = Linear(dim_v, dim_v)
        self.a_layer = Linear(dim_v, dim_v)

    def forward(self, q, r):
        qr = q + self.num_q * r
        memory = self.Mv.unsqueeze(0)
        probs = []
        for qt, qrt in zip(q.t(), qr.t()):
            kt = self.k_emb_layer(qt)
            vt = self.v_emb_layer(qrt)
            wt = torch.softmax(kt @ self.Mk, dim=-1)
            read = (wt.unsqueeze(-1) * memory).sum(1)
            ft = torch.tanh(self.f_layer(torch.cat([read, kt], dim=-1)))
            probs.append(torch.sigmoid(self.p_layer(ft)).squeeze(-1))
            erase = torch.sigmoid(self.e_layer(vt))
            memory = memory * (1 - wt.unsqueeze(-1) * erase.unsqueeze(1))
            memory = memory + wt.unsqueeze(-1) * torch.tanh(self.a_layer(vt)).unsqueeze(1)
        return torch.stack(probs, dim=1)

    def train_model(self, batches, num_epochs, opt):
        for _ in range(num_epochs):
            for q, r in batches:
                self.train()
                p = self(q[:, :-1], r[:, :-1])
                loss = binary_cross_entropy(p, r[:, 1:].float())
                opt.zero_grad()
                loss.backward()
                opt.step()
        return loss.item()


def make_students(n_students=64):
    """Responses from students whose ability differs per skill (three questions share a skill)."""
    ability = torch.randn(n_students, NUM_Q // 3)
    difficulty = torch.randn(NUM_Q)
    q = torch.randint(0, NUM_Q, (n_students, SEQ_LEN))
    logits = ability.gather(1, q // 3) - difficulty[q]
    r = (torch.rand(n_students, SEQ_LEN) < torch.sigmoid(2 * logits)).long()
    return list(zip(q.split(16), r.split(16)))


def main():
    batches = make_students()
    model = DKVMN(NUM_Q, dim_k=8, dim_v=8, n_slots=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    before = model.Mk.detach().clone(), model.Mv.detach().clone()
    final_loss = model.train_model(batches, num_epochs=3, opt=opt)
    moved = [round((m.detach() - b).norm().item(), 2) for m, b in zip((model.Mk, model.Mv), before)]
    listed = any(p is model.Mk for p in model.parameters())
    saved = "Mk" in model.state_dict()
    torch.manual_seed(5)
    reloaded = DKVMN(NUM_Q, dim_k=8, dim_v=8, n_slots=4)
    reloaded.load_state_dict(model.state_dict())
    model.eval()
    reloaded.eval()
    with torch.no_grad():
        q, r = batches[0]
        gap = (model(q, r) - reloaded(q, r)).abs().max().item()
    print(f"final loss {final_loss:.3f}; memories moved by {moved}; in parameters(): {listed}; in state_dict: {saved}")
    print(f"reloaded model max prediction difference: {gap:.2f}")


if __name__ == "__main__":
    main()
