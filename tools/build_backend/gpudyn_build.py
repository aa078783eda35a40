"""PEP 517 build backend of gpudyn: meson-python, then two corrections to the wheel.

meson-python has no setting for either (its wheel tags are inferred, see
meson-python issue #639), so this thin wrapper applies them after its build_wheel:

1. Tag ``py3-none-<platform>``.  meson-python tags a wheel with files in platlib
   ``cpXY-cpXY`` because it assumes they are extension modules.  gpudyn has none: the
   package loads libgpudyn.so through cffi in ABI mode, so one wheel serves every
   CPython 3 (``requires-python`` gives the lower bound).  Before retagging, the wheel is
   checked for what would make that false: a native file defining ``PyInit_`` or a
   version-tagged module suffix.  The platform tag stays meson-python's
   (``linux_x86_64``); ``auditwheel repair`` turns it into ``manylinux_2_X``
   (.ci/packaging.sh does, docs/versioning.md says why nothing is bundled).
2. Distribution name ``gpudyn-cu<MAJOR>``, MAJOR being the CUDA major version of the nvcc
   the build used (``CUDA_VERSION`` in gpudyn/_version.py, written by meson), as
   cupy-cuda13x and rmm-cu13 do: the wheel embeds that CUDA runtime and needs a driver
   of that major.  The import name stays ``gpudyn``; ``[cuNN]`` extras of dependencies
   (``numba-cuda[cu13]``) follow the same major.  ``-Ccuda-suffix=false`` keeps the plain
   name ``gpudyn`` (the conda recipe: conda tells CUDA variants apart by build string and
   the cuda-version package, not by name).

The sdist (``gpudyn-X.Y.Z.tar.gz``) and editable installs are meson-python's unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile

import mesonpy

SUFFIX_SETTING = "cuda-suffix"  # -Ccuda-suffix=false: no -cuNN in the distribution name
_FALSE = {"false", "no", "0", "off"}


def _split(config_settings: dict | None) -> tuple[dict, bool]:
    """(meson-python's settings, whether to add -cuNN): meson-python rejects unknown keys."""
    settings = dict(config_settings or {})
    value = settings.pop(SUFFIX_SETTING, "true")
    if isinstance(value, list):
        value = value[-1]
    return settings, str(value).strip().lower() not in _FALSE


def get_requires_for_build_sdist(config_settings=None):
    return mesonpy.get_requires_for_build_sdist(_split(config_settings)[0])


def get_requires_for_build_wheel(config_settings=None):
    return mesonpy.get_requires_for_build_wheel(_split(config_settings)[0])


def get_requires_for_build_editable(config_settings=None):
    return mesonpy.get_requires_for_build_editable(_split(config_settings)[0])


def build_sdist(sdist_directory, config_settings=None):
    return mesonpy.build_sdist(sdist_directory, _split(config_settings)[0])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return mesonpy.build_editable(wheel_directory, _split(config_settings)[0], metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    settings, cuda_suffix = _split(config_settings)
    name = mesonpy.build_wheel(wheel_directory, settings, metadata_directory)
    return finish_wheel(os.path.join(wheel_directory, name), cuda_suffix)


# ---- the wheel rewrite (also used by tests) ---------------------------------------

_MODULE_SUFFIX = re.compile(r"\.(cpython-\d+[^./]*|abi3|cp\d+[^./]*)\.(so|pyd)$")


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def extension_modules(members: dict[str, bytes]) -> list[str]:
    """Files that make a wheel depend on the Python version: native files defining a
    module init function, or with a version-tagged extension-module suffix."""
    found = []
    for name, data in members.items():
        if _MODULE_SUFFIX.search(name) or (data[:4] == b"\x7fELF" and b"PyInit_" in data):
            found.append(name)
    return found


def finish_wheel(path: str, cuda_suffix: bool = True) -> str:
    """Retag the meson-python wheel at `path` py3-none-<platform> and (with `cuda_suffix`)
    rename its distribution <name>-cu<MAJOR>; returns the new file's basename (the old
    file is replaced)."""
    with zipfile.ZipFile(path) as zin:
        infos = zin.infolist()
        members = {i.filename: zin.read(i.filename) for i in infos}
    distinfo = {n.split("/", 1)[0] for n in members if n.split("/", 1)[0].endswith(".dist-info")}
    if len(distinfo) != 1:
        raise RuntimeError(f"gpudyn_build: {path}: expected one .dist-info folder, found {sorted(distinfo)}")
    old_distinfo = distinfo.pop()
    dist, version = old_distinfo[: -len(".dist-info")].rsplit("-", 1)

    modules = extension_modules(members)
    if modules:
        raise RuntimeError(
            "gpudyn_build: the wheel holds Python extension modules ("
            + ", ".join(modules)
            + "), so it cannot be tagged py3-none: tag it per Python version instead"
        )

    wheel_text = members[f"{old_distinfo}/WHEEL"].decode()
    tag = re.search(r"^Tag: (\S+)$", wheel_text, re.M).group(1)
    platform = tag.split("-")[2]
    new_tag = f"py3-none-{platform}"
    wheel_text = re.sub(r"^Tag: \S+$", f"Tag: {new_tag}", wheel_text, flags=re.M)

    metadata = members[f"{old_distinfo}/METADATA"].decode()
    name = re.search(r"^Name: (\S+)$", metadata, re.M).group(1)
    if cuda_suffix:
        version_py = members.get("gpudyn/_version.py", b"").decode()
        m = re.search(r'^CUDA_VERSION = "(\d+)\.', version_py, re.M)
        if m is None:
            raise RuntimeError("gpudyn_build: gpudyn/_version.py in the wheel has no CUDA_VERSION")
        major = m.group(1)
        name = f"{name}-cu{major}"
        metadata = re.sub(r"^Name: \S+$", f"Name: {name}", metadata, count=1, flags=re.M)
        # Requires-Dist: numba-cuda[cu13]>=0.30; extra == "numba" -> the build's major
        metadata = re.sub(r"^(Requires-Dist: .*?)\[cu\d+\]", rf"\1[cu{major}]", metadata, flags=re.M)
    dist = re.sub(r"[-_.]+", "_", name).lower()  # the wheel file name's form of the name
    new_distinfo = f"{dist}-{version}.dist-info"

    out_name = f"{dist}-{version}-{new_tag}.whl"
    out_path = os.path.join(os.path.dirname(path), out_name)
    tmp_path = out_path + ".part"
    record = []
    with zipfile.ZipFile(tmp_path, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for info in infos:
            if info.filename == f"{old_distinfo}/RECORD":
                continue
            data = members[info.filename]
            filename = info.filename
            if filename.startswith(old_distinfo + "/"):
                filename = new_distinfo + filename[len(old_distinfo) :]
                if filename == f"{new_distinfo}/WHEEL":
                    data = wheel_text.encode()
                elif filename == f"{new_distinfo}/METADATA":
                    data = metadata.encode()
            out = zipfile.ZipInfo(filename, date_time=info.date_time)
            out.external_attr = info.external_attr  # keeps the programs' executable bit
            out.compress_type = info.compress_type
            zout.writestr(out, data)
            record.append(f"{filename},{_record_hash(data)},{len(data)}")
        record.append(f"{new_distinfo}/RECORD,,")
        rec = zipfile.ZipInfo(f"{new_distinfo}/RECORD", date_time=infos[-1].date_time)
        rec.external_attr = 0o644 << 16
        rec.compress_type = zipfile.ZIP_DEFLATED
        zout.writestr(rec, "\n".join(record) + "\n")
    os.replace(tmp_path, out_path)
    if os.path.abspath(out_path) != os.path.abspath(path):
        os.remove(path)
    return out_name
