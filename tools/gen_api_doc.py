#!/usr/bin/env python3
"""Writes docs/api.md, the C ABI reference, from the comments in the public headers.

Reads include/gpudyn/gpudyn.h and every per-structure header it includes (in include
order, as the Python binding does), then include/gpudyn/experimental.h. For each
declaration (function, enum, struct, typedef, #define constant) the comment right above
it becomes its description; a `/* ---- name ---- */` comment starts a section; a file's
first comment is its introduction; a comment followed by a blank line is kept as a paragraph.

  python3 tools/gen_api_doc.py            # rewrite docs/api.md
  python3 tools/gen_api_doc.py --check    # exit 1 (with a diff) when docs/api.md is stale
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")
OUT = os.path.join(ROOT, "docs", "api.md")
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"(gpudyn/[A-Za-z0-9_]+\.h)"')
_SECTION_RE = re.compile(r"^-{2,}\s*(.*?)\s*-*$")
_DEFINE_RE = re.compile(r"^\s*#\s*define\s+(GPUDYN_[A-Z0-9_]+)\s+(\S.*)$")


def _comment_text(lines: list[str]) -> str:
    """The text of a /* */ or // comment block, without the comment markers."""
    out = []
    for ln in lines:
        s = ln.strip()
        if s.startswith("//"):
            s = s[2:]
        else:
            s = re.sub(r"^/\*+", "", s)
            s = re.sub(r"\*+/$", "", s)
            s = re.sub(r"^\*(?!/)", "", s)
        out.append(s.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    # common indentation of the continuation lines
    indent = min((len(s) - len(s.lstrip()) for s in out if s.strip()), default=0)
    return "\n".join(s[indent:] if len(s) >= indent else s.strip() for s in out)


def _decl_name(code: str) -> str:
    flat = " ".join(code.split())
    if flat.startswith("#define"):
        return flat.split()[1]
    if "(" in flat and not flat.startswith("typedef"):
        return re.search(r"(\w+)\s*\(", flat).group(1)
    m = re.search(r"(\w+)\s*;\s*$", flat)
    return m.group(1) if m else flat


def _kind(code: str) -> str:
    flat = " ".join(code.split())
    if flat.startswith("#define"):
        return "constant"
    if flat.startswith("typedef enum"):
        return "enum"
    if flat.startswith("typedef struct") and "{" in flat:
        return "struct"
    if flat.startswith("typedef"):
        return "type"
    return "function"


def parse(path: str, seen: set[str], files: list[tuple[str, list]]) -> None:
    """Appends (header name, items) for `path` and the headers it includes, in order.
    items: ("intro"|"section"|"text", str) or ("decl", kind, name, code, doc)."""
    if path in seen:
        return
    seen.add(path)
    rel = os.path.relpath(path, INCLUDE).replace(os.sep, "/")
    items: list = []
    entry = (rel, items)
    files.append(entry)
    lines = open(path, encoding="utf-8").read().splitlines()
    pending: list[str] | None = None  # text of the comment just above
    cxx_depth = 0  # > 0 inside #ifdef __cplusplus
    depth = 0
    later_includes: list[str] = []
    i = 0
    first_comment = True

    def flush_pending_as_text() -> None:
        nonlocal pending
        if pending is not None and pending.strip():
            items.append(("text", pending))
        pending = None

    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if not s:
            flush_pending_as_text()
            i += 1
            continue
        if s.startswith("/*") or s.startswith("//"):
            block = [line]
            if s.startswith("/*"):
                while "*/" not in lines[i]:
                    i += 1
                    block.append(lines[i])
            else:
                while i + 1 < len(lines) and lines[i + 1].strip().startswith("//"):
                    i += 1
                    block.append(lines[i])
            i += 1
            text = _comment_text(block)
            sec = _SECTION_RE.match(text)
            if first_comment:
                items.append(("intro", text))
                first_comment = False
            elif sec and "\n" not in text:
                flush_pending_as_text()
                items.append(("section", sec.group(1)))
            else:
                flush_pending_as_text()
                pending = text
            continue
        first_comment = False
        if s.startswith("#"):
            directive = s[1:].strip()
            m = _INCLUDE_RE.match(line)
            if m and cxx_depth == 0:
                later_includes.append(os.path.join(INCLUDE, m.group(1)))
            d = _DEFINE_RE.match(line)
            if d and not d.group(1).endswith("_H") and d.group(1) != "GPUDYN_API" and depth <= 1:
                items.append(("decl", "constant", d.group(1), f"#define {d.group(1)} {d.group(2)}", pending or ""))
            elif directive.startswith(("if", "ifdef", "ifndef")):
                depth += 1
                if re.match(r"ifdef\s+__cplusplus\b", directive):
                    cxx_depth = depth
            elif directive.startswith("endif"):
                if cxx_depth == depth:
                    cxx_depth = 0
                depth -= 1
            pending = None
            i += 1
            continue
        if cxx_depth:
            i += 1
            continue
        # a declaration: up to the ';' that closes it at brace depth 0
        code = [line.rstrip()]
        braces = line.count("{") - line.count("}")
        while not (braces == 0 and code[-1].rstrip().endswith(";")) and i + 1 < len(lines):
            i += 1
            code.append(lines[i].rstrip())
            braces += lines[i].count("{") - lines[i].count("}")
        i += 1
        text = "\n".join(code).replace("GPUDYN_API ", "")
        items.append(("decl", _kind(text), _decl_name(text), text, pending or ""))
        pending = None
    for inc in later_includes:
        parse(inc, seen, files)


def render() -> tuple[str, list[str]]:
    files: list[tuple[str, list]] = []
    seen: set = set()
    parse(os.path.join(INCLUDE, "gpudyn", "gpudyn.h"), seen, files)
    # Not included by gpudyn.h: the experimental surface, documented last.
    parse(os.path.join(INCLUDE, "gpudyn", "experimental.h"), seen, files)
    out = ["# gpudyn C API reference", "",
           "Generated by `tools/gen_api_doc.py` from the comments in the public headers; "
           "edit the headers, then run `python3 tools/gen_api_doc.py` (CI checks this file is current).",
           "Every function returns `gpudyn_status_t` unless shown otherwise; on failure "
           "`gpudyn_last_error_message()` says why.", ""]
    out.append("Headers: " + ", ".join(f"[`{rel}`](#{rel.replace('/', '').replace('.', '')})" for rel, _ in files))
    out.append("")
    undocumented = []
    for rel, items in files:
        out += [f"## {rel}", ""]
        for item in items:
            if item[0] == "intro":
                out += [item[1], ""] if not item[1].startswith("gpudyn —") else [item[1].split("\n", 1)[-1].strip(), ""]
            elif item[0] == "section":
                out += [f"### {item[1][:1].upper() + item[1][1:]}", ""]
            elif item[0] == "text":
                out += [item[1], ""]
            else:
                _, kind, name, code, doc = item
                out += [f"#### `{name}` ({kind})", "", "```c", code, "```", ""]
                if doc:
                    out += [doc, ""]
                elif kind == "function":
                    undocumented.append(f"{rel}: {name}")
    return "\n".join(out).rstrip() + "\n", undocumented


def emit(text: str, output: str, check: bool, tool: str, script: str) -> int:
    """Writes text to output, or with check compares them (exit status 1 and a diff when stale).
    Shared with tools/gen_device_doc.py."""
    rel = os.path.relpath(output, ROOT)
    if check:
        old = open(output, encoding="utf-8").read() if os.path.exists(output) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       f"{rel} (committed)", f"{rel} (from headers)"))
            print(f"{tool}: {rel} is out of date: run python3 {script}", file=sys.stderr)
            return 1
        print(f"{tool}: {rel} is up to date")
        return 0
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{tool}: wrote {rel}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with docs/api.md instead of writing it")
    ap.add_argument("--output", default=OUT)
    args = ap.parse_args()
    text, undocumented = render()
    for u in undocumented:
        print(f"gen_api_doc: warning: function without a comment: {u}", file=sys.stderr)
    return emit(text, args.output, args.check, "gen_api_doc", "tools/gen_api_doc.py")


if __name__ == "__main__":
    sys.exit(main())
