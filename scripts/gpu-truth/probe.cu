// One kernel and the two entry points the recorder calls: eb_probe launches the kernel and
// returns the CUDA runtime's error code (0: the kernel ran and wrote its answer), and
// eb_runtime_version returns the version of the CUDA runtime the library was linked with.
#include <cuda_runtime.h>

__global__ void eb_kernel(int *out) { *out = 42; }

extern "C" int eb_probe(void) {
    int *device = 0;
    cudaError_t status = cudaMalloc(&device, sizeof(int));
    if (status != cudaSuccess) return 1000 + (int)status;
    eb_kernel<<<1, 1>>>(device);
    status = cudaGetLastError();
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
    int host = 0;
    if (status == cudaSuccess) status = cudaMemcpy(&host, device, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(device);
    if (status != cudaSuccess) return (int)status;
    return host == 42 ? 0 : 2000;
}

extern "C" int eb_runtime_version(void) {
    int version = 0;
    cudaRuntimeGetVersion(&version);
    return version;
}
