"""Yolact_minimal web service with the maintainer's answer applied: the network runs under torch.no_grad(), as in detect.py, so the detections carry no graph and draw_img can convert them with numpy.

source: https://github.com/feiyuhuahuo/Yolact_minimal/issues/9
kind: lookalike
"""
import argparse

import numpy as np
import torch
import torch.nn as nn


class Yolact(nn.Module):
    def __init__(self, num_classes=5, num_priors=20):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.conf = nn.Linear(128, num_priors * num_classes)
        self.loc = nn.Linear(128, num_priors * 4)
        self.num_classes, self.num_priors = num_classes, num_priors

    def forward(self, img):
        f = self.backbone(img)
        conf = self.conf(f).view(-1, self.num_priors, self.num_classes).softmax(-1)
        boxes = self.loc(f).view(-1, self.num_priors, 4).sigmoid()
        return conf, boxes


def nms(conf, boxes):
    scores, class_ids = conf[0].max(-1)
    keep = scores.argsort(descending=True)
    return class_ids[keep], scores[keep], boxes[0][keep]


def draw_img(results, img_origin, args):
    class_ids, classes, boxes = [x[:args.visual_top_k].cpu().numpy() for x in results[:3]]
    img_numpy = img_origin.copy()
    for cid, score, (x1, y1, x2, y2) in zip(class_ids, classes, boxes):
        h, w = img_numpy.shape[:2]
        img_numpy[int(y1 * (h - 1)), int(x1 * (w - 1))] = 255
    return img_numpy


def process(net, img_origin, args):
    img_tensor = torch.from_numpy(img_origin).float().permute(2, 0, 1)[None] / 255.
    with torch.no_grad():
        net_outs = net(img_tensor)
    results = nms(*net_outs)
    return draw_img(results, img_origin, args)


parser = argparse.ArgumentParser()
parser.add_argument('--visual_top_k', default=5, type=int)
args = parser.parse_args([])
torch.manual_seed(0)
net = Yolact()
net.eval()
img_origin = (np.random.rand(32, 32, 3) * 255).astype(np.uint8)
img_numpy = process(net, img_origin, args)
print(img_numpy.shape)
