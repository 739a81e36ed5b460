/* Open MPI baseline for `doorbell allreduce`: the same sweep and the same columns
 * (size count type redop time algbw busbw #wrong, out-of-place then in-place),
 * with MPI_Allreduce on floats, MPI_SUM. Built and run by collective/bench/run.sh:
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl tcp,self \
 *          ./mpi_allreduce -b 8 -e 64M -f 2 -n 20 -w 5
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (size_t)v;
}

/* Values whose sums are exact in float whatever the order (1..4, at most 2^22 ranks). */
static float value(int rank, size_t i) { return (float)(1 + (rank * 7 + i * 3) % 4); }

static double time_calls(float *send, float *recv, size_t count, int iters, int in_place) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; k++) {
        if (in_place)
            MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double us = (MPI_Wtime() - t0) * 1e6 / (iters > 0 ? iters : 1), worst;
    MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static long check(float *send, float *recv, size_t count, int rank, int n, int in_place) {
    for (size_t i = 0; i < count; i++) send[i] = value(rank, i);
    if (in_place) {
        memcpy(recv, send, count * sizeof(float));
        MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    long wrong = 0, total;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < n; r++) want += value(r, i);
        wrong += recv[i] != want;
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

int main(int argc, char **argv) {
    size_t minb = 8, maxb = 64u << 20;
    int factor = 2, iters = 20, warmup = 5;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f")) factor = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    }
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t maxcount = maxb / sizeof(float) + 1;
    float *send = malloc(maxcount * sizeof(float)), *recv = malloc(maxcount * sizeof(float));
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) {
        printf("# Open MPI MPI_Allreduce: %d ranks\n#\n", n);
        printf("#%62s   %30s\n", "out-of-place", "in-place");
        printf("# %10s %12s %8s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "time", "algbw",
               "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    }
    for (size_t size = minb > 4 ? minb : 4;; size *= factor) {
        if (size > maxb) size = maxb;
        size_t count = size / sizeof(float);
        for (size_t i = 0; i < count; i++) send[i] = recv[i] = value(rank, i);
        for (int k = 0; k < warmup; k++)
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t[2];
        long wrong[2];
        for (int ip = 0; ip < 2; ip++) {
            t[ip] = time_calls(send, recv, count, iters, ip);
            wrong[ip] = check(send, recv, count, rank, n, ip);
        }
        if (rank == 0) {
            printf("  %10zu %12zu %8s %6s", count * sizeof(float), count, "float", "sum");
            for (int ip = 0; ip < 2; ip++) {
                double algbw = t[ip] > 0 ? (double)(count * sizeof(float)) / (t[ip] * 1e-6) / 1e9 : 0;
                printf(" %9.2f %7.3f %7.3f %6ld", t[ip], algbw, algbw * 2.0 * (n - 1) / n, wrong[ip]);
            }
            printf("\n");
            fflush(stdout);
        }
        if (size >= maxb || factor < 2) break;
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
