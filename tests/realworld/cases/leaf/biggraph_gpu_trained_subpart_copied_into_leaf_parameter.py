"""PyTorch-BigGraph's GPU trainer copies each sub-partition of an entity's embedding table to the device, trains it there, and copies the result back into the CPU table with `embeddings[subpart_slice].copy_(gpu_embeddings.detach())`; the CPU table is an `nn.Parameter` (a leaf that requires grad), so the in-place copy into a slice of it is refused by autograd after the first bucket.

source: https://github.com/facebookresearch/PyTorch-BigGraph/commit/49360493503809e904a83c6f450661b7eb864185
kind: bug
symptom: crash
verified: a view of a leaf Variable that requires grad is being used in an in-place operation
"""
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.optim import Adagrad

torch.manual_seed(0)
NUM_ENTITIES, DIMENSION, NUM_SUBPARTS, LR = 40, 8, 2, 0.1
my_device = torch.device("cpu")  # stands in for the GPU of the worker process

# the partitioned CPU embedding table and its optimizer, as the parent process holds them
embs = torch.randn(NUM_ENTITIES, DIMENSION) * 0.1
embs.share_memory_()
all_embs = {("user", 0): torch.nn.Parameter(embs)}
partitioned_optimizers = {("user", 0): Adagrad([all_embs["user", 0]], lr=LR)}
size = NUM_ENTITIES // NUM_SUBPARTS
subpart_slices = {("user", 0, s): slice(s * size, (s + 1) * size) for s in range(NUM_SUBPARTS)}
sub_holder = {}


def process_one_subbucket(subpart, edges):
    occurrences = defaultdict(set)
    occurrences["user", 0, subpart].add("lhs")
    for entity_name, part, subpart in occurrences.keys():
        if (entity_name, part, subpart) in sub_holder:
            continue
        embeddings = all_embs[entity_name, part]
        optimizer = partitioned_optimizers[entity_name, part]
        subpart_slice = subpart_slices[entity_name, part, subpart]
        gpu_embeddings = torch.empty((subpart_slice.stop - subpart_slice.start, embeddings.shape[1]),
                                     dtype=torch.float32, device=my_device)
        gpu_embeddings.copy_(embeddings[subpart_slice], non_blocking=True)
        gpu_embeddings = torch.nn.Parameter(gpu_embeddings)
        gpu_optimizer = Adagrad([gpu_embeddings], lr=LR)  # stands in for RowAdagrad
        (cpu_state,) = optimizer.state.values()
        (gpu_state,) = gpu_optimizer.state.values()
        gpu_state["sum"].copy_(cpu_state["sum"][subpart_slice], non_blocking=True)
        sub_holder[entity_name, part, subpart] = (gpu_embeddings, gpu_optimizer)

    # train on the sub-bucket's edges (a dot-product ranking loss against random negatives)
    gpu_embeddings, gpu_optimizer = sub_holder["user", 0, subpart]
    lhs, rhs = gpu_embeddings[edges[:, 0]], gpu_embeddings[edges[:, 1]]
    neg = gpu_embeddings[torch.randint(0, size, (8,))]
    loss = F.relu(1.0 - (lhs * rhs).sum(-1)[:, None] + lhs @ neg.t()).sum()
    gpu_optimizer.zero_grad()
    loss.backward()
    gpu_optimizer.step()

    # copy the trained sub-partition back to the CPU table
    for (entity_name, part, subpart), (gpu_embeddings, gpu_optimizer) in list(sub_holder.items()):
        embeddings = all_embs[entity_name, part]
        optimizer = partitioned_optimizers[entity_name, part]
        subpart_slice = subpart_slices[entity_name, part, subpart]
        embeddings[subpart_slice].copy_(gpu_embeddings.detach(), non_blocking=True)  # ROOT
        del gpu_embeddings
        (cpu_state,) = optimizer.state.values()
        (gpu_state,) = gpu_optimizer.state.values()
        cpu_state["sum"][subpart_slice].copy_(gpu_state["sum"], non_blocking=True)
        del sub_holder[entity_name, part, subpart]
    return loss.item()


before = all_embs["user", 0].detach().clone()
for subpart in range(NUM_SUBPARTS):
    edges = torch.randint(0, size, (16, 2))
    loss = process_one_subbucket(subpart, edges)
    print(f"sub-bucket {subpart}: loss {loss:.3f}")
print(f"CPU table moved {(all_embs['user', 0].detach() - before).abs().max().item():.4f}")
