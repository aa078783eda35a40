// Error checks shared by the benchmark programs: a failed CUDA or gpudyn call
// ends the program with the call, its place and the reason (a benchmark that
// measured after an error would report nonsense).
#pragma once

#include <gpudyn/gpudyn.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define GD(call)                                                                                        \
    do {                                                                                                \
        gpudyn_status_t s_ = (call);                                                                    \
        if (s_ != GPUDYN_SUCCESS) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gpudyn_last_error_message()); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
