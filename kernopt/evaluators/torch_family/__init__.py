"""The torch family (KernelBench-style tasks: Triton and CUDA-extension candidates): evaluator.py verifies
and times through runner.py (the trusted in-sandbox runner, copied into each work directory), py_gate.py
is the Python static gate, compare.py reads the runner's files, timing.py and build.py are the timing
rounds and the CUDA-extension build."""
