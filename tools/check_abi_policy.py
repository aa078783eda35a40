#!/usr/bin/env python3
"""Check that every place applying gpudyn's ABI policy applies the one in docs/versioning.md.

The policy: the ABI version is MAJOR.MINOR while MAJOR is 0 and MAJOR from 1.0 on; a
library satisfies a request when both have the same ABI version and the library is not
older.  Checked here (each check reads what users get, not the source text):

  cmake   tools/gpudynConfigVersion.cmake.in, configured for a 0.x and a 1.x version and
          the header's, answers a table of find_package requests (plain, EXACT-style, and
          ranges) as the policy does (`cmake -P`); with --prefix, the installed file too
  soname  with --prefix: the installed library's SONAME is libgpudyn.so.<ABI version>,
          a link of that name and libgpudyn.so lead to libgpudyn.so.<version>
  conda   with --recipe-json (.ci/render_recipe.py --json): libgpudyn's run_exports pin
          is >=<version>,<next ABI version>.0a0, and its tests look for the SONAME link

Exit status 1 with every disagreement listed.  Run by .ci/packaging.sh (step abi-policy).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from read_version import read_version  # noqa: E402

# ---- the policy, written once for the checks ------------------------------------


def _parts(version: str) -> list[int]:
    return [int(x) for x in version.split(".")] + [0] * (3 - len(version.split(".")))


def abi_version(version: str) -> str:
    major, minor = _parts(version)[:2]
    return f"0.{minor}" if major == 0 else str(major)


def next_abi_floor(version: str) -> str:
    """The first version of the next ABI version: 0.1.x -> 0.2, 1.2.3 -> 2."""
    major, minor = _parts(version)[:2]
    return f"0.{minor + 1}" if major == 0 else str(major + 1)


def satisfies(have: str, lowest: str, highest: str | None = None, include_highest: bool = True) -> bool:
    """Does library version `have` satisfy find_package(gpudyn lowest[...highest])?
    (lowest "" : no version asked for)"""
    if lowest == "":
        return True
    h = _parts(have)
    if abi_version(lowest) != abi_version(have) or h < _parts(lowest):
        return False
    if highest is not None:
        return h <= _parts(highest) if include_highest else h < _parts(highest)
    return True


def header_version() -> str:
    return read_version(os.path.join(ROOT, "include", "gpudyn", "gpudyn.h"))


# ---- cmake -----------------------------------------------------------------------


def requests_for(have: str) -> list[tuple[str, str | None, bool]]:
    """find_package requests around `have`: (lowest, highest or None, include highest)."""
    major, minor, patch = _parts(have)
    reqs = [
        ("", None, True),
        (have, None, True),
        (f"{major}", None, True),
        (f"{major}.{minor}", None, True),
        (f"{major}.{minor}.{patch + 1}", None, True),
        (f"{major}.{minor + 1}", None, True),
        (f"{major + 1}.0", None, True),
        (f"{major}.{minor}", f"{major + 2}.0", True),
        (f"{major}.{minor}", have, False),
        (f"{major}.{minor}", have, True),
    ]
    if minor > 0:
        reqs.append((f"{major}.{minor - 1}", None, True))
    if patch > 0:
        reqs.append((f"{major}.{minor}.{patch - 1}", None, True))
    if major > 0:
        reqs.append((f"{major - 1}.0", f"{major + 1}.0", True))
    return reqs


def cmake_answers(version_file: str, reqs: list[tuple[str, str | None, bool]]) -> dict:
    """What the version file says to each request (cmake -P, as find_package sets the variables)."""
    lines = [
        "function(ask lowest highest mode)",
        "  if(lowest STREQUAL \"-\")",
        "    set(lowest \"\")",
        "  endif()",
        "  set(PACKAGE_FIND_VERSION \"${lowest}\")",
        "  if(highest)",
        "    set(PACKAGE_FIND_VERSION_RANGE \"${lowest}...${highest}\")",
        "    set(PACKAGE_FIND_VERSION_MIN ${lowest})",
        "    set(PACKAGE_FIND_VERSION_MAX ${highest})",
        "    set(PACKAGE_FIND_VERSION_RANGE_MAX ${mode})",
        "  endif()",
        f"  include(\"{version_file}\")",
        "  if(PACKAGE_VERSION_COMPATIBLE AND NOT PACKAGE_VERSION_UNSUITABLE)",
        "    message(\"answer -${lowest} ${highest} ${mode} yes\")",
        "  else()",
        "    message(\"answer -${lowest} ${highest} ${mode} no\")",
        "  endif()",
        "endfunction()",
    ]
    for lowest, highest, inc in reqs:
        lines.append(f"ask({lowest or '-'} \"{highest or ''}\" {'INCLUDE' if inc else 'EXCLUDE'})")
    with tempfile.NamedTemporaryFile("w", suffix=".cmake", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        script = f.name
    try:
        out = subprocess.run(["cmake", "-P", script], capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(script)
    answers = {}
    for line in out.splitlines():
        words = line.split()
        if words and words[0] == "answer":
            yes = words[-1] == "yes"
            highest = words[2] if len(words) == 5 else None
            answers[(words[1][1:], highest, words[-2] == "INCLUDE")] = yes
    return answers


def configure_template(version: str, out_dir: str) -> str:
    text = open(os.path.join(ROOT, "tools", "gpudynConfigVersion.cmake.in"), encoding="utf-8").read()
    text = text.replace("@VERSION@", version).replace("@ABI_VERSION@", abi_version(version))
    unreplaced = re.findall(r"@[A-Z_]+@", text)
    if unreplaced:
        raise SystemExit(f"check_abi_policy: the CMake template uses {unreplaced}, not known here")
    path = os.path.join(out_dir, f"gpudynConfigVersion-{version}.cmake")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def check_version_file(path: str, have: str, errs: list[str], what: str) -> int:
    reqs = requests_for(have)
    answers = cmake_answers(path, reqs)
    for lowest, highest, inc in reqs:
        want = satisfies(have, lowest, highest, inc)
        got = answers.get((lowest, highest, inc))
        if got != want:
            req = lowest if highest is None else f"{lowest}...{'' if inc else '<'}{highest}"
            errs.append(
                f"cmake: {what} ({have}) answers find_package(gpudyn {req}) with {got}, "
                f"the policy says {'compatible' if want else 'not compatible'}"
            )
    return len(reqs)


# ---- main ------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", help="an installed gpudyn (meson install / conda's libgpudyn)")
    ap.add_argument("--recipe-json", help="the rendered recipe (.ci/render_recipe.py --json)")
    args = ap.parse_args()
    version = header_version()
    abi = abi_version(version)
    errs: list[str] = []
    print(f"abi-policy: gpudyn {version}, ABI version {abi}")

    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for have in sorted({version, "0.1.3", "0.4.0", "1.2.3", "2.0.1"}):
            n += check_version_file(configure_template(have, tmp), have, errs, "tools/gpudynConfigVersion.cmake.in")
        print(f"   cmake: the template answers {n} requests for 0.x and 1.x versions")
    if args.prefix:
        installed = os.path.join(args.prefix, "lib", "cmake", "gpudyn", "gpudynConfigVersion.cmake")
        if not os.path.isfile(installed):
            errs.append(f"cmake: {installed} is missing")
        else:
            n = check_version_file(installed, version, errs, "the installed gpudynConfigVersion.cmake")
            print(f"   cmake: the installed version file answers {n} requests")

        lib = os.path.join(args.prefix, "lib")
        real = os.path.join(lib, f"libgpudyn.so.{version}")
        if not os.path.isfile(real):
            errs.append(f"soname: {real} is missing")
        else:
            dyn = subprocess.run(["readelf", "-d", real], capture_output=True, text=True, check=True).stdout
            m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
            soname = m.group(1) if m else None
            if soname != f"libgpudyn.so.{abi}":
                errs.append(f"soname: {real} has SONAME {soname}, the policy says libgpudyn.so.{abi}")
            for link in (f"libgpudyn.so.{abi}", "libgpudyn.so"):
                p = os.path.join(lib, link)
                if not (os.path.islink(p) and os.path.realpath(p) == os.path.realpath(real)):
                    errs.append(f"soname: {p} is not a link to {os.path.basename(real)}")
            print(f"   soname: {os.path.basename(real)} has SONAME {soname}")

    if args.recipe_json:
        meta = json.load(open(args.recipe_json, encoding="utf-8"))
        out = {o["name"]: o for o in meta["outputs"]}.get("libgpudyn", {})
        pins = [str(p) for p in (out.get("build") or {}).get("run_exports") or []]
        want = f"libgpudyn >={version},<{next_abi_floor(version)}.0a0"
        if pins != [want]:
            errs.append(f"conda: libgpudyn's run_exports are {pins}, the policy says ['{want}']")
        cmds = (out.get("test") or {}).get("commands") or []
        if not any(f"libgpudyn.so.{abi}\"" in c and c.startswith("test -L") for c in cmds):
            errs.append(f"conda: libgpudyn's tests do not check the SONAME link libgpudyn.so.{abi}")
        print(f"   conda: run_exports {pins}")

    for e in errs:
        print("abi-policy: " + e, file=sys.stderr)
    print(f"abi-policy: {len(errs)} problem(s)")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
