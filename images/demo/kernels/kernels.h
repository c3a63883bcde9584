/* The engine's "kernels": one translation unit each, generated and compiled at build time. */
#ifndef DEMO_ENGINE_KERNELS_H
#define DEMO_ENGINE_KERNELS_H
unsigned long run_kernels(unsigned long seed);
#endif
