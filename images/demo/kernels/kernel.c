/* One kernel unit. The build compiles this file once per unit with -DUNIT=<n>, the way an
 * engine build compiles one CUDA kernel per architecture and dtype: real compiler work
 * whose amount the DEMO_ENGINE_UNITS build argument sets. */
#ifndef UNIT
#error "compile with -DUNIT=<n>"
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define STEP(i) acc = acc * 6364136223846793005UL + (x ^ (i * (UNIT + 1))); x = (x << 7) | (x >> 57);
#define STEP8(i) STEP(i) STEP(i + 1) STEP(i + 2) STEP(i + 3) STEP(i + 4) STEP(i + 5) STEP(i + 6) STEP(i + 7)
#define STEP64(i) STEP8(i) STEP8(i + 8) STEP8(i + 16) STEP8(i + 24) STEP8(i + 32) STEP8(i + 40) STEP8(i + 48) STEP8(i + 56)

#define KERNEL(k)                                                       \
    static unsigned long CAT(k_, k)(unsigned long x) {                  \
        unsigned long acc = k;                                          \
        STEP8(0)                                                        \
        return acc;                                                     \
    }

KERNEL(0) KERNEL(1) KERNEL(2) KERNEL(3) KERNEL(4) KERNEL(5) KERNEL(6) KERNEL(7)
KERNEL(8) KERNEL(9) KERNEL(10) KERNEL(11) KERNEL(12) KERNEL(13) KERNEL(14) KERNEL(15)

unsigned long CAT(kernel_unit_, UNIT)(unsigned long x) {
    return k_0(x) ^ k_1(x) ^ k_2(x) ^ k_3(x) ^ k_4(x) ^ k_5(x) ^ k_6(x) ^ k_7(x) ^
           k_8(x) ^ k_9(x) ^ k_10(x) ^ k_11(x) ^ k_12(x) ^ k_13(x) ^ k_14(x) ^ k_15(x);
}
