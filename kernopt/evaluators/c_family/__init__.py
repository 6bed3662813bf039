"""The C family (openmp, mpi, mpi+openmp, serial c/c++, cuda-c): evaluator.py builds, verifies and times
under the trusted monitor (c/monitor.c; c/driver.c is the measured program's side), static_gate.py and
cuda_gate.py are the source and object gates, race.py the ThreadSanitizer check, compare.py reads the
monitor's report and compares outputs, cuda_c.py and nvcc.py the CUDA-C variant."""
