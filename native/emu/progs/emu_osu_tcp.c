/* OSU-style validation over TCP (and a checksummed-stream check), our own code.
 *
 *   emu_osu_tcp latency [opts]   ping-pong, half round trip per size (osu_latency)
 *   emu_osu_tcp bw [opts]        window of W non-blocking sends, then a 4-byte ack (osu_bw)
 *   emu_osu_tcp check [opts]     random-sized writes through send/write/writev/sendmsg,
 *                                both directions, FNV-1a checked; UDP datagrams too
 *
 * By default the program forks: the child serves on 127.0.0.1, the parent
 * measures, so both ends run under the same LD_PRELOAD.  --serve PORT and
 * --connect HOST:PORT split the ends (for network namespaces).
 *
 * Options: --min BYTES --max BYTES --iters N --warmup N --window W
 *          --large-iters N (for sizes > 64 KiB) --bytes N (check)
 *          --busy 1: receivers spin on non-blocking recv instead of sleeping
 *          (separates the emulator's error from the kernel's wake-up cost)
 *          --cpus A,B: pin the measuring end to CPU A and the serving end to CPU B
 *          (as `mpirun --bind-to core`: otherwise the scheduler puts the two ends
 *          on one CPU in some runs and on two in others, 2.5 vs 4.7 us here)
 *          --delay-ns N: latency mode, no emulator needed: each end waits N ns
 *          (the emulator's own calibrated wait, linked in) before each send, so
 *          every message arrives N later (with --busy 1 it polls meanwhile).
 *          The native reference for an added latency of N: what this machine
 *          itself does when messages come later.
 *          --idle-thread shared|own: one idle thread more in each end, sharing the
 *          descriptor table or with one of its own (unshare), as the socket shim's
 *          delay-line thread has: what a second thread costs a single-threaded
 *          program's socket calls (with a shared table Linux takes a reference on
 *          the socket's file at every call).
 * Output (stdout): "# ..." header, then "size value p50" lines; latency in us
 * (mean, median), bandwidth in MB/s (10^6 bytes/s; mean over iterations, median).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/emu_pace.h"

static long min_size = 1, max_size = 4 << 20, iters = 1000, warmup = 100, window = 64, large_iters = 100;
static long check_bytes = 32 << 20;
static int busy; /* --busy 1: receivers poll with non-blocking recv instead of sleeping */
static long delay_ns; /* --delay-ns N: each end waits N ns before each latency-mode send */

/* --delay-ns: the message leaves N later, as the emulator's latency knob makes it
 * arrive.  With --busy the end keeps polling its socket meanwhile, as a polling
 * program does while its message is in flight; the last POLL_SPIN_NS it spins,
 * so that the message leaves on time, as the emulator's own polling path does. */
#define POLL_SPIN_NS 2000
static void delay_send(int fd)
{
    if (delay_ns <= 0)
        return;
    int64_t due = emu_now_ns() + delay_ns;
    char none[64];
    while (busy && emu_now_ns() < due - POLL_SPIN_NS)
        if (recv(fd, none, sizeof none, MSG_DONTWAIT) > 0) {
            fprintf(stderr, "emu_osu_tcp: data before the reply was sent\n");
            exit(2);
        }
    emu_wait_until(due, INT64_MAX);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t r = send(fd, b, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
                continue;
            }
            die("send");
        }
        b += r;
        n -= (size_t)r;
    }
}

static void read_all(int fd, char *b, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, b, n, busy ? MSG_DONTWAIT : 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                if (busy)
                    continue;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                poll(&p, 1, -1);
                continue;
            }
            die("recv");
        }
        if (r == 0) {
            fprintf(stderr, "emu_osu_tcp: peer closed\n");
            exit(2);
        }
        b += r;
        n -= (size_t)r;
    }
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int listen_on(const char *host, int port, int *bound)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        die("bind");
    if (listen(s, 4) != 0)
        die("listen");
    socklen_t l = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &l);
    *bound = ntohs(a.sin_port);
    return s;
}

static int connect_to(const char *host, int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "emu_osu_tcp: bad address %s\n", host);
        exit(2);
    }
    for (int tries = 0;; tries++) {
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            break;
        if (tries > 200)
            die("connect");
        usleep(10000); /* waiting for the server to come up, not timing */
    }
    nodelay(s);
    return s;
}

static long n_for(long size)
{
    return size > 65536 ? large_iters : iters;
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

/* ---------------------------------------------------------------- latency */

static void lat_server(int c, char *buf)
{
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size) + warmup;
        for (long i = 0; i < n; i++) {
            read_all(c, buf, (size_t)size);
            delay_send(c);
            write_all(c, buf, (size_t)size);
        }
    }
}

static void lat_client(int c, char *buf)
{
    printf("# perflearn emu_osu_tcp latency\n# size_bytes mean_us median_us\n");
    double *t = malloc(sizeof(double) * (size_t)(iters > large_iters ? iters : large_iters));
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size);
        for (long i = 0; i < warmup + n; i++) {
            double t0 = now_us();
            delay_send(c);
            write_all(c, buf, (size_t)size);
            read_all(c, buf, (size_t)size);
            if (i >= warmup)
                t[i - warmup] = (now_us() - t0) / 2;
        }
        double sum = 0;
        for (long i = 0; i < n; i++)
            sum += t[i];
        printf("%ld %.3f %.3f\n", size, sum / n, median(t, n));
        fflush(stdout);
    }
    free(t);
}

/* ---------------------------------------------------------------- bandwidth */

static void bw_server(int c, char *buf)
{
    char ack[4] = "ack";
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size) + warmup;
        for (long i = 0; i < n; i++) {
            for (long w = 0; w < window; w++)
                read_all(c, buf, (size_t)size);
            write_all(c, ack, 4);
        }
    }
}

static void bw_client(int c, char *buf)
{
    printf("# perflearn emu_osu_tcp bw (window %ld)\n# size_bytes mean_MBps median_MBps\n", window);
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK); /* non-blocking sends */
    char ack[4];
    double *t = malloc(sizeof(double) * (size_t)(iters > large_iters ? iters : large_iters));
    for (long size = min_size; size <= max_size; size *= 2) {
        long n = n_for(size);
        double start = 0;
        for (long i = 0; i < warmup + n; i++) {
            if (i == warmup)
                start = now_us();
            double t0 = now_us();
            for (long w = 0; w < window; w++)
                write_all(c, buf, (size_t)size);
            read_all(c, ack, 4);
            if (i >= warmup)
                t[i - warmup] = (double)size * window / (now_us() - t0);
        }
        double total = now_us() - start;
        printf("%ld %.3f %.3f\n", size, (double)size * window * n / total, median(t, n));
        fflush(stdout);
    }
    free(t);
}

/* ---------------------------------------------------------------- checksummed streams */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(char *b, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(rng_next(s) >> 24);
}

/* Send check_bytes of a seeded pseudo-random stream in random-sized pieces via
 * every entry point, while reading the peer's stream back; verify it. */
static int check_peer(int c, uint64_t seed_out, uint64_t seed_in)
{
    uint64_t gen = seed_out, ver = seed_in, sizes = seed_out * 7 + 1;
    char *out = malloc(1 << 20), *in = malloc(1 << 20), *want = malloc(1 << 20);
    long sent = 0, got = 0;
    int bad = 0;
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    size_t pend = 0, pend_off = 0;
    int how = 0;
    while (sent < check_bytes || got < check_bytes) {
        if (pend == pend_off && sent < check_bytes) {
            size_t n = (size_t)(rng_next(&sizes) % 300000) + 1;
            if ((long)n > check_bytes - sent)
                n = (size_t)(check_bytes - sent);
            fill(out, n, &gen);
            pend = n;
            pend_off = 0;
        }
        struct pollfd p = {.fd = c, .events = POLLIN | (pend > pend_off ? POLLOUT : 0)};
        poll(&p, 1, 1000);
        if ((p.revents & POLLOUT) && pend > pend_off) {
            ssize_t r;
            size_t n = pend - pend_off;
            char *b = out + pend_off;
            switch (how++ % 4) {
            case 0:
                r = send(c, b, n, 0);
                break;
            case 1:
                r = write(c, b, n);
                break;
            case 2: {
                struct iovec v[3] = {{b, n / 3}, {b + n / 3, n / 3}, {b + 2 * (n / 3), n - 2 * (n / 3)}};
                r = writev(c, v, 3);
                break;
            }
            default: {
                struct iovec v[2] = {{b, n / 2}, {b + n / 2, n - n / 2}};
                struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
                r = sendmsg(c, &m, 0);
            }
            }
            if (r < 0 && errno != EAGAIN && errno != EINTR)
                die("send");
            if (r > 0) {
                pend_off += (size_t)r;
                sent += r;
            }
        }
        if (p.revents & (POLLIN | POLLHUP)) {
            ssize_t r = recv(c, in, 1 << 20, 0);
            if (r < 0 && errno != EAGAIN && errno != EINTR)
                die("recv");
            if (r == 0 && got < check_bytes) {
                fprintf(stderr, "emu_osu_tcp check: early end of stream at %ld\n", got);
                return 1;
            }
            if (r > 0) {
                fill(want, (size_t)r, &ver);
                if (memcmp(in, want, (size_t)r) != 0)
                    bad = 1;
                got += r;
            }
        }
    }
    free(out);
    free(in);
    free(want);
    return bad;
}

static int udp_check(void)
{
    /* a child echoes 200 datagrams of up to 8 KiB; the parent verifies them */
    int s = socket(AF_INET, SOCK_DGRAM, 0), c = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(s, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &l);
    pid_t pid = fork();
    if (pid == 0) {
        char b[9000];
        for (int i = 0; i < 200; i++) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t r = recvfrom(s, b, sizeof b, 0, (struct sockaddr *)&from, &fl);
            if (r < 0)
                _exit(1);
            sendto(s, b, (size_t)r, 0, (struct sockaddr *)&from, fl);
        }
        _exit(0);
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint64_t seed = 99;
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        char b[9000], r[9000];
        size_t n = (size_t)(rng_next(&seed) % 8192) + 1;
        fill(b, n, &seed);
        sendto(c, b, n, 0, (struct sockaddr *)&a, sizeof a);
        ssize_t got = recv(c, r, sizeof r, 0);
        if (got != (ssize_t)n || memcmp(b, r, n) != 0) {
            if (!bad)
                fprintf(stderr, "emu_osu_tcp check: datagram %d: sent %zu, got %zd (%s)%s\n", i, n, got, got < 0 ? strerror(errno) : "",
                        got == (ssize_t)n ? " (bytes differ)" : "");
            bad = 1;
        }
    }
    int st;
    waitpid(pid, &st, 0);
    return bad || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

/* ---------------------------------------------------------------- main */

static const char *idle_thread; /* --idle-thread shared|own */

static void *idle_main(void *arg)
{
    (void)arg;
    if (!strcmp(idle_thread, "own") && unshare(CLONE_FILES) == 0)
        syscall(SYS_close_range, 0U, ~0U, 0); /* its copies would keep pipes open */
    for (;;)
        pause();
    return NULL;
}

/* One end, pinned, starts its idle thread (it inherits the CPU). */
static void start_idle_thread(void)
{
    pthread_t t;
    if (idle_thread && pthread_create(&t, NULL, idle_main, NULL) != 0)
        die("pthread_create");
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: emu_osu_tcp latency|bw|check [--min B] [--max B] [--iters N] [--warmup N]"
                        " [--window W] [--large-iters N] [--bytes N] [--busy 1] [--cpus A,B] [--delay-ns N] [--idle-thread shared|own]"
                        " [--serve PORT | --connect HOST:PORT]\n");
        return 2;
    }
    const char *mode = argv[1];
    int serve = -1;
    char host[64] = "127.0.0.1";
    int cport = 0;
    int cpu_self = -1, cpu_peer = -1;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "emu_osu_tcp: %s needs a value\n", o);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(o, "--min"))
            min_size = atol(v);
        else if (!strcmp(o, "--max"))
            max_size = atol(v);
        else if (!strcmp(o, "--iters"))
            iters = atol(v);
        else if (!strcmp(o, "--warmup"))
            warmup = atol(v);
        else if (!strcmp(o, "--window"))
            window = atol(v);
        else if (!strcmp(o, "--large-iters"))
            large_iters = atol(v);
        else if (!strcmp(o, "--idle-thread")) {
            if (strcmp(v, "shared") && strcmp(v, "own")) {
                fprintf(stderr, "emu_osu_tcp: --idle-thread shared|own\n");
                return 2;
            }
            idle_thread = v;
        } else if (!strcmp(o, "--busy"))
            busy = atoi(v);
        else if (!strcmp(o, "--delay-ns")) {
            char *e;
            delay_ns = strtol(v, &e, 10);
            if (*e || delay_ns < 0) {
                fprintf(stderr, "emu_osu_tcp: --delay-ns N (nanoseconds, >= 0)\n");
                return 2;
            }
        }
        else if (!strcmp(o, "--bytes"))
            check_bytes = atol(v);
        else if (!strcmp(o, "--cpus")) {
            if (sscanf(v, "%d,%d", &cpu_self, &cpu_peer) != 2 || cpu_self < 0 || cpu_peer < 0) {
                fprintf(stderr, "emu_osu_tcp: --cpus A,B (two CPU numbers)\n");
                return 2;
            }
        } else if (!strcmp(o, "--serve"))
            serve = atoi(v);
        else if (!strcmp(o, "--connect")) {
            const char *c = strrchr(v, ':');
            if (!c || (size_t)(c - v) >= sizeof host) {
                fprintf(stderr, "emu_osu_tcp: --connect HOST:PORT\n");
                return 2;
            }
            memcpy(host, v, (size_t)(c - v));
            host[c - v] = '\0';
            cport = atoi(c + 1);
        } else {
            fprintf(stderr, "emu_osu_tcp: unknown option %s\n", o);
            return 2;
        }
    }
    if (min_size < 1 || max_size < min_size || iters < 1 || warmup < 0 || window < 1 || large_iters < 1) {
        fprintf(stderr, "emu_osu_tcp: bad sizes or counts\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (delay_ns > 0)
        emu_calibrate(); /* as the shims do when L is set */
    int is_check = !strcmp(mode, "check");
    if (!is_check && strcmp(mode, "latency") && strcmp(mode, "bw")) {
        fprintf(stderr, "emu_osu_tcp: unknown mode %s\n", mode);
        return 2;
    }
    char *buf = malloc((size_t)max_size);
    memset(buf, 'a', (size_t)max_size);

    if (serve >= 0 || cport > 0) { /* split ends */
        if (serve >= 0) {
            int bound;
            int l = listen_on("0.0.0.0", serve, &bound);
            int c = accept(l, NULL, NULL);
            nodelay(c);
            if (is_check)
                return check_peer(c, 2, 1);
            if (!strcmp(mode, "latency"))
                lat_server(c, buf);
            else
                bw_server(c, buf);
            close(c);
            return 0;
        }
        int c = connect_to(host, cport);
        if (is_check)
            return check_peer(c, 1, 2);
        if (!strcmp(mode, "latency"))
            lat_client(c, buf);
        else
            bw_client(c, buf);
        close(c);
        return 0;
    }

    int port;
    int l = listen_on("127.0.0.1", 0, &port);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        pin(cpu_peer);
        start_idle_thread();
        int c = accept(l, NULL, NULL);
        nodelay(c);
        close(l);
        int rc = 0;
        if (is_check)
            rc = check_peer(c, 2, 1);
        else if (!strcmp(mode, "latency"))
            lat_server(c, buf);
        else
            bw_server(c, buf);
        close(c);
        exit(rc);
    }
    close(l);
    pin(cpu_self);
    start_idle_thread();
    int c = connect_to("127.0.0.1", port);
    int rc = 0;
    if (is_check) {
        rc = check_peer(c, 1, 2);
        shutdown(c, SHUT_WR);
        close(c);
        int urc = udp_check();
        int st;
        waitpid(pid, &st, 0);
        int child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("tcp %s, udp %s, peer %s\n", rc ? "CORRUPT" : "ok", urc ? "CORRUPT" : "ok", child_ok ? "ok" : "CORRUPT");
        return rc || urc || !child_ok;
    }
    if (!strcmp(mode, "latency"))
        lat_client(c, buf);
    else
        bw_client(c, buf);
    close(c);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
