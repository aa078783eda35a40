"""docs/device_api.md (tools/gen_device_doc.py): current, and a real extraction of the .cuh API."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "gen_device_doc.py")
DOC = os.path.join(ROOT, "docs", "device_api.md")


def _doc():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def test_device_doc_is_current():
    r = subprocess.run([sys.executable, TOOL, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_fails_on_a_stale_doc(tmp_path):
    stale = tmp_path / "device_api.md"
    stale.write_text(_doc().replace("heap_ref", "heap_rf", 1), encoding="utf-8")
    r = subprocess.run([sys.executable, TOOL, "--check", "--output", str(stale)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "out of date" in r.stderr


def test_device_doc_names_the_api():
    doc = _doc()
    for h in ("ggarray.cuh", "heap.cuh", "insert.cuh", "rw_heap.cuh", "static_array.cuh", "vmm_array.cuh",
              "warp_heap.cuh"):
        assert f"## gpudyn/{h}" in doc
    for cls in ("heap_ref", "rw_heap_ref", "warp_heap_ref", "warp_heap", "ggarray_ref<T>",
                "static_array_ref<T>", "vmm_array_ref<T>"):
        assert f"### `{cls}` (class)" in doc
    assert "### `push_storage<BlockDimX, Algo, BlockDimY, BlockDimZ>` (struct)" in doc
    # signatures as the headers spell them, with the comment above them as text
    assert "__device__ void* malloc(unsigned long long bytes) const" in doc
    assert "__device__ bool free(void* p) const" in doc
    assert "__device__ bool push_back(const T& x) const" in doc
    heap = doc[doc.index("### `heap_ref` (class)"):]
    assert re.search(r"malloc\(unsigned long long bytes\) const\n```\n\nAny thread, any time", heap)
    # static_array_ref's device API lives in its base class: listed as inherited
    sa = doc[doc.index("### `static_array_ref<T>`"):doc.index("## gpudyn/vmm_array.cuh")]
    assert "Inherited from `detail::contiguous_array_ref<T>`" in sa and "push_back_chunk(" in sa
    # private members and implementation namespaces stay out
    assert "block_lfvector" not in doc  # ggarray_ref private
    assert "heap_bucket" not in doc     # ggarray_detail
    assert "heap_class_of" not in doc   # heap.cuh detail
