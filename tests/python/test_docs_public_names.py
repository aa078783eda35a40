"""Every public Python name is in the documentation site.

Compares the package's public names -- every name in ``gpudyn.__all__`` and
``gpudyn.numba.__all__``, and each public class's public methods, properties and
attributes -- with the Python objects of the built site's inventory
(build/docs/html/objects.inv, written by ``sphinx-build``; .ci/docs.sh builds it and
runs this file).  Deprecated aliases (their docstring starts with "Deprecated:", see
gpudyn/_deprecated.py) are not documented and not expected.  Skips when the site
has not been built.

Also checks the device API page against the headers: every public class of the
device headers (Doxygen's XML, build/docs/doxygen/xml) is on it, and no
implementation namespace is.
"""

from __future__ import annotations

import inspect
import os
import re
import types
import xml.etree.ElementTree as ET
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HTML = os.path.join(ROOT, "build", "docs", "html")
INVENTORY = os.path.join(HTML, "objects.inv")
DOXYGEN_XML = os.path.join(ROOT, "build", "docs", "doxygen", "xml")

pytestmark = pytest.mark.skipif(
    not os.path.exists(INVENTORY),
    reason="the docs site is not built (bash .ci/docs.sh, or sphinx-build -W -b html docs build/docs/html)",
)


def _stale_note() -> str:
    """A hint for a failure: the site is older than a source it documents."""
    built = os.path.getmtime(INVENTORY)
    for folder in (os.path.join(ROOT, "python", "gpudyn"), os.path.join(ROOT, "include", "gpudyn")):
        for dirpath, _, files in os.walk(folder):
            for f in files:
                if f.endswith((".py", ".h", ".cuh")) and os.path.getmtime(os.path.join(dirpath, f)) > built:
                    return (
                        f" (the site in build/docs/html is older than {os.path.relpath(os.path.join(dirpath, f), ROOT)}:"
                        " rebuild it with bash .ci/docs.sh after reinstalling the package)"
                    )
    return ""


def _inventory() -> dict[str, set[str]]:
    """{domain:role: names} of objects.inv (Sphinx's inventory format 2, read here so
    the check needs no Sphinx: four header lines, then zlib-compressed lines
    "name domain:role priority uri dispname")."""
    with open(INVENTORY, "rb") as f:
        header = [f.readline() for _ in range(4)]
        assert header[0].startswith(b"# Sphinx inventory version 2"), header[0]
        body = zlib.decompress(f.read()).decode("utf-8")
    out: dict[str, set[str]] = {}
    for line in body.splitlines():
        m = re.match(r"(.+?)\s+(\S+:\S+)\s+(-?\d+)\s+(\S*)\s+(.*)", line.rstrip())
        if m:
            out.setdefault(m.group(2), set()).add(m.group(1))
    return out


def _deprecated(obj) -> bool:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.lstrip().startswith("Deprecated:")


def _public_names() -> list[str]:
    import gpudyn
    import gpudyn.numba

    names: list[str] = []
    for module in (gpudyn, gpudyn.numba):
        for name in module.__all__:
            if name.startswith("_"):
                continue  # __version__: shown on the site's title, not an API entry
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or _deprecated(obj):
                continue
            names.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for member, value in vars_with_bases(obj):
                    if member.startswith("_") or _deprecated(value):
                        continue
                    names.append(f"{module.__name__}.{name}.{member}")
    return names


def vars_with_bases(cls) -> list[tuple[str, object]]:
    """Public members defined by `cls` or by its gpudyn base classes (not by object or
    the Exception hierarchy), as autodoc's inherited-members documents them."""
    seen: dict[str, object] = {}
    for klass in cls.__mro__:
        if klass is object or not (klass.__module__ or "").startswith("gpudyn"):
            continue
        for member, value in vars(klass).items():
            seen.setdefault(member, value)
    return list(seen.items())


def test_every_public_python_name_is_documented():
    inv = _inventory()
    documented = set().union(*(v for k, v in inv.items() if k.startswith("py:")))
    missing = [n for n in _public_names() if n not in documented]
    assert not missing, (
        "public names missing from the docs (docs/reference/python.md documents "
        "gpudyn.__all__ with autodoc; a name here lacks an entry): " + ", ".join(missing) + _stale_note()
    )


def test_no_deprecated_alias_is_documented():
    import gpudyn

    inv = _inventory()
    documented = set().union(*(v for k, v in inv.items() if k.startswith("py:")))
    listed = []
    for name in gpudyn.__all__:
        obj = getattr(gpudyn, name)
        if inspect.isclass(obj):
            for member, value in vars_with_bases(obj):
                if _deprecated(value) and f"gpudyn.{name}.{member}" in documented:
                    listed.append(f"gpudyn.{name}.{member}")
    assert not listed, "deprecated aliases documented as API: " + ", ".join(listed)


def _public_device_classes() -> list[str]:
    """Classes the device headers define at namespace scope in gpudyn (or
    gpudyn::experimental), as Doxygen lists them per file; template specializations
    and forward declarations aside."""
    index = ET.parse(os.path.join(DOXYGEN_XML, "index.xml")).getroot()
    out = []
    for c in index.findall("compound"):
        if c.get("kind") != "file" or not c.findtext("name").endswith(".cuh"):
            continue
        fd = ET.parse(os.path.join(DOXYGEN_XML, c.get("refid") + ".xml")).getroot().find("compounddef")
        for inner in fd.findall("innerclass"):
            name = inner.text or ""
            if "<" in name or inner.get("prot") != "public":
                continue
            if name.rsplit("::", 1)[0] in ("gpudyn", "gpudyn::experimental"):
                out.append(name)
    return out


def test_every_public_device_class_is_documented():
    inv = _inventory()
    documented = inv.get("cpp:class", set()) | inv.get("cpp:struct", set())
    classes = _public_device_classes()
    assert {
        "gpudyn::heap_ref",
        "gpudyn::ggarray_ref",
        "gpudyn::rw_heap_ref",
        "gpudyn::warp_heap_ref",
        "gpudyn::static_array_ref",
        "gpudyn::vmm_array_ref",
        "gpudyn::push_storage",
    } <= set(classes)
    missing = [c for c in classes if c not in documented]
    assert not missing, (
        "device classes missing from docs/reference/device_api.md: " + ", ".join(missing) + _stale_note()
    )


def test_device_api_documents_members_and_hides_internals():
    inv = _inventory()
    functions = inv.get("cpp:function", set())
    for member in (
        "gpudyn::heap_ref::malloc",
        "gpudyn::heap_ref::free",
        "gpudyn::ggarray_ref::push_back",
        "gpudyn::warp_heap_ref::start",
        "gpudyn::warp_heap::alloc",
        "gpudyn::rw_heap_ref::get_page",
        "gpudyn::static_array_ref::push_back",
        "gpudyn::static_array_ref::span",
    ):
        assert member in functions, member
    every = set().union(*(v for k, v in inv.items() if k.startswith("cpp:")))
    leaked = sorted(n for n in every if "detail::" in n)
    assert not leaked, "implementation namespaces on the device API page: " + ", ".join(leaked[:10])
    # a member's comment is its documentation
    with open(os.path.join(HTML, "reference", "device_api.html"), encoding="utf-8") as f:
        page = f.read()
    assert "Any thread, any time" in page


def test_c_api_documents_every_function():
    inv = _inventory()
    functions = inv.get("c:function", set())
    declared = set()
    for header in sorted(os.listdir(os.path.join(ROOT, "include", "gpudyn"))):
        if header.endswith(".h"):
            with open(os.path.join(ROOT, "include", "gpudyn", header), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("GPUDYN_API "):
                        declared.add(line.split("(")[0].split()[-1].lstrip("*"))
    assert len(declared) > 50
    missing = sorted(declared - functions)
    assert not missing, "C functions missing from docs/reference/c_api.md: " + ", ".join(missing) + _stale_note()
