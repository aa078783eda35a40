#!/usr/bin/env python3
"""Writes docs/device_api.md, the device (CUDA C++) API reference, from the .cuh headers.

Reads include/gpudyn/*.cuh (what CUDA C++, CuPy and Numba kernels program against),
then include/gpudyn/experimental/*.cuh.
Per header: its first comment (the summary), then every public declaration of
namespace gpudyn (not `detail`, its old name `dev`, or `*_detail`): classes and structs with their
public __device__ / __host__ member functions and data, free functions, enums,
constants and aliases, each with the comment block directly above it.  A class's
public members inherited from a base in another header (static_array_ref from
detail::contiguous_array_ref) are listed under it.  A `// ---- name ----` line at the
head of a member's comment starts a group.

  python3 tools/gen_device_doc.py            # rewrite docs/device_api.md
  python3 tools/gen_device_doc.py --check    # exit 1 (with a diff) when it is stale
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_api_doc import emit  # noqa: E402  (one write/--check for both references)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADERS = os.path.join(ROOT, "include", "gpudyn")
OUT = os.path.join(ROOT, "docs", "device_api.md")
# Implementation namespaces: never documented.
_HIDDEN_NS = re.compile(r"^(detail|dev|\w+_detail)$")
_GROUP_RE = re.compile(r"^-{3,}\s*(.*?)\s*-{3,}$")
_CLASS_RE = re.compile(r"^(?:template\s*<(?P<tparams>.*)>\s*)?(?P<key>class|struct|union)\s+"
                       r"(?:alignas\s*\([^)]*\)\s*)?(?P<name>\w+)(?P<rest>.*)$", re.S)
_ENUM_RE = re.compile(r"^enum(\s+class|\s+struct)?\s+(?P<name>\w+)")


def _blank(text: str) -> str:
    """text with comments, string/char literals and preprocessor lines replaced by
    spaces (newlines kept), so braces and semicolons can be counted by offset."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#" or (line_start and c in " \t" and text[i:].lstrip(" \t").startswith("#")):
            j = i
            while j < n:  # to the end of the directive, with its continuation lines
                k = text.find("\n", j)
                k = n if k < 0 else k
                if text[j:k].rstrip().endswith("\\"):
                    j = k + 1
                    continue
                break
            for m in range(i, k):
                if out[m] != "\n":
                    out[m] = " "
            i = k
            continue
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k < 0 else k
            for m in range(i, k):
                out[m] = " "
            i = k
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2) + 2
            for m in range(i, k):
                if out[m] != "\n":
                    out[m] = " "
            i = k
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for m in range(i + 1, j):
                out[m] = " "
            i = j + 1
            line_start = False
            continue
        if c == "\n":
            line_start = True
        elif c not in " \t":
            line_start = False
        i += 1
    return "".join(out)


def _comment_above(lines: list[str], line_no: int) -> str:
    """The comment block ending on the line right above line_no (0-based), as text."""
    block: list[str] = []
    i = line_no - 1
    while i >= 0:
        s = lines[i].strip()
        if s.startswith("//"):
            block.insert(0, s[2:])
            i -= 1
        elif s.endswith("*/") and not block:
            j = i
            while "/*" not in lines[j]:
                j -= 1
            if not lines[j].strip().startswith("/*"):
                break  # a trailing comment after code
            for ln in lines[j:i + 1]:
                t = ln.strip()
                t = re.sub(r"^/\*+", "", t)
                t = re.sub(r"\*+/$", "", t)
                block.append(re.sub(r"^\*(?!/)", "", t))
            i = j - 1
            break
        else:
            break
    return _dedent(block)


def _dedent(block: list[str]) -> str:
    block = [b.rstrip() for b in block]
    while block and not block[0].strip():
        block.pop(0)
    while block and not block[-1].strip():
        block.pop()
    indent = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
    return "\n".join(b[indent:] for b in block)


def _flat(code: str) -> str:
    return " ".join(code.split())


def _match(code: str, i: int, open_c: str, close_c: str) -> int:
    """Offset just past the bracket that closes the one at code[i]."""
    depth = 0
    while i < len(code):
        if code[i] == open_c:
            depth += 1
        elif code[i] == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced brackets")


def _strip_init_list(sig: str) -> str:
    """A constructor's signature without its member initializer list."""
    p = sig.find("(")
    if p < 0:
        return sig
    end = _match(sig, p, "(", ")")
    m = re.match(r"\s*(const\s*)?(noexcept\s*)?:(?!:)", sig[end:])
    return sig[:end] + (" " + m.group(1).strip() if m and m.group(1) else "") if m else sig


def _template_args(tparams: str | None) -> str:
    if not tparams:
        return ""
    names, depth, cur = [], 0, ""
    for c in tparams + ",":
        if c == "," and depth == 0:
            names.append(re.findall(r"(\w+)\s*(?:=.*)?$", cur.strip().split("=")[0].strip())[-1])
            cur = ""
            continue
        depth += c in "<(" and 1 or (c in ">)" and -1 or 0)
        cur += c
    return "<" + ", ".join(names) + ">"


class Parser:
    """Declarations of one header: a recursive scan of the blanked text by scope."""

    def __init__(self, path: str):
        self.text = open(path, encoding="utf-8").read()
        self.lines = self.text.splitlines()
        self.code = _blank(self.text)
        self.items: list[dict] = []    # namespace-scope public declarations, in order
        self.classes: dict[str, dict] = {}

    def line_of(self, off: int) -> int:
        return self.text.count("\n", 0, off)

    def doc(self, off: int) -> str:
        return _comment_above(self.lines, self.line_of(off))

    def run(self) -> "Parser":
        self.scope(0, ns=[], cls=None)
        return self

    def scope(self, i: int, ns: list[str], cls: dict | None) -> int:
        """Scans declarations from i to the '}' closing this scope; returns past it."""
        code = self.code
        access = "public" if cls is None or cls["key"] != "class" else "private"
        while True:
            while i < len(code) and code[i].isspace():
                i += 1
            if i >= len(code) or code[i] == "}":
                return i + 1
            start = i
            m = re.match(r"(public|private|protected)\s*:(?!:)", code[i:])
            if m:
                access = m.group(1)
                i += m.end()
                continue
            # the declaration's head: to ';' or to the '{' of a body
            depth, in_init = 0, False
            while i < len(code):
                c = code[i]
                if c in "([":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                elif depth == 0 and c == ":" and code[i + 1:i + 2] != ":" and code[i - 1:i] != ":":
                    in_init = in_init or bool(re.search(r"\)\s*(const\s*)?(noexcept\s*)?$", code[start:i]))
                elif depth == 0 and c == ";":
                    break
                elif depth == 0 and c == "{":
                    head = _flat(code[start:i])
                    before = code[start:i].rstrip()[-1:]
                    if (in_init and (before.isalnum() or before in "_>")) or re.search(r"=\s*$", head) or \
                            (re.search(r"\b(return|=)\b", head) and "(" not in head):
                        i = _match(code, i, "{", "}")  # a braced initializer, not a body
                        continue
                    break
                i += 1
            head = _flat(code[start:i])
            if i >= len(code) or code[i] == ";":
                self.declaration(start, head, ns, cls, access, has_body=False)
                i += 1
                continue
            # code[i] == '{'
            nm = re.match(r"^(inline\s+)?namespace\s+(\w+)$", head)
            cm = _CLASS_RE.match(head)
            if nm:
                i = self.scope(i + 1, ns + [nm.group(2)], None)
                continue
            if cm and "(" not in cm.group("rest"):
                info = self.declaration(start, head, ns, cls, access, has_body=True)
                i = self.scope(i + 1, ns, info if info is not None else {"key": cm.group("key"), "members": []})
                while i < len(code) and code[i] != ";":  # `} name;` or `};`
                    i += 1
                i += 1
                continue
            body_end = _match(code, i, "{", "}")
            if _ENUM_RE.match(head):
                self.declaration(start, _flat(code[start:body_end]), ns, cls, access, has_body=False)
                while body_end < len(code) and code[body_end] != ";":
                    body_end += 1
                i = body_end + 1
                continue
            self.declaration(start, head, ns, cls, access, has_body=True)
            i = body_end
            if re.match(r"\s*;", code[i:]):
                i = code.index(";", i) + 1

    def declaration(self, off: int, head: str, ns: list[str], cls: dict | None, access: str,
                    has_body: bool) -> dict | None:
        """Records head when it is public API; returns a class's record (for its members)."""
        public_ns = ns[:1] == ["gpudyn"] and not any(_HIDDEN_NS.match(n) for n in ns)
        # a class's public members are recorded whatever its namespace: a public class
        # derived from it (static_array_ref) lists them as inherited
        public = access == "public" if cls is not None else public_ns
        if head.startswith(("static_assert", "friend", "using namespace")) or not head:
            return None
        cm = _CLASS_RE.match(head)
        if cm and "(" not in cm.group("rest"):
            name = cm.group("name")
            rest = cm.group("rest").lstrip()
            if rest.startswith("<"):  # a specialization: its own arguments name it
                spec = rest[:_match(rest, 0, "<", ">")]
                display, rest = name + spec, rest[len(spec):]
            else:
                display = name + _template_args(cm.group("tparams"))
            # direct bases, e.g. `detail::contiguous_array_ref<T>` (a nested `X<..>::Y` is skipped)
            bases = [re.sub(r"^(public|protected|private|virtual)\s+", "", b.strip())
                     for b in re.split(r",(?![^<]*>)", rest.strip()[1:])] if rest.strip().startswith(":") else []
            bases = [b for b in bases if b and ">::" not in b]
            info = {"kind": cm.group("key"), "key": cm.group("key"), "name": name,
                    "display": display, "code": head,
                    "doc": self.doc(off), "members": [], "bases": bases,
                    "public": public and has_body}
            if has_body:
                self.classes.setdefault(name, info)
            if public and has_body and cls is None:
                self.items.append(info)
            elif public and has_body and cls is not None:
                cls["members"].append({"kind": "type", "code": head, "doc": info["doc"]})
            return info
        if not public:
            return None
        is_func = "(" in head and not head.startswith(("using ", "typedef ")) and \
            not re.search(r"^(static\s+)?(constexpr|const)\b[^(]*=", head)
        if is_func:
            name_m = re.search(r"(operator\s*\S+?|~?[\w:]+)\s*\(", head)
            name = name_m.group(1) if name_m else head
            if "::" in name:
                return None  # an out-of-class definition of a member declared in its class
            if cls is not None and not re.search(r"\b__(device|host)__\b", head):
                return None
            item = {"kind": "function", "name": name, "code": _strip_init_list(head), "doc": self.doc(off)}
        elif _ENUM_RE.match(head):
            item = {"kind": "enum", "name": _ENUM_RE.match(head).group("name"), "code": head, "doc": self.doc(off)}
        else:
            nm = re.search(r"^using\s+(\w+)", head) or re.search(r"(\w+)\s*(\[[^\]]*\])?\s*(=.*)?$", head)
            kind = "alias" if head.startswith("using") else ("constant" if "constexpr" in head else "field")
            if cls is None and kind != "alias":
                return None  # namespace-scope constants and variables: tuning and layout, not API
            item = {"kind": kind, "name": nm.group(1) if nm else head, "code": head + ";", "doc": self.doc(off)}
        (cls["members"] if cls is not None else self.items).append(item)
        return None


def _text(doc: str) -> list[str]:
    """Comment text as markdown: indented runs after a blank line (examples) fenced."""
    out: list[str] = []
    lines = doc.split("\n")
    k = 0
    while k < len(lines):
        ln = lines[k]
        if ln.startswith("  ") and (k == 0 or not lines[k - 1].strip()):
            run = []
            while k < len(lines) and (lines[k].startswith("  ") or not lines[k].strip()):
                run.append(lines[k])
                k += 1
            while run and not run[-1].strip():
                run.pop()
                k -= 1
            out += ["```cuda", _dedent(run), "```"]
            continue
        out.append(ln)
        k += 1
    return out + [""]


def _members(members: list[dict]) -> list[str]:
    out: list[str] = []
    for m in members:
        doc = m["doc"]
        lines = doc.split("\n") if doc else []
        while lines and _GROUP_RE.match(lines[0].strip()):
            out += [f"**{_GROUP_RE.match(lines[0].strip()).group(1)}**", ""]
            lines.pop(0)
        out += ["```cuda", m["code"], "```", ""]
        if lines:
            out += _text(_dedent(lines))
    return out


def render() -> str:
    # The structures' headers, then the experimental ones (no stability promise).
    paths = sorted(glob.glob(os.path.join(HEADERS, "*.cuh"))) + \
        sorted(glob.glob(os.path.join(HEADERS, "experimental", "*.cuh")))
    parsers = {os.path.relpath(p, HEADERS): Parser(p).run() for p in paths}
    known = {}
    for p in [Parser(q).run() for q in sorted(glob.glob(os.path.join(HEADERS, "detail", "*.cuh")))] + \
            list(parsers.values()):
        known.update(p.classes)
    out = ["# gpudyn device API reference", "",
           "Generated by `tools/gen_device_doc.py` from the comments in `include/gpudyn/*.cuh`, the "
           "header-only device code that CUDA C++, CuPy and Numba kernels use; edit the headers, then run "
           "`python3 tools/gen_device_doc.py` (CI checks this file is current). The host side (views, "
           "creation, sizes) is the C API: [api.md](api.md). Everything is in `namespace gpudyn`.", ""]
    out.append("Headers: " + ", ".join(f"[`gpudyn/{h}`](#gpudyn{h.replace('.', '').replace('/', '')})"
                                       for h in parsers))
    out.append("")
    for h, p in parsers.items():
        out += [f"## gpudyn/{h}", ""]
        top = _comment_above(p.lines + [""], next((k for k, ln in enumerate(p.lines)
                                                   if ln.strip() and not ln.strip().startswith(("//", "/*", "*"))),
                                                  len(p.lines)))
        if top:
            out += _text(top.split("\n", 1)[-1].strip() if top.startswith("gpudyn —") else top)
        for it in p.items:
            if it["kind"] in ("class", "struct", "union"):
                out += [f"### `{it['display']}` ({it['kind']})", "", "```cuda", it["code"], "```", ""]
                if it["doc"]:
                    out += _text(it["doc"])
                out += _members(it["members"])
                for base in it["bases"]:
                    b = known.get(re.sub(r"<.*", "", base).split("::")[-1])
                    if b and b["members"] and b is not it:
                        out += [f"Inherited from `{base}`:", ""] + _members(b["members"])
            else:
                out += [f"### `{it['name']}` ({it['kind']})", ""] + _members([it])
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with docs/device_api.md instead of writing it")
    ap.add_argument("--output", default=OUT)
    args = ap.parse_args()
    return emit(render(), args.output, args.check, "gen_device_doc", "tools/gen_device_doc.py")


if __name__ == "__main__":
    sys.exit(main())
