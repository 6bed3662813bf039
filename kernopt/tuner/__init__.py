"""The offline tuner: the policy (policy.py), the C loop model and its dependence analysis (deps.py, cloops.py,
cmacros.py), and the loop transformations and their code generation (the other modules)."""
