"""Callbacks for the trainers where training already lives.

``gradtrace.integrations.lightning.GradtraceCallback`` (Lightning, ``lightning.pytorch`` or
``pytorch_lightning``) and ``gradtrace.integrations.transformers.GradtraceCallback`` (the
Hugging Face ``Trainer``). This package imports neither library; each submodule imports its
own on first use.
"""
from __future__ import annotations

__all__: list[str] = []
