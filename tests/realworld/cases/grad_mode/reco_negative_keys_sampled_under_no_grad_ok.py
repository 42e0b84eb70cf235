"""ReCo regional contrastive loss: positive and negative keys are built under torch.no_grad on purpose; only the hard queries carry gradients.

source: https://github.com/lorenmt/reco/issues/30
kind: lookalike
verified: after backward the representation layer has a gradient (max abs 0.12) and the keys never required grad; the classifier is trained by the supervised term, as in ReCo (the case first cut it out, leaving it in the optimizer with no gradient)
"""
import torch
import torch.nn as nn
import torch.nn.functional as nn_Func


def compute_reco_loss(rep, label, mask, prob, strong_threshold=0.97, temp=0.5, num_queries=16, num_negatives=32):
    batch_size, num_feat, im_w_, im_h = rep.shape
    num_segments = label.shape[1]
    rep = rep.permute(0, 2, 3, 1)
    seg_feat_all_list, seg_feat_hard_list, seg_num_list, seg_proto_list = [], [], [], []
    for i in range(num_segments):
        valid_pixel_seg = label[:, i] * mask
        if valid_pixel_seg.sum() == 0:
            continue
        prob_seg = prob[:, i, :, :]
        rep_mask_hard = (prob_seg < strong_threshold) * valid_pixel_seg.bool()
        seg_proto_list.append(torch.mean(rep[valid_pixel_seg.bool()], dim=0, keepdim=True))
        seg_feat_all_list.append(rep[valid_pixel_seg.bool()])
        seg_feat_hard_list.append(rep[rep_mask_hard])
        seg_num_list.append(int(valid_pixel_seg.sum().item()))
    reco_loss = torch.tensor(0.0)
    seg_proto = torch.cat(seg_proto_list)
    valid_seg = len(seg_num_list)
    for i in range(valid_seg):
        if len(seg_feat_hard_list[i]) == 0:
            continue
        seg_hard_idx = torch.randint(len(seg_feat_hard_list[i]), size=(num_queries,))
        anchor_feat = seg_feat_hard_list[i][seg_hard_idx]
        with torch.no_grad():
            negative_feat_all = torch.cat(seg_feat_all_list[i + 1:] + seg_feat_all_list[:i])
            negative_index = torch.randint(len(negative_feat_all), size=(num_queries * num_negatives,))
            negative_feat = negative_feat_all[negative_index].reshape(num_queries, num_negatives, num_feat)
            positive_feat = seg_proto[i].unsqueeze(0).unsqueeze(0).repeat(num_queries, 1, 1)
            all_feat = torch.cat((positive_feat, negative_feat), dim=1)
        seg_logits = torch.cosine_similarity(anchor_feat.unsqueeze(1), all_feat, dim=2)
        reco_loss = reco_loss + nn_Func.cross_entropy(seg_logits / temp, torch.zeros(num_queries).long())
    return reco_loss / valid_seg, all_feat


torch.manual_seed(0)
representation = nn.Conv2d(3, 8, 1)
classifier = nn.Conv2d(8, 3, 1)
optimizer = torch.optim.SGD(list(representation.parameters()) + list(classifier.parameters()), lr=0.01)
image = torch.randn(2, 3, 8, 8)
rep = representation(image)
prob = torch.softmax(classifier(rep), dim=1).detach()
label = nn_Func.one_hot(torch.randint(0, 3, (2, 8, 8)), 3).permute(0, 3, 1, 2).float()
mask = torch.ones(2, 8, 8)
loss, all_feat = compute_reco_loss(rep, label, mask, prob)
sup_loss = nn_Func.cross_entropy(classifier(rep), label.argmax(1))
optimizer.zero_grad()
(loss + sup_loss).backward()
optimizer.step()
print(representation.weight.grad.abs().max().item(), all_feat.requires_grad)
