#!/usr/bin/env python3
"""Print the version in include/gpudyn/gpudyn.h (meson and Python read it from there)."""
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
parts = [re.search(r"#define GPUDYN_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
print(".".join(parts))
