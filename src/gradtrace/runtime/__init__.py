"""What gradtrace does while the user's program runs, one package per product.

- the shared core, the modules right here: :mod:`.frames` (the user's frame), :mod:`.build`
  (findings), :mod:`.catalogue` (PyTorch errors gradtrace recognises, torch-free),
  :mod:`.fuse` (static and run-time findings ranked together), :mod:`.render` (text),
  :mod:`.pace` (how often to record), :mod:`.loss_listeners`;
- :mod:`.trace`: ``gradtrace.trace()``, ``gradtrace.explain``, ``%load_ext gradtrace``;
- :mod:`.watch`: ``gradtrace.watch``, ``gradtrace.compare_grad_modes``;
- :mod:`.distributed`: one merged report for every rank of a ``torchrun`` launch;
- on top: :mod:`.runner` (``gradtrace run``) and :mod:`.graph` (``gradtrace.graph``).

A product imports the core and nothing of another product (distributed extends a trace
session); ``tests/test_layout.py`` holds this.
"""
