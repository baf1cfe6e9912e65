// The real kernel source, compiled for the CPU emulator (cuda_runtime.h in this folder).
#include "../../../kernels/decode_mma.cu"
