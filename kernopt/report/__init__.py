"""`kernopt runs report`: one self-contained HTML page for a run or a bench (CSS, SVG and JS inline;
nothing fetched, no server). Every text that comes from a run (sources, ideas, model answers, logs)
is escaped by the templates or by pygments; the page's only script is our own, pinned by a
Content-Security-Policy hash."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import time
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from kernopt import __version__
from kernopt.errors import UserError
from kernopt.report.highlight import css as pygments_css

__all__ = ["write_report", "render_run", "render_bench", "find_target"]


@functools.cache
def _env() -> Environment:
    return Environment(loader=PackageLoader("kernopt.report", "templates"), autoescape=select_autoescape(default=True, default_for_string=True),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _asset(name: str) -> str:
    return (resources.files("kernopt.report") / "assets" / name).read_text()


def _page(template: str, title: str, **ctx: Any) -> str:
    js = _asset("report.js")
    if "</" in js:  # the script is inlined as is: it must not be able to end its own element
        raise AssertionError("report.js may not contain '</'")
    # page.html.j2 holds <script>{{ js }}</script>, nothing around it: the CSP hash covers exactly js
    digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    return _env().get_template(template).render(
        title=title, css=Markup(_asset("report.css") + "\n" + pygments_css()), js=Markup(js), script_hash=f"sha256-{digest}",
        version=__version__, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"), **ctx)


def render_run(run_dir: Path) -> str:
    from kernopt.report.data import load_run
    from kernopt.report.run_page import run_context
    from kernopt.runs import RunStore

    run = load_run(RunStore.open(run_dir))
    ctx = run_context(run)
    return _page("run.html.j2", f"kernopt: {ctx['header']['task']} ({run.store.run_id})", run=ctx)


def render_bench(bench_dir: Path) -> str:
    from kernopt.report.bench_page import bench_context

    ctx = bench_context(bench_dir)
    return _page("bench.html.j2", f"kernopt bench: {ctx['name']}", bench=ctx)


def find_target(ref: str | Path, runs_dir: Path = Path("runs"), benches_dir: Path = Path("benches")) -> tuple[str, Path]:
    """("run" | "bench", directory) for a path, a run id under runs_dir or a bench name under benches_dir."""
    candidates = [Path(ref)] + ([runs_dir / str(ref), benches_dir / str(ref)] if not Path(ref).is_absolute() else [])
    root = next((p for p in candidates if p.exists()), None)
    if root is None:
        looked = ", ".join(dict.fromkeys(str(p) for p in candidates))
        raise UserError(f"no run or bench {str(ref)!r} (looked for {looked}); see `kernopt runs list`")
    if not root.is_dir():
        raise UserError(f"{root} is not a directory (give a run directory or a bench directory)")
    if not os.access(root, os.R_OK | os.X_OK):
        raise UserError(f"{root}: directory is not readable")
    if (root / "bench.json").is_file():
        return "bench", root
    if (root / "config.json").is_file():
        return "run", root
    raise UserError(f"{root} is neither a kernopt run directory (no config.json) nor a bench directory (no bench.json)")


def write_report(path_or_id: str | Path, out: Path | None = None, runs_dir: Path = Path("runs"),
                 benches_dir: Path = Path("benches")) -> Path:
    """Render the report of a run or a bench; write it to `out` (default <dir>/report.html). Returns the path."""
    kind, root = find_target(path_or_id, runs_dir, benches_dir)
    html = render_bench(root) if kind == "bench" else render_run(root)
    out = out or root / "report.html"
    if out.is_dir():
        raise UserError(f"{out} is a directory; give a file name for the report (-o {out / 'report.html'})")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(html, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise UserError(f"cannot write the report to {out}: {e.strerror or e}") from None
    return out
