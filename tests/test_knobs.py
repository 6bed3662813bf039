"""Knobs of GPU targets: written into Python/CUDA sources, proposed by the tuner from the task's tunables."""

from __future__ import annotations

import pytest

from kernopt.agent.base import SearchState
from kernopt.candidate import Candidate
from kernopt.evaluators.knobs import KnobError, apply_knobs, declared_knobs
from kernopt.task import load_task
from kernopt.tuner.policy import TunerPolicy, all_moves
from tests.conftest import REPO

VECTOR_ADD = REPO / "tasks" / "triton" / "vector_add"

CUDA_SOLUTION = '''import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#define BLOCK 128   // threads per block
#define ITEMS 1
__global__ void k(float *x) { x[threadIdx.x] = BLOCK * ITEMS; }
"""
NAME = "ext"  # a string knob
'''


def test_assignments_and_defines_are_rewritten_in_place() -> None:
    src = VECTOR_ADD.joinpath("solution.py").read_text()
    out = apply_knobs(src, {"BLOCK_SIZE": "1024", "NUM_WARPS": "8"})
    assert "BLOCK_SIZE = 1024\n" in out and "NUM_WARPS = 8\n" in out
    assert out.replace("1024", "128").replace("NUM_WARPS = 8", "NUM_WARPS = 4") == src  # nothing else changed
    cu = apply_knobs(CUDA_SOLUTION, {"BLOCK": "256", "NAME": "ext2"})
    assert "#define BLOCK 256   // threads per block" in cu and "#define ITEMS 1" in cu and "NAME = 'ext2'" in cu
    assert declared_knobs(CUDA_SOLUTION) >= {"BLOCK", "ITEMS", "NAME"}
    assert apply_knobs(src, {}) == src


def test_an_undeclared_knob_is_an_error() -> None:
    with pytest.raises(KnobError, match="knob TILE is not declared"):
        apply_knobs(VECTOR_ADD.joinpath("solution.py").read_text(), {"TILE": "4"})


def test_tuner_proposes_only_the_tunables_of_gpu_targets() -> None:
    task = load_task(VECTOR_ADD)
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline")
    moves = all_moves(task, base, cores=2)
    assert {m.idea for m in moves} == {"set BLOCK_SIZE=256", "set BLOCK_SIZE=1024", "set BLOCK_SIZE=4096",
                                       "set NUM_WARPS=2", "set NUM_WARPS=8"}
    # a parent whose source no longer declares a knob gets no moves for it
    stripped = base.model_copy(update={"files": {task.kernel: task.baseline_source().replace("NUM_WARPS = 4\n", "")}})
    assert all("NUM_WARPS" not in m.idea for m in all_moves(task, stripped, cores=2))
    state = SearchState(task=task, baseline=base, parent=base, cores=2)
    proposed = TunerPolicy().propose(state, 3)
    assert [c.defines for c in proposed] == [{"BLOCK_SIZE": "256"}, {"BLOCK_SIZE": "1024"}, {"BLOCK_SIZE": "4096"}]
    assert all(c.cflags == [] and c.threads is None for c in proposed)
