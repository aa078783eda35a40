"""The `gpudyn` command: `gpudyn info`, `gpudyn bench [NAME ...]`."""

from __future__ import annotations

import argparse
import sys

# `gpudyn bench` in an install without the benchmarks (every wheel and conda package).
NO_BENCHMARKS = (
    "gpudyn bench: this gpudyn has no benchmarks (user packages carry none); "
    "from a gpudyn checkout, `bash benchmarks/run.sh` builds, installs and runs them"
)


def _bench_package():
    """gpudyn.bench, or None where it is not installed."""
    import importlib

    name = __package__ + ".bench"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # gpudyn.bench is there but something it imports is not
            raise
        return None


def cmd_info(args) -> int:
    from . import __version__, errors, library_path
    from .info import built_for, cuda_versions, device_count, device_info, fmt_cuda_version, runs_on

    versions = cuda_versions()
    # The versions are known without a device: print them first, so that a driver
    # missing or too old for this runtime shows beside the error that says so.
    print(f"gpudyn {__version__} ({library_path})")
    print(f"CUDA runtime {fmt_cuda_version(versions['runtime'])}, driver {fmt_cuda_version(versions['driver'])}")
    print(built_for())
    try:
        n = device_count()
    except errors.NoDeviceError as exc:
        sys.stdout.flush()
        print(f"gpudyn: no CUDA device: {exc}", file=sys.stderr)
        return 1
    for d in range(n):
        i = device_info(d)
        cc = "%d.%d" % i["compute_capability"]
        print(
            f"device {d}: {i['name']}, compute capability {cc}, {i['multiprocessor_count']} SMs, "
            f"{i['total_memory'] / 2**30:.1f} GiB ({i['free_memory'] / 2**30:.1f} GiB free), "
            f"L2 {i['l2_cache_bytes'] / 2**20:.0f} MiB, VMM {'yes' if i['vmm_supported'] else 'no'}, "
            f"{runs_on(i['compute_capability'])}"
        )
    return 0


def cmd_bench(args) -> int:
    from . import errors
    from .info import device_count

    bench = _bench_package()
    if bench is None:
        print(NO_BENCHMARKS, file=sys.stderr)
        return 1
    available, resolve, run_benchmarks = bench.available, bench.resolve, bench.run_benchmarks
    names = [resolve(n) for n in args.names] or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(
            f"gpudyn bench: unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}",
            file=sys.stderr,
        )
        return 2
    if not names:
        print("gpudyn bench: no benchmarks are installed", file=sys.stderr)
        return 2
    try:
        device_count()
    except errors.NoDeviceError as exc:
        print(f"gpudyn: no CUDA device: {exc}", file=sys.stderr)
        return 1
    return run_benchmarks(names, out_dir=args.out_dir, quick=args.quick, argv=sys.argv)


def _bench_epilog() -> str:
    bench = _bench_package()
    if bench is None:
        return NO_BENCHMARKS[len("gpudyn bench: ") :] + "."
    width = max(map(len, bench.BENCHMARKS))
    return "benchmarks:\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in bench.BENCHMARKS.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpudyn", description="gpudyn: dynamic memory inside CUDA kernels")
    from ._version import __version__

    parser.add_argument("--version", action="version", version=f"gpudyn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="library, CUDA and device information")
    p_info.set_defaults(func=cmd_info)
    p_bench = sub.add_parser(
        "bench",
        help="run the papers' benchmarks on the GPU (installed from a checkout)",
        epilog=_bench_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_bench.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all, listed below)")
    p_bench.add_argument("--quick", action="store_true", help="small sweep (smoke test)")
    p_bench.add_argument(
        "--out-dir",
        default=None,
        metavar="DIR",
        help="results folder (default: ./gpudyn-results/<gpu>/; the committed results are "
        "refreshed with --out-dir benchmarks/results/<gpu>)",
    )
    p_bench.set_defaults(func=cmd_bench)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line, no traceback, for library errors and unwritable results folders
        from .errors import GpudynError

        if isinstance(exc, GpudynError):
            print(f"gpudyn: {exc}", file=sys.stderr)
            return 1
        if isinstance(exc, OSError) and getattr(exc, "filename", None) is not None:
            print(f"gpudyn: {exc.strerror or exc}: {exc.filename!r}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
