"""DETR attention-visualization loop with the PR's fix: the unpacked box coordinates are detached before plt.Rectangle converts them, so numpy gets tensors without a graph.

source: https://github.com/NielsRogge/Transformers-Tutorials/pull/178
kind: lookalike
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
import torch.nn as nn


class DetrForObjectDetection(nn.Module):
    def __init__(self, num_labels=4, num_queries=6, d_model=16):
        super().__init__()
        self.backbone = nn.Conv2d(3, d_model, 8, stride=8)
        self.query_position_embeddings = nn.Embedding(num_queries, d_model)
        self.cross_attn = nn.MultiheadAttention(d_model, 2, batch_first=True)
        self.class_labels_classifier = nn.Linear(d_model, num_labels + 1)
        self.bbox_predictor = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, 4))

    def forward(self, pixel_values):
        feats = self.backbone(pixel_values)
        memory = feats.flatten(2).transpose(1, 2)
        queries = self.query_position_embeddings.weight.unsqueeze(0).expand(pixel_values.size(0), -1, -1)
        hs, dec_attn_weights = self.cross_attn(queries, memory, memory)
        return self.class_labels_classifier(hs), self.bbox_predictor(hs).sigmoid(), dec_attn_weights, feats.shape[-2:]


def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)], dim=1)


def rescale_bboxes(out_bbox, size):
    img_w, img_h = size
    return box_cxcywh_to_xyxy(out_bbox) * torch.tensor([img_w, img_h, img_w, img_h], dtype=torch.float32)


torch.manual_seed(0)
model = DetrForObjectDetection()
pixel_values = torch.rand(1, 3, 64, 64)
logits, pred_boxes, dec_attn_weights, (h, w) = model(pixel_values)
probas = logits.softmax(-1)[0, :, :-1]
keep = probas.max(-1).values > probas.max(-1).values.median()
bboxes_scaled = rescale_bboxes(pred_boxes[0, keep], (64, 64))

fig, axs = plt.subplots(ncols=int(keep.sum()), nrows=2, figsize=(8, 4), squeeze=False)
for idx, ax_i, (xmin, ymin, xmax, ymax) in zip(keep.nonzero(), axs.T, bboxes_scaled):
    xmin, ymin, xmax, ymax = map(lambda x: x.detach(), (xmin, ymin, xmax, ymax))
    ax = ax_i[0]
    ax.imshow(dec_attn_weights[0, idx].view(h, w).detach())
    ax.axis('off')
    ax = ax_i[1]
    ax.imshow(pixel_values[0].permute(1, 2, 0))
    ax.add_patch(plt.Rectangle((xmin, ymin), xmax - xmin, ymax - ymin, fill=False, color='blue', linewidth=3))
    ax.axis('off')
fig.savefig("attention.png")
