// Host test (no GPU): what a build's architectures run on and the message of a
// device it has no code for (lib/internal.hpp: arch_fit_of, describe_build_archs,
// arch_mismatch_message; check_cuda raises it as NOT_SUPPORTED).  The failure itself
// needs a GPU of an architecture the build lacks (e.g. -Dgpu_archs=80 -Dgpu_ptx= on
// an H200: every create then fails with it and the context stays usable).
#include "../../lib/internal.hpp"

extern "C" {
#include "check.h"
}

#include <string>

using gpudyn::detail::arch_fit;
using gpudyn::detail::arch_fit_of;

static bool has(const std::string& text, const char* part) {
    if (text.find(part) != std::string::npos) return true;
    std::fprintf(stderr, "message lacks \"%s\": %s\n", part, text.c_str());
    return false;
}

int main() {
    const char* sass = "75,80,86,89,90"; // meson.options' defaults
    // SASS runs on its major's later minors, PTX on every later compute capability
    CHECK(arch_fit_of(9, 0, sass, "90") == arch_fit::sass);
    CHECK(arch_fit_of(7, 5, sass, "90") == arch_fit::sass);
    CHECK(arch_fit_of(8, 7, sass, "90") == arch_fit::sass); // Orin: sm_86's code
    CHECK(arch_fit_of(10, 0, sass, "90") == arch_fit::ptx); // B200: JIT from PTX 9.0
    CHECK(arch_fit_of(12, 0, sass, "90") == arch_fit::ptx);
    CHECK(arch_fit_of(10, 0, sass, "") == arch_fit::none);
    CHECK(arch_fit_of(7, 0, sass, "90") == arch_fit::none); // V100: older than every arch
    CHECK(arch_fit_of(9, 0, "80", "") == arch_fit::none);   // another major's SASS never runs
    CHECK(arch_fit_of(8, 0, "86", "") == arch_fit::none);   // nor a later minor's
    CHECK(arch_fit_of(9, 0, "80", "80") == arch_fit::ptx);
    CHECK(arch_fit_of(9, 0, "90a", "") == arch_fit::sass); // arch-specific: that one only
    CHECK(arch_fit_of(10, 0, "90a,100a", "") == arch_fit::sass);
    CHECK(arch_fit_of(10, 3, "100a", "") == arch_fit::none);
    CHECK(arch_fit_of(9, 0, "", "") == arch_fit::none);

    CHECK(gpudyn::detail::format_arch_list(sass) == "7.5, 8.0, 8.6, 8.9, 9.0");
    CHECK(gpudyn::detail::format_arch_list("90a,100") == "9.0a, 10.0");
    CHECK(
        gpudyn::detail::describe_build_archs(sass, "90") ==
        "SASS for compute capability 7.5, 8.0, 8.6, 8.9, 9.0 and PTX 9.0 (JIT-compiled by the driver on 9.0 and newer)");
    CHECK(gpudyn::detail::describe_build_archs("90", "") == "SASS for compute capability 9.0 and no PTX");

    // a build for sm_80 only on an H200
    std::string m = gpudyn::detail::arch_mismatch_message(0, 9, 0, cudaErrorNoKernelImageForDevice,
                                                          "cudaFuncGetAttributes (kernel preload)", "80", "");
    CHECK(has(m, "device 0 (compute capability 9.0) cannot run this build of libgpudyn"));
    CHECK(has(m, "which carries SASS for compute capability 8.0 and no PTX"));
    CHECK(has(m, "[cudaFuncGetAttributes (kernel preload): cudaErrorNoKernelImageForDevice]"));
    CHECK(has(m, "-Csetup-args=-Dgpu_archs=90"));
    // older than gpudyn supports: no rebuild suggested
    m = gpudyn::detail::arch_mismatch_message(1, 7, 0, cudaErrorNoKernelImageForDevice, "launch", sass, "90");
    CHECK(has(m, "device 1 (compute capability 7.0)") && has(m, "gpudyn needs compute capability 7.5 or newer"));
    CHECK(m.find("-Dgpu_archs") == std::string::npos);
    // PTX present, the driver too old to JIT it
    m = gpudyn::detail::arch_mismatch_message(0, 10, 0, cudaErrorUnsupportedPtxVersion, "launch", sass, "90");
    CHECK(has(m, "PTX 9.0") && has(m, "update the NVIDIA driver") && has(m, "-Dgpu_archs=100"));

    CHECK(gpudyn::detail::is_arch_error(cudaErrorNoKernelImageForDevice));
    CHECK(gpudyn::detail::is_arch_error(cudaErrorUnsupportedPtxVersion));
    CHECK(!gpudyn::detail::is_arch_error(cudaErrorMemoryAllocation));
    CHECK(!gpudyn::detail::is_arch_error(cudaErrorIllegalAddress));
    return gpudyn_test_failures ? 1 : 0;
}
