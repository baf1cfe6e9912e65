__global__ void mini(const unsigned* in, unsigned* out, int n) {
  unsigned acc = 0;
  for (int i = threadIdx.x; i < n; i += 32) acc += in[i] * 3u + (acc >> 3);
  switch (n & 7) {
    case 0: acc ^= in[1]; break;
    case 1: acc ^= in[5] * 5u; break;
    case 2: acc += in[9] << 2; break;
    case 3: acc *= in[2] + 7u; break;
    default: acc -= 1; break;
  }
  out[threadIdx.x] = acc + blockIdx.x;
}
