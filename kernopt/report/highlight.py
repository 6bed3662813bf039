"""Syntax highlighting for the HTML report (pygments; it escapes the text it is given)."""

from __future__ import annotations

import functools

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import CLexer, CppLexer, CudaLexer, DiffLexer, PythonLexer, TextLexer

CSS_CLASS = "hl"
LEXERS: dict[str, type[Lexer]] = {
    ".c": CLexer, ".h": CLexer, ".cc": CppLexer, ".cpp": CppLexer, ".cxx": CppLexer, ".hpp": CppLexer,
    ".cu": CudaLexer, ".cuh": CudaLexer, ".py": PythonLexer,
}


@functools.cache
def _formatter(linenos: bool) -> HtmlFormatter:  # type: ignore[type-arg]
    return HtmlFormatter(cssclass=CSS_CLASS, linenos="inline" if linenos else False, wrapcode=True)


def lexer_for(filename: str) -> Lexer:
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    return LEXERS.get(suffix, TextLexer)(stripnl=False, ensurenl=True)


def source_html(text: str, filename: str) -> Markup:
    """A source file as highlighted, escaped HTML with line numbers."""
    return Markup(highlight(text, lexer_for(filename), _formatter(True)))


def diff_html(text: str) -> Markup:
    """A unified diff as highlighted, escaped HTML (added lines: class gi, removed: gd)."""
    return Markup(highlight(text, DiffLexer(stripnl=False, ensurenl=True), _formatter(False)))


def css() -> str:
    return str(HtmlFormatter(style="default").get_style_defs(f".{CSS_CLASS}"))
