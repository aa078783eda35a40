"""``gpudyn-header``: one device header's public API, from Doxygen's XML, through Breathe.

Breathe's ``doxygenfile`` renders a C++ header's namespaces whole (every header opens
``namespace gpudyn { inline namespace v0 {``), so eight headers would declare the
namespaces, and many members, eight times.  This directive renders, for one header,
its file comment and then, in header order, each public class and each namespace-scope
function, enum, variable and type alias that the header declares in ``gpudyn``
(or ``gpudyn::experimental``; the inline ``v0`` is hidden, docs/doxygen_filter.sh), each with the Breathe directive made for it.
Implementation namespaces are left out by docs/Doxyfile (EXCLUDE_SYMBOLS).

    ```{eval-rst}
    .. gpudyn-header:: gpudyn/heap.cuh
    ```
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

PUBLIC_NAMESPACES = ("gpudyn", "gpudyn::experimental")
_KIND_DIRECTIVE = {"enum": "doxygenenum", "variable": "doxygenvariable", "typedef": "doxygentypedef"}


def _xml_dir(app) -> str:
    return app.config.breathe_projects[app.config.breathe_default_project]


def _parse(xml_dir: str, refid: str) -> ET.Element:
    return ET.parse(os.path.join(xml_dir, refid + ".xml")).getroot().find("compounddef")


def header_entities(xml_dir: str, header: str) -> list[tuple[int, str, str, ET.Element]]:
    """(line, kind, qualified name, element) of the public entities `header` declares,
    in header order.  kind: class, struct, function, enum, variable, typedef."""
    index = ET.parse(os.path.join(xml_dir, "index.xml")).getroot()
    files = {c.get("refid"): c.findtext("name") for c in index.findall("compound") if c.get("kind") == "file"}
    file_def = None
    for refid in files:
        fd = _parse(xml_dir, refid)
        loc = fd.find("location")
        if loc is not None and loc.get("file", "").endswith(header):
            file_def = fd
            break
    if file_def is None:
        raise ValueError(f"gpudyn-header: {header} is not in Doxygen's XML ({xml_dir})")
    out: list[tuple[int, str, str, ET.Element]] = []
    for inner in file_def.findall("innerclass"):
        name = inner.text or ""
        scope = _scope(name)
        if scope not in PUBLIC_NAMESPACES or inner.get("prot") != "public":
            continue  # nested classes render inside their parent
        cd = _parse(xml_dir, inner.get("refid"))
        line = int(cd.find("location").get("line", "0"))
        out.append((line, cd.get("kind"), name, cd))
    for ns in PUBLIC_NAMESPACES:
        refid = "namespace" + ns.replace("_", "__").replace("::", "_1_1")
        if not os.path.exists(os.path.join(xml_dir, refid + ".xml")):
            continue
        nd = _parse(xml_dir, refid)
        for sec in nd.findall("sectiondef"):
            for m in sec.findall("memberdef"):
                loc = m.find("location")
                if loc is None or not loc.get("file", "").endswith(header):
                    continue
                kind = m.get("kind")
                if kind not in ("function", "enum", "variable", "typedef"):
                    continue
                out.append((int(loc.get("line", "0")), kind, ns + "::" + m.findtext("name"), m))
    out.sort(key=lambda e: e[0])
    return out


def _scope(name: str) -> str:
    """The enclosing scope of a qualified name (template arguments may hold '::')."""
    depth, cut = 0, -1
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            cut = i
    return name[:cut] if cut >= 0 else ""


def _member_names(cd: ET.Element) -> list[tuple[str, str]]:
    return [(m.get("id"), m.findtext("name")) for m in cd.iter("memberdef") if m.get("prot") == "public"]


def _member_ids(xml_dir: str, cd: ET.Element) -> set[str]:
    """Ids of the members a class renders, its public nested classes' included."""
    ids = {i for i, _ in _member_names(cd)}
    for inner in cd.findall("innerclass"):
        if inner.get("prot") == "public" and os.path.exists(os.path.join(xml_dir, inner.get("refid") + ".xml")):
            ids |= _member_ids(xml_dir, _parse(xml_dir, inner.get("refid")))
    return ids


def _function_signature(m: ET.Element) -> str:
    args = m.findtext("argsstring") or "()"
    # argsstring carries qualifiers after the parameter list (const, = default): keep them,
    # Breathe matches on the whole signature.
    return args


class GpudynHeader(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        header = self.arguments[0]
        xml_dir = _xml_dir(self.env.app)
        lines = [f".. doxygenfile:: {header}", "   :sections: briefdescription detaileddescription", ""]
        seen_functions: dict[str, int] = {}
        entities = header_entities(xml_dir, header)
        for _, kind, name, _el in entities:
            if kind == "function":
                seen_functions[name] = seen_functions.get(name, 0) + 1
        seen = self.env.temp_data.setdefault("gpudyn_rendered_ids", {})  # member id -> class shown
        for _, kind, name, el in entities:
            if kind in ("class", "struct", "union"):
                ids = _member_ids(xml_dir, el)
                if "<" in name:
                    # A partial specialization (block_rank<insert_algo::atomic, N>): its member
                    # functions; Sphinx's C++ domain cannot declare the classes nested in one
                    # (their TempStorage, which push_storage holds for the user).
                    names = sorted({n for _, n in _member_names(el)})
                    lines += [f".. doxygen{kind}:: {name}", "   :members: " + ", ".join(names), ""]
                elif ids & seen.keys():
                    # Members it inherits from a class already on the page (push_storage from
                    # block_inserter::TempStorage, vmm_array_ref the API static_array_ref shows):
                    # its own members only, each id once, and where the others are.
                    names = sorted({n for i, n in _member_names(el) if i not in seen})
                    lines += [f".. doxygen{kind}:: {name}", "   :members: " + ", ".join(names), ""]
                    shown = sorted({seen[i] for i in ids if i in seen})
                    lines += [
                        f"``{name.rpartition('::')[2]}``: its other members are those documented for "
                        + ", ".join(f"``{c.rpartition('::')[2]}``" for c in shown)
                        + " above.",
                        "",
                    ]
                else:
                    lines += [f".. doxygen{kind}:: {name}", "   :members:", "   :undoc-members:", ""]
                for i in ids:
                    seen.setdefault(i, name)
            elif kind == "function":
                target = name + (_function_signature(el) if seen_functions[name] > 1 else "")
                lines += [f".. doxygenfunction:: {target}", ""]
            else:
                lines += [f".. {_KIND_DIRECTIVE[kind]}:: {name}", ""]
        node_list = []
        from docutils import nodes

        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        node_list.extend(container.children)
        return node_list


def setup(app):
    app.add_directive("gpudyn-header", GpudynHeader)
    return {"parallel_read_safe": True}
