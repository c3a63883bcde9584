// The demo's CUDA kernels: an RMS normalisation and a scaled residual add over fp32 rows,
// the shape of the small fused kernels an engine ships next to its GEMMs. Compiled by the
// `cuda-kernels` component with the pinned nvcc for the image's cuda-archs (GB10: 12.1a);
// `python BUILD.py verify demo` then reads the SASS architectures back from the library.
// Nothing here runs without a GPU: the library is built, shipped and verified.
#include <cuda_runtime.h>

extern "C" __global__ void demo_rmsnorm(float *out, const float *in, const float *weight, int cols, float eps) {
    extern __shared__ float partial[];
    const float *row = in + (size_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        sum += row[i] * row[i];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const float scale = rsqrtf(partial[0] / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        out[(size_t)blockIdx.x * cols + i] = row[i] * scale * weight[i];
    }
}

extern "C" __global__ void demo_residual_add(float *x, const float *residual, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] += alpha * residual[i];
    }
}

// Host entry points the engine would call (the block size is a power of two).
extern "C" int demo_launch_rmsnorm(float *out, const float *in, const float *weight, int rows, int cols, float eps) {
    const int threads = 256;
    demo_rmsnorm<<<rows, threads, threads * sizeof(float)>>>(out, in, weight, cols, eps);
    return (int)cudaGetLastError();
}

extern "C" int demo_launch_residual_add(float *x, const float *residual, float alpha, int n) {
    demo_residual_add<<<(n + 255) / 256, 256>>>(x, residual, alpha, n);
    return (int)cudaGetLastError();
}
