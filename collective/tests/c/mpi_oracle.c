/* Open MPI's MPI_Allreduce on the inputs of collective/tests/reduction_oracles.rs, for
 * the reference its all-reduce is compared with. Every rank builds its inputs from the
 * same formulas as the Rust test (written again here, not shared), rank 0 prints one
 * line per (type, op): "TYPE OP v0 v1 ...", integers in decimal, floats as their bit
 * patterns in hex (exact). avg is not an MPI op: it is MPI_SUM, then divided by the
 * number of ranks here (C's integer division truncates toward zero, as NCCL's does).
 *
 *   mpicc -O1 -o mpi_oracle mpi_oracle.c
 *   mpirun --allow-run-as-root --oversubscribe -np 3 ./mpi_oracle 61
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *OPS[] = {"sum", "prod", "max", "min", "avg"};

/* The exact input value of rank r at index i: signed types and floats -4..4 (prod:
 * -1, 1 or 2), unsigned 0..8 (prod: 1, 2 or 3): v = (7r + 5i + ri) mod 9, prod from
 * (5r + i + ri) mod 3. */
static double input(int is_unsigned, int op, int r, int i) {
    if (op == 1) {
        static const double s[] = {-1, 1, 2}, u[] = {1, 2, 3};
        return is_unsigned ? u[(r * 5 + i + r * i) % 3] : s[(r * 5 + i + r * i) % 3];
    }
    double v = (double)((r * 7 + i * 5 + r * i) % 9);
    return is_unsigned ? v : v - 4;
}

static MPI_Op mpi_op(int op) {
    switch (op) {
    case 0: case 4: return MPI_SUM;
    case 1: return MPI_PROD;
    case 2: return MPI_MAX;
    default: return MPI_MIN;
    }
}

#define RUN_INT(NAME, CT, MT, UNS, FMT)                                                     \
    for (int op = 0; op < 5; op++) {                                                        \
        CT *in = malloc(count * sizeof(CT)), *out = malloc(count * sizeof(CT));             \
        for (int i = 0; i < count; i++) in[i] = (CT)input(UNS, op, rank, i);                \
        MPI_Allreduce(in, out, count, MT, mpi_op(op), MPI_COMM_WORLD);                      \
        if (op == 4) for (int i = 0; i < count; i++) out[i] = (CT)(out[i] / (CT)n);          \
        if (rank == 0) {                                                                    \
            printf("%s %s", NAME, OPS[op]);                                                 \
            for (int i = 0; i < count; i++) printf(" %" FMT, out[i]);                       \
            printf("\n");                                                                   \
        }                                                                                   \
        free(in); free(out);                                                                \
    }

#define RUN_FLOAT(NAME, CT, MT, BT, FMT)                                                    \
    for (int op = 0; op < 5; op++) {                                                        \
        CT *in = malloc(count * sizeof(CT)), *out = malloc(count * sizeof(CT));             \
        for (int i = 0; i < count; i++) in[i] = (CT)input(0, op, rank, i);                  \
        MPI_Allreduce(in, out, count, MT, mpi_op(op), MPI_COMM_WORLD);                      \
        if (op == 4) for (int i = 0; i < count; i++) out[i] = out[i] / (CT)n;               \
        if (rank == 0) {                                                                    \
            printf("%s %s", NAME, OPS[op]);                                                 \
            for (int i = 0; i < count; i++) { BT b; memcpy(&b, &out[i], sizeof b); printf(" %" FMT, b); } \
            printf("\n");                                                                   \
        }                                                                                   \
        free(in); free(out);                                                                \
    }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int count = argc > 1 ? atoi(argv[1]) : 61;
    RUN_INT("int8", int8_t, MPI_INT8_T, 0, PRId8)
    RUN_INT("uint8", uint8_t, MPI_UINT8_T, 1, PRIu8)
    RUN_INT("int32", int32_t, MPI_INT32_T, 0, PRId32)
    RUN_INT("uint32", uint32_t, MPI_UINT32_T, 1, PRIu32)
    RUN_INT("int64", int64_t, MPI_INT64_T, 0, PRId64)
    RUN_INT("uint64", uint64_t, MPI_UINT64_T, 1, PRIu64)
    RUN_FLOAT("float", float, MPI_FLOAT, uint32_t, "08" PRIx32)
    RUN_FLOAT("double", double, MPI_DOUBLE, uint64_t, "016" PRIx64)
    MPI_Finalize();
    return 0;
}
