# Sourced by the build scripts: turns CUDAARCHS (CMake's syntax, set by conda-forge's
# nvcc activation, e.g. "75-real;80-real;90a-real;120-virtual" or "all-major") into
# gpudyn's meson options, in the array gpudyn_meson_arch_args:
#   NN-real -> SASS for sm_NN; NN-virtual -> PTX (the newest one is kept, meson's
#   gpu_ptx takes one); NN -> both.  Architectures below 75 are dropped (gpudyn needs
#   compute capability 7.5; CUDA 13 cannot target them).  Unset, empty, "all",
#   "all-major" or "native": meson's defaults (75 80 86 89 90 + PTX 90).
gpudyn_meson_arch_args=()
_real=()
_ptx=""
case "${CUDAARCHS:-}" in
  ""|all|all-major|native) ;;
  *)
    for _a in $(echo "$CUDAARCHS" | tr ';, ' '   '); do
      _num=${_a%%-*}
      _kind=${_a#"$_num"}
      if [ "${_num//[!0-9]/}" -lt 75 ]; then
        echo "gpudyn: CUDAARCHS entry $_a dropped (gpudyn needs compute capability 7.5 or newer)" >&2
        continue
      fi
      case "$_kind" in
        -real) _real+=("$_num") ;;
        -virtual) _ptx=$_num ;;
        "") _real+=("$_num"); _ptx=$_num ;;
        *) echo "gpudyn: cannot read CUDAARCHS entry $_a" >&2; exit 1 ;;
      esac
    done
    if [ ${#_real[@]} -eq 0 ] && [ -z "$_ptx" ]; then
      echo "gpudyn: no usable architecture in CUDAARCHS=$CUDAARCHS" >&2; exit 1
    fi
    _list=$(IFS=,; echo "${_real[*]}")
    gpudyn_meson_arch_args=("-Dgpu_archs=$_list" "-Dgpu_ptx=$_ptx")
    ;;
esac
unset _real _ptx _a _num _kind _list
