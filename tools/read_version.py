#!/usr/bin/env python3
"""Print the version in include/gpudyn/gpudyn.h (meson and Python read it from there)."""

import re
import sys


def read_version(header: str) -> str:
    """MAJOR.MINOR.PATCH from the GPUDYN_VERSION_* macros of `header` (gpudyn.h)."""
    text = open(header, encoding="utf-8").read()
    return ".".join(
        re.search(r"#define GPUDYN_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")
    )


if __name__ == "__main__":
    print(read_version(sys.argv[1]))
