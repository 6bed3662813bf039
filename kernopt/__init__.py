"""kernopt: a verified code optimizer for HPC and ML kernels."""

__version__ = "0.1.0"
