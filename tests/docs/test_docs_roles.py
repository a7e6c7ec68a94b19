"""Sphinx roles in docstrings (:class:`~x.Y`, :func:, :meth:, ...) render as links or code.

The griffe extension ``docs/_hooks/sphinx_roles.py`` rewrites them while the site
builds (about 3 s); these tests check the conversion on samples and on the built
site.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_only(
    reason="documentation and its examples: no device-specific computation"
)

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "_hooks" / "sphinx_roles.py"

# a role as it appears in HTML when nothing converted it: :class:<code>...</code>
LITERAL_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):(?:<code>|`)")


def _load_hook():
    spec = importlib.util.spec_from_file_location("sphinx_roles", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


roles = _load_hook()


@pytest.mark.parametrize(
    ("role", "shown", "identifier"),
    [
        (":class:`~pnsolve.kernels.KernelMatrix`", "KernelMatrix", "pnsolve.kernels.KernelMatrix"),
        (":func:`pnsolve.cg`", "pnsolve.cg", "pnsolve.cg"),
        (":meth:`~pnsolve.gp.IterGP.fit`", "fit", "pnsolve.gp.IterGP.fit"),
        (":py:attr:`var`", "var", "var"),
        (":exc:`ValueError`", "ValueError", "ValueError"),
        (":mod:`pnsolve.iterative`", "pnsolve.iterative", "pnsolve.iterative"),
        (":data:`the default <pnsolve.x.DEFAULT>`", "the default", "pnsolve.x.DEFAULT"),
    ],
)
def test_role_becomes_optional_autoref(role, shown, identifier):
    out = roles.convert_roles(f"See {role} here.")
    assert out == (
        f'See <autoref identifier="{identifier}" optional><code>{shown}</code></autoref> here.'
    )


def test_resolver_result_is_the_identifier_and_bang_suppresses_the_link():
    out = roles.convert_roles(
        ":meth:`solve` and :class:`!NotLinked`", lambda target, role: f"pkg.Cls.{target}"
    )
    assert 'identifier="pkg.Cls.solve"' in out
    assert out.endswith("and <code>NotLinked</code>")


def test_roles_wrapping_lines_convert_and_code_is_left_alone():
    text = (
        "Uses :class:`~pnsolve.linops.\n   KernelMatrix` inside.\n\n"
        ">>> x = ':class:`Kept`'\n\n"
        "```python\n:func:`kept_too`\n```\n"
        "``:func:`literal``` and :func:`converted`"
    )
    out = roles.convert_roles(text)
    assert "<code>KernelMatrix</code>" in out
    assert ">>> x = ':class:`Kept`'" in out and ":func:`kept_too`" in out
    assert "``:func:`literal```" in out
    assert '<autoref identifier="converted" optional>' in out


def test_every_role_in_pnsolve_docstrings_is_converted():
    griffe = pytest.importorskip("griffe")
    pkg = griffe.load("pnsolve", search_paths=[str(ROOT)], extensions=None)
    seen = 0
    for obj in roles._walk(pkg):
        if obj.docstring is None:
            continue
        text = obj.docstring.value
        seen += len(roles.ROLE_RE.findall(text))
        out = roles.convert_roles(text, roles.make_resolver(obj, pkg.modules_collection))
        spans = roles._code_line_spans(out)
        left = [
            m for m in roles.ROLE_RE.finditer(out) if not any(a <= m.start() < b for a, b in spans)
        ]
        assert not left, (obj.path, [m.group(0) for m in left])
    assert seen > 100  # the docstrings do use roles: the test is not vacuous


def test_built_site_has_no_literal_roles(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    found = {
        str(p.relative_to(site)): LITERAL_ROLE.findall(p.read_text(encoding="utf-8")) for p in pages
    }
    assert not {k: v for k, v in found.items() if v}
    assert "<autoref" not in "".join(p.read_text(encoding="utf-8") for p in pages)


def test_roles_link_to_rendered_api_objects(site):
    gp = (site / "api" / "gp" / "index.html").read_text(encoding="utf-8")
    # :class:`~pnsolve.kernels.KernelMatrix` -> a link to the kernels page showing it
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="../kernels/#pnsolve\.kernels\.'
        r'KernelMatrix"[^>]*><code>KernelMatrix</code></a>',
        gp,
    )
    links = sum(
        len(re.findall(r'class="autorefs autorefs-internal"', p.read_text(encoding="utf-8")))
        for p in (site / "api").rglob("*.html")
    )
    assert links > 300


@pytest.mark.parametrize(
    ("page", "anchor"),
    [
        ("randomized", "pnsolve.randomized.ulisse.ulisse"),
        ("randomized", "pnsolve.randomized.ulisse_belief.ulisse_belief"),
        ("solvers", "pnsolve.solvers.problinsolve.problinsolve"),
        ("krylov", "pnsolve.krylov.reorthogonalize.reorthogonalize"),
        ("datasets", "pnsolve.datasets.gp_draws.gp_draws"),
    ],
)
def test_functions_named_like_their_module_are_rendered(site, page, anchor):
    html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
    assert f'id="{anchor}"' in html
