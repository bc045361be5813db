/* OSU-style validation over MPI (our own code), run with `mpirun -n 2`.
 *
 *   emu_osu_mpi latency [opts]  MPI_Send/MPI_Recv ping-pong, half round trip
 *   emu_osu_mpi bw [opts]       window of W MPI_Isend (receiver W MPI_Irecv + Waitall), then an ack
 *   emu_osu_mpi check [opts]    checksummed messages through Send/Isend/Sendrecv/Put/Allreduce
 *   emu_osu_mpi threads         MPI_THREAD_MULTIPLE: 4 threads a rank ping-pong at once (Send/Recv
 *                               one way, Isend/Irecv + Wait back), each message checksummed
 *
 * Options: --min --max --iters --warmup --window --large-iters --delay-ns (as emu_osu_tcp:
 * with --delay-ns N each rank waits N ns before each latency-mode send, the native
 * reference for an added latency of N, no emulator needed).
 * Output on rank 0: "size mean median" lines (latency us; bandwidth MB/s = 10^6 B/s).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/emu_pace.h"

static long min_size = 1, max_size = 4 << 20, iters = 1000, warmup = 100, window = 64, large_iters = 100;
static long delay_ns; /* --delay-ns N: each rank waits N ns before each latency-mode send */

static void delay_send(void)
{
    if (delay_ns > 0)
        emu_wait_until(emu_now_ns() + delay_ns, INT64_MAX);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
static long n_for(long size)
{
    return size > 65536 ? large_iters : iters;
}

static void latency(int rank, char *buf, double *t)
{
    if (rank == 0)
        printf("# perflearn emu_osu_mpi latency\n# size_bytes mean_us median_us\n");
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size);
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < warmup + n; i++) {
            if (rank == 0) {
                double t0 = MPI_Wtime();
                delay_send();
                MPI_Send(buf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warmup)
                    t[i - warmup] = (MPI_Wtime() - t0) * 1e6 / 2;
            } else {
                MPI_Recv(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                delay_send();
                MPI_Send(buf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double sum = 0;
            for (long i = 0; i < n; i++)
                sum += t[i];
            printf("%ld %.3f %.3f\n", size, sum / n, median(t, n));
            fflush(stdout);
        }
    }
}

static void bw(int rank, char *buf, double *t)
{
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)window);
    char ack[4] = "ack";
    if (rank == 0)
        printf("# perflearn emu_osu_mpi bw (window %ld)\n# size_bytes mean_MBps median_MBps\n", window);
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = 0;
        for (long i = 0; i < warmup + n; i++) {
            if (rank == 0) {
                if (i == warmup)
                    start = MPI_Wtime();
                double t0 = MPI_Wtime();
                for (long w = 0; w < window; w++)
                    MPI_Isend(buf, (int)size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warmup)
                    t[i - warmup] = (double)size * window / ((MPI_Wtime() - t0) * 1e6);
            } else {
                for (long w = 0; w < window; w++)
                    MPI_Irecv(buf, (int)size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            double total = MPI_Wtime() - start;
            printf("%ld %.3f %.3f\n", size, (double)size * window * n / (total * 1e6), median(t, n));
            fflush(stdout);
        }
    }
    free(req);
}

static uint64_t fnv(const unsigned char *b, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static int check(int rank)
{
    int bad = 0;
    size_t n = 1 << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        a[i] = (unsigned char)(i * 131 + 7);
    uint64_t want = fnv(a, n);
    int peer = 1 - rank;
    for (int k = 0; k < 20; k++) {
        size_t m = (size_t)1 << (k % 21);
        if (rank == 0)
            MPI_Send(a, (int)m, MPI_BYTE, 1, k, MPI_COMM_WORLD);
        else {
            memset(b, 0, n);
            MPI_Recv(b, (int)m, MPI_BYTE, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad |= fnv(b, m) != fnv(a, m);
        }
    }
    MPI_Request r[2];
    memset(b, 0, n);
    MPI_Irecv(b, (int)n, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(a, (int)n, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    bad |= fnv(b, n) != want;
    memset(b, 0, n);
    MPI_Sendrecv(a, (int)n, MPI_BYTE, peer, 78, b, (int)n, MPI_BYTE, peer, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    bad |= fnv(b, n) != want;
    /* one-sided */
    unsigned char *wbuf;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wbuf, &win);
    memset(wbuf, 0, n);
    MPI_Win_fence(0, win);
    MPI_Put(a, (int)n, MPI_BYTE, peer, 0, (int)n, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    bad |= fnv(wbuf, n) != want;
    MPI_Win_free(&win);
    /* a collective */
    long v = rank + 1, s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    bad |= s != 3;
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi %s\n", all ? "CORRUPT" : "ok");
    free(a);
    free(b);
    return all;
}

/* MPI_THREAD_MULTIPLE: THREADS threads a rank, each its own tag, ping-pong at once. */
#define THREADS 4
#define ROUNDS 200
static int thread_rank;
static int thread_bad[THREADS];

static void pattern(unsigned char *b, size_t n, int t, int i)
{
    for (size_t k = 0; k < n; k++)
        b[k] = (unsigned char)(k * 31 + (size_t)t * 7 + (size_t)i * 13);
}

static void *pingpong(void *arg)
{
    int t = (int)(intptr_t)arg, peer = 1 - thread_rank, tag = 100 + t;
    unsigned char *a = malloc(70000), *b = malloc(70000);
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = ((size_t)1 << (i % 16)) + (size_t)t; /* 2 B .. 32 KiB */
        pattern(a, n, t, i);
        memset(b, 0, n);
        if (thread_rank == 0) {
            MPI_Send(a, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
            MPI_Request r;
            MPI_Irecv(b, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Request r;
            MPI_Isend(b, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        thread_bad[t] |= fnv(b, n) != fnv(a, n);
    }
    free(a);
    free(b);
    return NULL;
}

static int threads(int rank, int provided)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("threads unsupported (provided %d)\n", provided);
        return 0;
    }
    thread_rank = rank;
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, pingpong, (void *)(intptr_t)t);
    int bad = 0, all = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        bad |= thread_bad[t];
    }
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0)
        printf("threads %s\n", all ? "CORRUPT" : "ok");
    return all;
}

int main(int argc, char **argv)
{
    int provided = MPI_THREAD_SINGLE;
    if (argc >= 2 && !strcmp(argv[1], "threads"))
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -n 2 emu_osu_mpi latency|bw|check|threads [--min B] [--max B] [--iters N]"
                            " [--warmup N] [--window W] [--large-iters N] [--delay-ns N]\n");
        MPI_Finalize();
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--min"))
            min_size = v;
        else if (!strcmp(argv[i], "--max"))
            max_size = v;
        else if (!strcmp(argv[i], "--iters"))
            iters = v;
        else if (!strcmp(argv[i], "--warmup"))
            warmup = v;
        else if (!strcmp(argv[i], "--window"))
            window = v;
        else if (!strcmp(argv[i], "--large-iters"))
            large_iters = v;
        else if (!strcmp(argv[i], "--delay-ns"))
            delay_ns = v < 0 ? 0 : v;
    }
    if (delay_ns > 0)
        emu_calibrate(); /* as the shims do when L is set */
    int rc = 0;
    if (!strcmp(argv[1], "check"))
        rc = check(rank);
    else if (!strcmp(argv[1], "threads"))
        rc = threads(rank, provided);
    else {
        char *buf = malloc((size_t)max_size);
        memset(buf, 'a', (size_t)max_size);
        double *t = malloc(sizeof(double) * (size_t)(iters > large_iters ? iters : large_iters));
        if (!strcmp(argv[1], "latency"))
            latency(rank, buf, t);
        else
            bw(rank, buf, t);
        free(buf);
        free(t);
    }
    MPI_Finalize();
    return rc;
}
