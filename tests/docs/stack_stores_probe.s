# bench/stack_stores.sh's self-test (tests/docs/stack_stores_selftest.cmake): vector
# stores to the stack through %rsp and %rbp (a function that realigns its stack for zmm
# addresses its spills through %rbp), and instructions that are not such stores.
        .text
        .globl  probe_rsp
probe_rsp:
        vmovaps %zmm1, 64(%rsp)
        ret
        .globl  probe_rbp
probe_rbp:
        vmovaps %zmm1, -64(%rbp)
        vmovdqu8 %zmm2, -128(%rbp)
        vmovupd %zmm3, (%rbp,%rax,1)
        ret
        .globl  probe_clean
probe_clean:
        vmovaps %zmm1, (%rdi)
        vmovaps (%rbp), %zmm2
        vmovaps %ymm1, (%rsp)
        vmovaps %zmm4, %zmm5
        ret
        .section .note.GNU-stack,"",@progbits
