"""The trace doctor: ``gradtrace.trace()``, ``gradtrace run``'s tracer, ``gradtrace.explain``.

Records what a run does (provenance mode, module/optimizer hooks, session state) and turns an
autograd error or a silent problem into findings. Entry point: :mod:`.tracer`.
"""
