"""Importing gradtrace (and its integrations package) never imports a training library."""
from __future__ import annotations

import os
import subprocess
import sys


def test_import_gradtrace_does_not_import_trainer_libraries() -> None:
    code = ("import sys, gradtrace, gradtrace.integrations, gradtrace.integrations._common\n"
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'lightning_fabric',"
            " 'transformers', 'accelerate', 'torch') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
