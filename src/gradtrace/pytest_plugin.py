"""pytest plugin (entry point ``pytest11``): placeholder until the plugin lands.

Importing this module must never import torch.
"""
from __future__ import annotations
