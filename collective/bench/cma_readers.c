// How much concurrent readers of one process's memory slow process_vm_readv down: the
// copy both softhca's same-host path and Open MPI's vader use for large messages, and the
// question docs/benchmarks-history.md ("Burst records on the same-host path") asks of the
// all-to-all all-reduce, whose owners are read by every other rank at once.
//
//   cc -O2 -o /tmp/cma_readers collective/bench/cma_readers.c
//   /tmp/cma_readers READERS SAME [BLOCK_KIB [CHUNK_KIB]]
//
// READERS child processes, pinned round-robin to CPUs 0 and 1, each copy BLOCK_KIB (1024)
// from the parent 300 times, CHUNK_KIB (188: the collective's slot when the history's
// measurements were made; 304 since 2026-12-03) per call, into their
// own buffer; SAME=1: all of them the same block, SAME=0: each its own (block r of the
// parent's READERS blocks, adjacent). Prints each reader's GB/s and their sum.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s READERS SAME [BLOCK_KIB [CHUNK_KIB]]\n", argv[0]);
        return 2;
    }
    int readers = atoi(argv[1]), same = atoi(argv[2]);
    size_t block = (size_t)(argc > 3 ? atoi(argv[3]) : 1024) << 10;
    size_t chunk = (size_t)(argc > 4 ? atoi(argv[4]) : 188) << 10;
    char *src = malloc(block * readers);
    memset(src, 1, block * readers);
    pid_t owner = getpid();
    int go[2], res[2];
    if (pipe(go) || pipe(res)) return 1;
    for (int r = 0; r < readers; r++) {
        if (fork() == 0) {
            cpu_set_t c;
            CPU_ZERO(&c);
            CPU_SET(r % 2, &c);
            sched_setaffinity(0, sizeof c, &c);
            char *dst = malloc(block), b;
            memset(dst, 0, block);
            if (read(go[0], &b, 1) != 1) _exit(1);
            char *s = src + (same ? 0 : r * block);
            double t0 = now();
            for (int k = 0; k < 300; k++)
                for (size_t o = 0; o < block; o += chunk) {
                    size_t n = o + chunk > block ? block - o : chunk;
                    struct iovec l = {dst + o, n}, rm = {s + o, n};
                    if (process_vm_readv(owner, &l, 1, &rm, 1, 0) != (ssize_t)n) {
                        perror("process_vm_readv");
                        _exit(1);
                    }
                }
            double gbs = (double)block * 300 / (now() - t0) / 1e9;
            if (write(res[1], &gbs, sizeof gbs) != sizeof gbs) _exit(1);
            _exit(0);
        }
    }
    usleep(100000);
    for (int r = 0; r < readers; r++)
        if (write(go[1], "x", 1) != 1) return 1;
    double sum = 0, g;
    for (int r = 0; r < readers; r++) {
        if (read(res[0], &g, sizeof g) != sizeof g) return 1;
        printf("%.2f ", g);
        sum += g;
    }
    while (wait(NULL) > 0) {
    }
    printf(" sum %.2f GB/s (%d readers, %s)\n", sum, readers, same ? "same block" : "own blocks");
    return 0;
}
