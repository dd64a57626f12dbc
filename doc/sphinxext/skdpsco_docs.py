"""Sphinx helpers for the skdpsco documentation.

* ``.. markdown-include:: path`` renders a restricted Markdown subset (headings,
  paragraphs, bullet lists, pipe tables, inline code, bold and italics) as
  reStructuredText, so that the Markdown benchmark reports in ``doc/benchmarks/``
  and sections of ``README.md`` are shown with their numbers exactly as written,
  without a Markdown parser dependency. ``:start-after:`` and ``:end-before:``
  select a part of the file; a marker that is not found is an error.
* API pages list skdpsco's own members, not those inherited from scikit-learn.
* :func:`time_examples` is a sphinx-gallery ``reset_modules`` callable that
  measures the wall time of every executed example, and
  :func:`check_example_times` (connected to ``build-finished``) fails the build
  when an example took longer than ``skdpsco_example_time_budget`` seconds,
  also reading the times sphinx-gallery cached for examples it did not re-run.
"""

import json
import re
import time
from pathlib import Path

from docutils.parsers.rst import Directive, directives
from sphinx.util import logging

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Markdown subset -> reStructuredText
# ---------------------------------------------------------------------------

_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^([*+-])\s+(.*)$")
_INLINE = re.compile(
    r"(?P<code>`+)(?P<codetext>.+?)(?P=code)"
    r"|\*\*(?P<bold>[^*\s](?:.*?[^*\s])?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*?[^*\s])?)\*(?![\w*])"
    r"|\[(?P<linktext>[^\]]+)\]\((?P<url>[^)\s]+)\)"
)
# Characters that may touch inline markup without an escaped space (docutils'
# inline markup recognition rules, ASCII subset).
_OPENERS = "-:/'\"<([{"
_CLOSERS = "-.,:;!?\\/'\")]}>"
_RST_SPECIAL = re.compile(r"([\\*_`|<>\[\]])")


def _escape(text):
    return _RST_SPECIAL.sub(r"\\\1", text)


def _inline(text):
    """Convert the inline markup of one Markdown line or cell to RST."""
    out = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[pos : match.start()]))
        if match.group("code"):
            body = match.group("codetext").strip()
            piece = f"``{body}``" if "``" not in body else f":literal:`{_escape(body)}`"
        elif match.group("bold") is not None:
            piece = f"**{_escape(match.group('bold'))}**"
        elif match.group("em") is not None:
            piece = f"*{_escape(match.group('em'))}*"
        else:
            piece = f"`{_escape(match.group('linktext'))} <{match.group('url')}>`__"
        # Inline markup must be separated from adjacent text; "\ " is an
        # escaped space that renders as nothing.
        before = text[match.start() - 1] if match.start() > 0 else " "
        after = text[match.end()] if match.end() < len(text) else " "
        if not (before.isspace() or before in _OPENERS):
            piece = "\\ " + piece
        if not (after.isspace() or after in _CLOSERS):
            piece = piece + "\\ "
        out.append(piece)
        pos = match.end()
    out.append(_escape(text[pos:]))
    return "".join(out)


def _split_row(line):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)]


def _table(rows):
    header, body = rows[0], rows[2:]
    width = len(_split_row(header))
    out = [".. list-table::", "   :header-rows: 1", "   :class: skdpsco-md-table", ""]
    for row in [header, *body]:
        cells = _split_row(row)
        cells = (cells + [""] * width)[:width]
        for i, cell in enumerate(cells):
            bullet = "   * -" if i == 0 else "     -"
            out.append(f"{bullet} {_inline(cell)}".rstrip())
    out.append("")
    return out


def markdown_to_rst(text):
    """Convert the Markdown subset used by the benchmark reports to RST lines."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("```"):
            fence_end = i + 1
            while fence_end < len(lines) and not lines[fence_end].strip().startswith(
                "```"
            ):
                fence_end += 1
            out += ["::", ""] + ["   " + x for x in lines[i + 1 : fence_end]] + [""]
            i = fence_end + 1
            continue
        heading = _HEADING.match(stripped)
        if heading:
            out += [f".. rubric:: {_inline(heading.group(2))}", ""]
            i += 1
            continue
        if (
            stripped.startswith("|")
            and i + 1 < len(lines)
            and _TABLE_RULE.match(lines[i + 1].strip())
        ):
            end = i + 2
            while end < len(lines) and lines[end].strip().startswith("|"):
                end += 1
            out += _table([x.strip() for x in lines[i:end]])
            i = end
            continue
        bullet = _BULLET.match(stripped)
        if bullet and not _TABLE_RULE.match(stripped):
            item = [bullet.group(2)]
            i += 1
            while (
                i < len(lines)
                and lines[i].strip()
                and lines[i].startswith((" ", "\t"))
                and not _BULLET.match(lines[i].strip())
            ):
                item.append(lines[i].strip())
                i += 1
            out.append("* " + _inline(item[0]))
            out += ["  " + _inline(x) for x in item[1:]]
            if i >= len(lines) or not _BULLET.match(lines[i].strip()):
                out.append("")
            continue
        paragraph = []
        while i < len(lines):
            cur = lines[i].strip()
            if (
                not cur
                or _HEADING.match(cur)
                or cur.startswith(("|", "```"))
                or (_BULLET.match(cur) and paragraph)
            ):
                break
            paragraph.append(cur)
            i += 1
        out += [_inline(x) for x in paragraph] + [""]
    return out


class MarkdownInclude(Directive):
    """Include a Markdown file (or part of it) rendered as reStructuredText."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {
        "start-after": directives.unchanged_required,
        "end-before": directives.unchanged_required,
    }

    def run(self):
        env = self.state.document.settings.env
        rel_path, path = env.relfn2path(self.arguments[0])
        env.note_dependency(rel_path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise self.error(f"markdown-include: cannot read {path}: {exc}") from exc
        start = self.options.get("start-after")
        if start is not None:
            if start not in text:
                raise self.error(f"markdown-include: {start!r} not found in {path}")
            text = text.split(start, 1)[1]
        end = self.options.get("end-before")
        if end is not None:
            if end not in text:
                raise self.error(f"markdown-include: {end!r} not found in {path}")
            text = text.split(end, 1)[0]
        self.state_machine.insert_input(markdown_to_rst(text), path)
        return []


# ---------------------------------------------------------------------------
# Per-example time budget for the sphinx-gallery examples
# ---------------------------------------------------------------------------

_STARTED = {}
_MEASURED = {}


def time_examples(gallery_conf, fname, when):
    """sphinx-gallery ``reset_modules`` hook: wall time of each executed example."""
    if fname is None:
        return
    name = Path(fname).name
    if when == "before":
        _STARTED[name] = time.perf_counter()
    elif name in _STARTED:
        _MEASURED[name] = time.perf_counter() - _STARTED.pop(name)


def _cached_time(gallery_dir, name):
    """The time sphinx-gallery recorded for an example it ran in an earlier build."""
    cost_file = gallery_dir / (Path(name).stem + ".cost.json")
    try:
        return float(json.loads(cost_file.read_text(encoding="utf-8"))["time"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def check_example_times(app, exception):
    """Fail the build if an example ran longer than the configured budget."""
    if exception is not None:
        return
    budget = float(app.config.skdpsco_example_time_budget)
    conf = app.config.sphinx_gallery_conf
    src_root = Path(app.srcdir)
    too_slow = []
    for examples_dir, gallery_dir in zip(
        conf["examples_dirs"], conf["gallery_dirs"], strict=True
    ):
        pattern = re.compile(conf.get("filename_pattern", r"/plot"))
        gallery_path = src_root / gallery_dir
        for src in sorted((src_root / examples_dir).glob("*.py")):
            if not pattern.search(src.as_posix()):
                continue  # not executed by sphinx-gallery
            seconds = max(
                _MEASURED.get(src.name, 0.0), _cached_time(gallery_path, src.name)
            )
            logger.info(f"example {src.name}: {seconds:.1f} s (budget {budget:g} s)")
            if seconds > budget:
                too_slow.append(src.name)
                logger.warning(
                    f"example {src.name} ran {seconds:.1f} s, over the "
                    f"{budget:g} s budget (skdpsco_example_time_budget)",
                    type="skdpsco",
                    subtype="example_time",
                )
    if too_slow:
        app.statuscode = 1  # fail even without -W


# ---------------------------------------------------------------------------
# API pages: document skdpsco's own members only
# ---------------------------------------------------------------------------


def skip_sklearn_members(app, what, name, obj, skip, options):
    """Leave out members inherited from scikit-learn (``get_params``, ``score``,
    ``set_fit_request``, ...): they are documented by scikit-learn, and their
    docstrings refer to labels of scikit-learn's own documentation."""
    if what in ("class", "exception"):
        module = getattr(obj, "__module__", None) or ""
        if module == "sklearn" or module.startswith("sklearn."):
            return True
    return None


def setup(app):
    app.add_directive("markdown-include", MarkdownInclude)
    app.connect("autodoc-skip-member", skip_sklearn_members)
    app.add_config_value("skdpsco_example_time_budget", 60, "env", types=(int, float))
    app.connect("build-finished", check_example_times)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
