"""vissl's SimCLR Info-NCE criterion gathers the embeddings of every rank with classy_vision's `gather_from_all`, a plain `dist.all_gather` into fresh tensors: the gathered copy (the right-hand side of the similarity matrix) carries no gradient, so with more than one rank each rank's embeddings are trained only through their own rows, not through the other ranks' similarities, unlike the single-process loss.

source: https://github.com/facebookresearch/vissl/pull/123
kind: bug
symptom: silent
launch: torchrun --nproc-per-node=2
verified: with 2 ranks the DDP-averaged encoder gradient differs from the gradient of the same loss over the global batch (relative error about 0.5; the other ranks' side of the similarity matrix gives no gradient)
"""
import os
from collections import namedtuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BUFFER_PARAMS_STRUCT = namedtuple("BUFFER_PARAMS_STRUCT", ["effective_batch_size", "world_size", "embedding_dim"])


def is_distributed_training_run():
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_tensors_from_all(tensor):
    if tensor.ndim == 0:
        tensor = tensor.unsqueeze(0)
    if is_distributed_training_run():
        gathered_tensors = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered_tensors, tensor)  # ROOT
    else:
        gathered_tensors = [tensor]
    return gathered_tensors


def gather_from_all(tensor):
    return torch.cat(gather_tensors_from_all(tensor), 0)


class SimclrInfoNCECriterion(nn.Module):
    def __init__(self, buffer_params, temperature: float, rank: int):
        super().__init__()
        self.temperature = temperature
        self.num_pos = 2
        self.buffer_params = buffer_params
        self.dist_rank = rank
        self.precompute_pos_neg_mask()

    def precompute_pos_neg_mask(self):
        # computed once at the beginning of training
        total_images = self.buffer_params.effective_batch_size
        world_size = self.buffer_params.world_size
        batch_size = total_images // world_size
        orig_images = batch_size // self.num_pos
        rank = self.dist_rank

        pos_mask = torch.zeros(batch_size, total_images)
        neg_mask = torch.zeros(batch_size, total_images)
        all_indices = np.arange(total_images)
        pos_members = orig_images * np.arange(self.num_pos)
        orig_members = torch.arange(orig_images)
        for anchor in np.arange(self.num_pos):
            for img_idx in range(orig_images):
                delete_inds = batch_size * rank + img_idx + pos_members
                neg_inds = torch.tensor(np.delete(all_indices, delete_inds)).long()
                neg_mask[anchor * orig_images + img_idx, neg_inds] = 1
            for pos in np.delete(np.arange(self.num_pos), anchor):
                pos_inds = batch_size * rank + pos * orig_images + orig_members
                pos_mask[torch.arange(anchor * orig_images, (anchor + 1) * orig_images).long(), pos_inds.long()] = 1
        self.pos_mask, self.neg_mask = pos_mask, neg_mask

    def forward(self, embedding, embeddings_buffer=None):
        T = self.temperature
        # Step 1: gather all the embeddings.
        if embeddings_buffer is None:
            embeddings_buffer = self.gather_embeddings(embedding)
        # Step 2: matrix multiply and divide by temperature.
        similarity = torch.exp(torch.mm(embedding, embeddings_buffer.t()) / T)
        pos = torch.sum(similarity * self.pos_mask, 1)
        neg = torch.sum(similarity * self.neg_mask, 1)
        return -(torch.mean(torch.log(pos / (pos + neg))))

    @staticmethod
    def gather_embeddings(embedding):
        if dist.is_available() and dist.is_initialized():
            return gather_from_all(embedding)
        return embedding


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    head = nn.Linear(12, 6)  # same initial weights on every rank
    per_rank, dim = 8, 6  # 4 images x 2 views per rank
    views = torch.randn(world, per_rank, 12)  # the global batch, the same on every rank
    buffer_params = BUFFER_PARAMS_STRUCT(per_rank * world, world, dim)

    # reference: the loss of every rank computed in one process, averaged (what DDP's gradient should be)
    all_emb = F.normalize(head(views.reshape(-1, 12)), dim=1)
    ref_loss = sum(SimclrInfoNCECriterion(buffer_params, 0.1, r)(all_emb[r * per_rank:(r + 1) * per_rank], all_emb)
                   for r in range(world)) / world
    ref_grad = torch.autograd.grad(ref_loss, head.weight)[0]

    # distributed training step: each rank embeds its own views; DDP averages the gradients
    criterion = SimclrInfoNCECriterion(buffer_params, 0.1, rank)
    embedding = F.normalize(head(views[rank]), dim=1)
    loss = criterion(embedding)
    loss.backward()
    grad = head.weight.grad.clone()
    dist.all_reduce(grad)
    grad /= world
    if rank == 0:
        rel = ((grad - ref_grad).norm() / ref_grad.norm()).item()
        print(f"loss {loss.item():.4f}; relative error of the averaged encoder gradient vs the global-batch loss: {rel:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
