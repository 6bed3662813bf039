"""Schedules from isl's scheduler over the dependence model (kernopt/tuner/schedule.py): the models (one nest, a run
of nests as one, what stays outside), the check every schedule passes before code is made from it (a hand-made
illegal order, a parallel mark on a loop that carries a dependence, a local's lifetimes interleaved are refused),
and what the options do to the tree."""

from __future__ import annotations

import islpy as isl

from kernopt.tuner.schedule import PARALLEL, Options, check, legal, models, regions, schedule
from tests.test_codegen import CHAIN, MM_INIT, SWEEP, TRIANGLE, TRIANGLE_BLOCK


def _tree(model_domains: str, partial: str, mark_depth: int | None = None) -> isl.Schedule:
    """A one-band schedule tree over the domains, with a parallel mark above the band where asked."""
    ctx = isl.Context()
    dom = isl.UnionSet.read_from_str(ctx, model_domains)
    node = isl.Schedule.from_domain(dom).get_root().child(0)
    node = node.insert_partial_schedule(isl.MultiUnionPwAff.read_from_str(ctx, partial))
    if mark_depth is not None:
        node = node.insert_mark(isl.Id(f"{PARALLEL}_{mark_depth}", context=ctx))
    return node.get_schedule()


def test_regions_are_runs_of_nests_in_one_function_body() -> None:
    source = "void f(long n, double *restrict x) {\n    for (long i = 0; i < n; i++) x[i] = 0;\n    /* next */\n" \
             "    for (long i = 0; i < n; i++) x[i] += 1;\n    x[0] = 2;\n    for (long i = 0; i < n; i++) x[i] *= 3;\n}\n"
    assert [(name, len(run)) for name, run in regions(source)] == [("f", 2), ("f", 1)]
    assert [m.count for m in models(source)] == [2, 1]


def test_a_pragma_before_the_nest_is_part_of_the_region() -> None:
    source = MM_INIT.replace("    for (long i", "    #pragma omp parallel for\n    for (long i", 1)
    [model] = models(source)
    assert source.encode()[model.start:].startswith(b"#pragma omp parallel for\n    for (long i")
    # a run of nests with their pragmas is still one model
    chain = CHAIN.replace("    for (long i", "    #pragma omp parallel for\n    for (long i")
    [model] = models(chain)
    assert model.count == 2 and chain.encode()[model.start:].startswith(b"#pragma omp parallel for\n")


def test_the_original_order_is_legal_and_a_reversed_reduction_is_not() -> None:
    [model] = models(MM_INIT)
    deps = model.nest.deps
    ctx = deps.get_ctx()
    original = isl.UnionMap.read_from_str(ctx, "[p_n] -> { S0[i, j] -> [i, j, 0, 0]; S1[i, j, k] -> [i, j, k, 1] }")
    assert legal(deps, original)
    backwards = isl.UnionMap.read_from_str(ctx, "[p_n] -> { S0[i, j] -> [i, j, 0, 0]; S1[i, j, k] -> [i, j, -k, 1] }")
    assert not legal(deps, backwards)  # c[i][j] += ... in the reverse order of k: the init runs in the middle
    init_last = isl.UnionMap.read_from_str(ctx, "[p_n] -> { S0[i, j] -> [i, j, p_n, 0]; S1[i, j, k] -> [i, j, k, 1] }")
    assert not legal(deps, init_last)


def test_check_refuses_a_hand_made_illegal_schedule_and_a_wrong_parallel_loop() -> None:
    [model] = models(SWEEP)
    dom = str(model.nest.domains)
    good = _tree(dom, "[p_n] -> [{ S0[t, i, j] -> [(t)] }, { S0[t, i, j] -> [(i)] }, { S0[t, i, j] -> [(j)] }]")
    assert check(model, good)
    interchanged = _tree(dom, "[p_n] -> [{ S0[t, i, j] -> [(i)] }, { S0[t, i, j] -> [(t)] }, { S0[t, i, j] -> [(j)] }]")
    assert not check(model, interchanged)  # i before t reads values of later sweeps
    parallel_t = _tree(dom, "[p_n] -> [{ S0[t, i, j] -> [(t)] }, { S0[t, i, j] -> [(i)] }, { S0[t, i, j] -> [(j)] }]", 0)
    assert not check(model, parallel_t)


def test_a_local_in_a_loop_body_makes_its_block_one_unit() -> None:
    [model] = models(TRIANGLE)
    assert model.coarse and list(model.units) == ["B0"] and model.units["B0"].vars == ["i", "j"]
    assert "B0[v_i, v_j]" in model.domains and isl.UnionMap(model.deps).is_empty()  # c[i][j] once per (i, j)


def test_check_refuses_interleaved_lifetimes_of_a_hoisted_local() -> None:
    [model] = models(TRIANGLE_BLOCK)
    assert not model.coarse and [loc.name for loc in model.locals] == ["s"]
    dom = str(model.nest.domains)
    inner = "[p_n] -> [{ S0[i, j] -> [(i)]; S1[i, j, k] -> [(i)]; S2[i, j] -> [(i)] }, " \
            "{ S0[i, j] -> [(j)]; S1[i, j, k] -> [(j)]; S2[i, j] -> [(j)] }, " \
            "{ S0[i, j] -> [(-1)]; S1[i, j, k] -> [(k)]; S2[i, j] -> [(p_n)] }]"
    assert check(model, _tree(dom, inner))
    # k outside j: every s(i, j) lives at once in the one variable `s`
    k_out = "[p_n] -> [{ S0[i, j] -> [(i)]; S1[i, j, k] -> [(i)]; S2[i, j] -> [(i)] }, " \
            "{ S0[i, j] -> [(-1)]; S1[i, j, k] -> [(k)]; S2[i, j] -> [(p_n)] }, " \
            "{ S0[i, j] -> [(j)]; S1[i, j, k] -> [(j)]; S2[i, j] -> [(j)] }]"
    assert not check(model, _tree(dom, k_out))
    # i parallel with s private: each instance inside one iteration of i
    assert check(model, _tree(dom, inner, 0))


def test_fusion_options_give_one_band_or_several_for_the_chain() -> None:
    [model] = models(CHAIN)
    fused = schedule(model, Options(fusion="whole", parallel=False, stride=False))
    apart = schedule(model, Options(fusion="min", parallel=False, stride=False))
    assert fused is not None and fused.notes[0] == "fuse the 2 nests of k"
    assert apart is not None and apart.notes[0] == "keep apart the 2 nests of k, distributed into 4 loop nests"


def test_tiling_needs_a_permutable_band_and_a_local_keeps_its_loop_untiled() -> None:
    [model] = models(TRIANGLE_BLOCK)
    s = schedule(model, Options(tile=64))
    assert s is not None and s.options.tile_members == 2 and "tile 64x64 over i, j" in s.notes
    [mm] = models(MM_INIT)
    s = schedule(mm, Options(tile=32, parallel=False))
    assert s is not None and "tile 32x32x32 over i, k, j" in s.notes


def test_too_many_statements_is_no_model() -> None:
    body = "".join(f"            x[i * n + j] += {k}.0;\n" for k in range(20))
    source = (f"void f(long n, double *restrict x) {{\n    for (long i = 0; i < n; i++)\n"
              f"        for (long j = 0; j < n; j++) {{\n{body}        }}\n}}\n")
    assert models(source) == []


def test_the_stride_order_is_chosen_per_nest_where_nests_share_loop_names() -> None:
    """The chain's second product runs i, l, j: its l loop is the stride-1 one, though a loop named j is the first
    product's stride-1 loop. Scored over every statement with a loop named j, the second nest kept j innermost."""
    from tests.test_codegen import DERIVED_CHAIN
    [model] = models(DERIVED_CHAIN)
    for fusion in ("max", "min"):
        s = schedule(model, Options(fusion=fusion, parallel=False))
        assert s is not None and "l innermost for stride-1 accesses" in s.notes, s.notes
        assert "j innermost for stride-1 accesses" in s.notes, s.notes
