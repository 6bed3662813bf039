"""The file's own macros expanded for the loop analysis (kernopt/tuner/cmacros.py): as the preprocessor would,
line for line, directives, comments and strings untouched."""

from __future__ import annotations

from pathlib import Path

from kernopt.tuner.cmacros import expand
from kernopt.tuner.deps import nests

ROOT = Path(__file__).resolve().parents[1]


def test_function_like_macros_expand_in_code_only() -> None:
    source = """#define IDX(i, j) ((i) * n + (j))
#define AT(i, p) a[IDX(i, p)]
#define N 128
#define SCALE 0.5
/* IDX(i, j) in a comment */
void k(long n, double *restrict a) {
    const char *s = "IDX(1, 2)";
    for (long i = 0; i < N; i++)
        a[IDX(i,
              0)] = AT(i, 1) * SCALE + 1e5 + 0x1F;
}
"""
    out = expand(source)
    assert out.count("\n") == source.count("\n")  # every line on its row
    assert out.splitlines()[:7] == source.splitlines()[:7]  # directives, the comment and the string as they were
    assert "a[((i) * n + (0))\n]" in out and "a[((i) * n + (1))] * 0.5 + 1e5 + 0x1F" in out
    assert "i < N;" in out  # an integer constant stays: the analysis reads it as one


def test_what_is_left_unexpanded() -> None:
    source = """#define STR(x) #x
#define CAT(a, b) a##b
#define SELF(x) SELF(x + 1)
#define TWO(a, b) ((a) + (b))
int f(int x) { return STR(x)[0] + CAT(x, 1) + SELF(x) + TWO(x) + TWO; }
"""
    out = expand(source).splitlines()[-1]
    # stringizing and pasting: not expanded; a macro inside its own expansion stops; a wrong argument count and a
    # function-like name without a call are not uses
    assert "STR(x)" in out and "CAT(x, 1)" in out and "SELF(x + 1)" in out and "TWO(x)" in out and out.endswith("TWO; }")


def test_a_kernel_indexed_through_macros_is_in_the_model() -> None:
    source = (ROOT / "tasks/loops/lu_rowwise/kernel.c").read_text()
    assert not nests(source)[0].known  # `IDX(i, j)` is a call to the analysis
    [nest] = nests(expand(source))
    assert [(lp.var, nest.parallel(lp.index)) for lp in nest.loops] == [
        ("i", False), ("j", False), ("k", False), ("j", True), ("k", False)]  # the U part's columns are independent


HOSTILE = ROOT / "tests" / "data" / "deps_hostile"


def test_only_macros_that_mean_the_same_everywhere_are_expanded() -> None:
    # m1: redefined after an #undef (each use would get the last body); m3: REAL under #ifndef
    m1 = (HOSTILE / "m1.c").read_text()
    assert "AT(i) = a[i] * 0.5;" in expand(m1)
    m3 = expand((HOSTILE / "m3.c").read_text())
    assert "void f(REAL *restrict a" in m3
    # a parameter's name inside the body's literals is left alone; string arguments keep their spaces
    assert "a[i] = ((a[i]) * 0.5f);" in m3 and 'printf("x = %g\\n", (double)("two  spaces"));' in m3
    # a use before the definition is not one
    assert expand("int f(int x) { return TWICE(x); }\n#define TWICE(v) (2 * (v))\n").startswith("int f(int x) { return TWICE(x); }")


def test_comments_inside_arguments_and_bodies() -> None:
    # m2: a // comment in an argument must not swallow the rest once the call is joined onto one line
    m2 = expand((HOSTILE / "m2.c").read_text())
    assert "a[i] = 1.0; b[i] = a[i + 1]\n;" in m2
    [nest] = nests(m2)
    assert [(lp.var, nest.parallel(lp.index)) for lp in nest.loops] == [("i", False)]
    # m4: a comment that runs onto the next line in a #define: the macro is left unexpanded
    assert "a[i] = SCALE * a[i];" in expand((HOSTILE / "m4.c").read_text())


def test_no_define_from_a_comment_no_glued_tokens_and_arguments_expanded_once() -> None:
    # r2_f5: `#define alpha 1.0` inside a comment is no definition (alpha must stay in the product)
    assert "c[i * n + j] += alpha * a[i * n + k]" in expand((HOSTILE / "r2_f5_comment_define.c").read_text())
    # r2_f6: `-NEG_N` with `#define NEG_N -n` is `- -n`, never `--n`
    assert "long m = - -n;" in expand((HOSTILE / "r2_f6_token_paste.c").read_text())
    # a self-referential macro in an argument is expanded once, as gcc does
    assert "return (s + 1);" in expand("#define s (s + 1)\n#define ID(v) v\nint f(void) { return ID(s); }\n")
    # 400 nested uses: expanded as deep as it goes, still valid C (the rest are calls of macros still defined)
    deep = (HOSTILE / "r2_o16_deep_macro_400.c").read_text()
    assert expand(deep).count("\n") == deep.count("\n")
