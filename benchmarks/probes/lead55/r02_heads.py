"""Helpers that adapt a pretrained backbone to a new task."""
import torch.nn as nn


def adapt_head(model, num_classes):
    in_features = model.fc.in_features
    model.fc = nn.Linear(in_features, num_classes)  # ROOT
    return model
