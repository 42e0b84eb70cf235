"""DeCLUTR gathers the anchor/positive embeddings of every GPU with `torch.distributed.all_gather` so the contrastive (NT-Xent) loss sees negatives from the whole global batch, and puts the rank's own grad-carrying embeddings back into its slot so gradients flow through them. Every rank then computes the same global loss but backpropagates only through its own slice, and DDP averages the gradients over the ranks: the synchronised gradient is the global-batch gradient divided by the world size. The loss was not multiplied by the world size, so with N GPUs the encoder trains with an effective learning rate N times smaller, silently.

source: https://github.com/JohnGiorgi/DeCLUTR/pull/212
kind: bug
symptom: silent
launch: torchrun --nproc-per-node=2
verified: with 2 ranks the DDP-synchronised encoder gradient is 0.5 times the gradient of the same loss over the global batch in one process (relative error 0.5); in the look-alike the ratio is 1.0 (relative error 0.0)
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def all_gather(embeddings):
    """Gather embeddings from every rank, keeping the local ones in the graph."""
    gathered = [torch.ones_like(embeddings) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, embeddings.detach())
    gathered[dist.get_rank()] = embeddings
    return torch.cat(gathered)


def nt_xent(anchors, positives, temperature=0.1):
    anchors, positives = F.normalize(anchors, dim=1), F.normalize(positives, dim=1)
    logits = anchors @ positives.t() / temperature
    return F.cross_entropy(logits, torch.arange(len(anchors)))


class DeCLUTR(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 8))

    def forward(self, anchor_text, positive_text):
        anchors, positives = self.encoder(anchor_text), self.encoder(positive_text)
        if dist.is_initialized() and dist.get_world_size() > 1:
            anchors, positives = all_gather(anchors), all_gather(positives)
        loss = nt_xent(anchors, positives)  # ROOT
        return loss


def main():
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DeCLUTR()  # same initial weights on every rank
    per_rank = 6
    anchors = torch.randn(world * per_rank, 12)  # the global batch, the same on every rank
    positives = anchors + 0.1 * torch.randn(world * per_rank, 12)

    # reference: the same loss over the global batch in one process
    ref_loss = nt_xent(model.encoder(anchors), model.encoder(positives))
    ref_grad = torch.autograd.grad(ref_loss, model.encoder[0].weight)[0]

    ddp_model = DDP(model)
    local = slice(rank * per_rank, (rank + 1) * per_rank)
    loss = ddp_model(anchors[local], positives[local])
    loss.backward()
    grad = model.encoder[0].weight.grad
    if rank == 0:
        ratio = (grad.norm() / ref_grad.norm()).item()
        rel = ((grad - ref_grad).norm() / ref_grad.norm()).item()
        print(f"loss {loss.item():.4f}; DDP gradient / global-batch gradient: {ratio:.3f} (relative error {rel:.3f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
