/* perflearn-emu socket shim (LD_PRELOAD): interconnect latency, overhead and
 * bandwidth below unmodified programs that talk TCP or UDP.
 *
 *   overhead  o: the sending thread spins o ns per message (LogGP's o).
 *   bandwidth B: one link per process (its NIC), paced on CLOCK_MONOTONIC;
 *                large messages go out in chunks of `threshold` bytes, each no
 *                earlier than its serialisation end; messages below the
 *                threshold run ahead of the wire by at most threshold bytes.
 *   latency   L: a delay line.  The message is copied into a FIFO and the
 *                call returns at once; a helper thread writes it at
 *                (serialisation end + L).  Pipelined messages overlap, as on a
 *                wire, instead of each paying L in the sender.
 *
 * Only AF_INET/AF_INET6 stream and datagram sockets matching PERFLEARN_EMU_PEERS
 * are touched; files, pipes, AF_UNIX and other sockets go straight through.
 * Bytes are never changed.  Configuration: PERFLEARN_EMU_* (see emu_pace.h).
 * Real functions are resolved once with dlsym(RTLD_NEXT); a thread-local guard
 * keeps the shim out of its own way.
 */
#define _GNU_SOURCE
#include "emu_pace.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sys/epoll.h>
#include <sys/select.h>

#define EXPORT __attribute__((visibility("default")))

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
#define FDMAX 65536

/* ---------------------------------------------------------------- real functions */

static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*real_sendmsg)(int, const struct msghdr *, int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_close)(int);
static int (*real_shutdown)(int, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int (*real_socket)(int, int, int);
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execv)(const char *, char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
static ssize_t (*real___read_chk)(int, void *, size_t, size_t);
static ssize_t (*real___recv_chk)(int, void *, size_t, size_t, int);
static ssize_t (*real___recvfrom_chk)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
static int (*real___poll_chk)(struct pollfd *, nfds_t, int, size_t);

#define RESOLVE(name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)

static void resolve_all(void)
{
    RESOLVE(send);
    RESOLVE(sendto);
    RESOLVE(sendmsg);
    RESOLVE(write);
    RESOLVE(writev);
    RESOLVE(close);
    RESOLVE(shutdown);
    RESOLVE(connect);
    RESOLVE(socket);
    RESOLVE(accept);
    RESOLVE(accept4);
    RESOLVE(dup2);
    RESOLVE(dup3);
    RESOLVE(sendfile);
    RESOLVE(execve);
    RESOLVE(execv);
    RESOLVE(execvp);
    RESOLVE(execvpe);
    RESOLVE(recv);
    RESOLVE(recvfrom);
    RESOLVE(recvmsg);
    RESOLVE(read);
    RESOLVE(readv);
    RESOLVE(poll);
    RESOLVE(ppoll);
    RESOLVE(select);
    RESOLVE(pselect);
    RESOLVE(epoll_wait);
    RESOLVE(epoll_pwait);
    RESOLVE(__read_chk);
    RESOLVE(__recv_chk);
    RESOLVE(__recvfrom_chk);
    RESOLVE(__poll_chk);
}

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
#define ENSURE(name)                                         \
    do {                                                     \
        if (__builtin_expect(real_##name == NULL, 0))        \
            pthread_once(&resolve_once, resolve_all);        \
    } while (0)

/* ---------------------------------------------------------------- state */

static emu_config cfg;
static int enabled;          /* configuration parsed and some knob non-zero */
static __thread int in_shim; /* recursion guard */

enum { FD_UNKNOWN = 0, FD_PASS, FD_STREAM, FD_DGRAM /* unconnected: per destination */, FD_DGRAM_EMU };
static unsigned char fdstate[FDMAX];

static pthread_mutex_t link_mu = PTHREAD_MUTEX_INITIALIZER;
static emu_link link_out;

static unsigned long long st_lazy, st_miss, st_kick, st_flushed, st_msgs, st_bytes, st_late_n, st_late_ns, st_late_max; /* emulated sends (approximate under threads) */
/* how late the delay line writes, past the deadline: bins of 10 ns up to 640 ns, then
 * 8 per octave (6 % wide) up to seconds; a percentile is its bin's upper edge */
#define LATE_LIN 64
#define LATE_BINS (LATE_LIN + 8 * 26)
static unsigned st_late_hist[LATE_BINS];
static int late_bin(uint64_t ns)
{
    if (ns < 10 * LATE_LIN)
        return (int)(ns / 10);
    int oct = 63 - __builtin_clzll(ns / (10 * LATE_LIN)); /* ns >= 640 * 2^oct */
    int sub = (int)(ns * 8 / ((uint64_t)(10 * LATE_LIN) << oct)) - 8; /* eighth of the octave */
    int b = LATE_LIN + 8 * oct + (sub < 0 ? 0 : sub > 7 ? 7 : sub);
    return b < LATE_BINS ? b : LATE_BINS - 1;
}
static unsigned long long late_edge(int b)
{
    if (b < LATE_LIN)
        return (unsigned long long)(b + 1) * 10;
    int oct = (b - LATE_LIN) / 8, sub = (b - LATE_LIN) % 8;
    return (unsigned long long)(10 * LATE_LIN) * (8 + sub + 1) / 8 << oct;
}
static unsigned long long late_pct(double q)
{
    if (st_late_n == 0)
        return 0;
    unsigned long long want = (unsigned long long)(q * (double)st_late_n), seen = 0;
    for (int i = 0; i < LATE_BINS; i++)
        if ((seen += st_late_hist[i]) > want)
            return late_edge(i);
    return late_edge(LATE_BINS - 1);
}

/* delay line */
struct chunk {
    struct chunk *next;
    uint64_t seq; /* order in the line */
    int lazy;     /* queued without waking the helper */
    int pool;     /* 1 + its buffer pool's class, 0: plain malloc */
    int fd;
    int flags;
    int64_t release;
    size_t len, off;
    socklen_t alen;
    struct sockaddr_storage addr;
    char data[];
};
/* Delay-line buffers of 4 KiB and more are recycled.  A sender of large messages
 * would otherwise malloc and free a 64 KiB piece per message, and glibc gives the top
 * of its heap back to the kernel at such frees, so every piece was page-faulted in
 * again (15 faults a piece: 8 Gbit/s in 64 KiB pieces read 5.5 % short, the copy into
 * the line being slower than the link).  Classes are powers of two; at most
 * PERFLEARN_EMU_QUEUE bytes are kept, what the line may hold anyway. */
#define POOL_MIN_SHIFT 12
#define POOL_CLASSES 20
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct chunk *pool_free[POOL_CLASSES];
static size_t pool_bytes;

static struct chunk *chunk_new(size_t len)
{
    int k = 0;
    while (k < POOL_CLASSES && ((size_t)1 << (k + POOL_MIN_SHIFT)) < len)
        k++;
    struct chunk *c = NULL;
    if (len >= ((size_t)1 << POOL_MIN_SHIFT) && k < POOL_CLASSES) {
        pthread_mutex_lock(&pool_mu);
        if ((c = pool_free[k])) {
            pool_free[k] = c->next;
            pool_bytes -= (size_t)1 << (k + POOL_MIN_SHIFT);
        }
        pthread_mutex_unlock(&pool_mu);
        if (!c && (c = malloc(sizeof *c + ((size_t)1 << (k + POOL_MIN_SHIFT)))))
            c->pool = k + 1;
        return c;
    }
    if ((c = malloc(sizeof *c + len)))
        c->pool = 0;
    return c;
}

static void chunk_free(struct chunk *c)
{
    if (c->pool > 0) {
        size_t cap = (size_t)1 << (c->pool - 1 + POOL_MIN_SHIFT);
        pthread_mutex_lock(&pool_mu);
        if (pool_bytes + cap <= (size_t)cfg.queue_max) {
            c->next = pool_free[c->pool - 1];
            pool_free[c->pool - 1] = c;
            pool_bytes += cap;
            c = NULL;
        }
        pthread_mutex_unlock(&pool_mu);
    }
    free(c);
}

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_work; /* helper: new work */
static pthread_cond_t q_done; /* senders and drainers: progress */
static struct chunk *q_head, *q_tail;
static size_t q_bytes;
static int q_pending[FDMAX];
static int q_err[FDMAX];
static int helper_running, helper_sleeping;
/* Lazy hand-off.  A thread whose last LAZY_STREAK chunks it wrote itself before
 * blocking (a ping-pong) does not wake a sleeping helper for its next one: it
 * will most likely write it itself, and the wake-up would put the helper on the
 * CPU its peer is about to need.  The helper then sleeps at most LAZY_POLL_NS at
 * a time, so if the thread neither blocks, sends again, closes nor exits, the
 * chunk leaves at most that late.  Such a miss (a lazy chunk the helper wrote
 * more than LAZY_MISS_NS past its time) restarts every thread's streak and
 * doubles the streak needed (up to LAZY_STREAK_MAX): a thread that often sends
 * and then does not block soon is soon never lazy. */
#define LAZY_STREAK 16
#define LAZY_POLL_NS 1000000
#define LAZY_STREAK_MAX (1u << 20)
#define LAZY_MISS_NS 20000
#define LAZY_RECENT_NS 10000000
static int helper_timed;          /* q_mu: the helper sleeps at most LAZY_POLL_NS */
static int64_t q_last_flush;      /* when a thread last wrote its own chunks */
static unsigned q_lazy_need = LAZY_STREAK; /* q_mu */
static unsigned q_miss_gen;                /* q_mu: misses so far */
static __thread unsigned my_streak, my_gen;
/* PERFLEARN_EMU_HOT: the helper spins (yielding) this long when idle.  By default
 * 50 us plus two one-way trips (2(L+o)): in a ping-pong the next message follows
 * a round trip later, and a helper that went to sleep meanwhile pays a wake-up
 * (tens of us on an idle VM) on every hop. */
static int64_t hot_ns = -1;

static void say(const char *msg)
{
    char line[512];
    int n = snprintf(line, sizeof line, "perflearn-emu: %s\n", msg);
    if (n > 0 && real_write)
        (void)!real_write(2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* ---------------------------------------------------------------- classification */

static int sock_local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

static int classify(int fd)
{
    if (fd < 0)
        return FD_PASS;
    if (fd < FDMAX && fdstate[fd] != FD_UNKNOWN)
        return fdstate[fd];
    int st = FD_PASS, cache = 1;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int type = 0;
        socklen_t tl = sizeof type;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
            (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0) {
            int lport = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                                : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            struct sockaddr_storage ps;
            socklen_t pl = sizeof ps;
            int connected = getpeername(fd, (struct sockaddr *)&ps, &pl) == 0;
            if (type == SOCK_STREAM) {
                if (!connected)
                    cache = 0; /* not yet: decide once it is */
                else if (emu_peer_match(&cfg, &ps, lport))
                    st = FD_STREAM;
            } else if (type == SOCK_DGRAM) {
                if (!connected)
                    st = FD_DGRAM;
                else if (emu_peer_match(&cfg, &ps, lport))
                    st = FD_DGRAM_EMU;
            }
        }
    } else if (errno == EBADF)
        cache = 0;
    if (cache && fd < FDMAX)
        fdstate[fd] = (unsigned char)st;
    return st;
}

static void forget(int fd)
{
    if (fd >= 0 && fd < FDMAX)
        fdstate[fd] = FD_UNKNOWN;
}

/* ---------------------------------------------------------------- delay line */

static void *helper_main(void *arg);

static void helper_start_locked(void)
{
    if (helper_running)
        return;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the helper takes no signals */
    if (pthread_create(&t, &a, helper_main, NULL) == 0)
        helper_running = 1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

/* Drop every queued chunk of fd (after a write error). q_mu held. */
static void drop_fd_locked(int fd)
{
    struct chunk **pp = &q_head, *prev = NULL;
    while (*pp) {
        struct chunk *c = *pp;
        if (c->fd == fd) {
            *pp = c->next;
            if (q_tail == c)
                q_tail = prev;
            q_bytes -= c->len;
            if (fd < FDMAX)
                q_pending[fd]--;
            chunk_free(c);
        } else {
            prev = c;
            pp = &c->next;
        }
    }
}

/* The helper's own descriptor table.  A second thread makes a single-threaded
 * program multithreaded, and Linux then takes a reference on a socket's file at
 * every socket call of every thread (fdget loses its one-table fast path): 45-70 ns
 * more per hop of a TCP ping-pong here, measured with one idle thread and no
 * emulator (BENCHMARKS.md, session 20).
 * So the helper moves to a table of its own (unshare(CLONE_FILES)) and writes its
 * chunks through its own duplicates of the sockets (pidfd_getfd), held only while it
 * writes for them; close, dup2 and dup3 over a descriptor wait until the helper has
 * let go of it, so its socket closes on time and a reused number never reaches the
 * old socket.  Where the kernel lacks either call (or PERFLEARN_EMU_HELPER_TABLE=shared)
 * the helper shares the table. */
static int want_own_files = 1; /* PERFLEARN_EMU_HELPER_TABLE=shared: never (a seccomp filter that kills on
                                 * pidfd_open, or to measure the difference) */
static int own_files;         /* the helper has its own table */
static int own_pidfd = -1;    /* helper's table: this process */
static int hfd[FDMAX];        /* q_mu: the helper's descriptor for fd, plus one (0: none) */
static unsigned char hfd_want[FDMAX]; /* q_mu: an application thread waits for the helper to let go of fd */
static int hfd_asked;         /* q_mu, read lock-free by the helper: some hfd_want is set */
static int *held, held_n, held_cap; /* q_mu: the fds with an hfd, for letting go */

/* In the helper, at its start: its own table, or nothing changed. */
static void helper_own_table(void)
{
    if (!want_own_files)
        return;
    /* try both calls in the shared table first: after unshare there is no way back */
    int probe_pid = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (probe_pid < 0)
        return;
    int probe = (int)syscall(SYS_pidfd_getfd, probe_pid, probe_pid, 0);
    if (probe >= 0)
        real_close(probe);
    real_close(probe_pid);
    if (probe < 0 || unshare(CLONE_FILES) != 0)
        return;
    /* our copy of every descriptor would keep pipes and sockets open: none kept */
    if (syscall(SYS_close_range, 0U, ~0U, 0) != 0)
        for (int fd = 0; fd < FDMAX; fd++)
            real_close(fd);
    own_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0); /* fd 0 here; if it failed, writes fail (EBADF) */
    while (open("/dev/null", O_RDWR | O_CLOEXEC) >= 0 && open("/dev/null", O_RDWR | O_CLOEXEC) < 2)
        ; /* 1 and 2, so no duplicate becomes our stdout or stderr */
    own_files = 1;
}

/* The descriptor the helper writes fd's chunks through (q_mu held), or -1. */
static int helper_fd_locked(int fd)
{
    if (!own_files)
        return fd;
    if (fd < 0 || fd >= FDMAX || own_pidfd < 0)
        return -1;
    if (!hfd[fd]) {
        int dup = (int)syscall(SYS_pidfd_getfd, own_pidfd, fd, 0);
        if (dup < 0)
            return -1;
        if (held_n == held_cap) {
            int cap = held_cap ? 2 * held_cap : 16, *more = realloc(held, sizeof *held * (size_t)cap);
            if (!more) {
                real_close(dup);
                return -1;
            }
            held = more;
            held_cap = cap;
        }
        held[held_n++] = fd;
        hfd[fd] = dup + 1;
    }
    return hfd[fd] - 1;
}

/* In the helper (q_mu held): close the duplicates no chunk needs (all: every one not
 * asked for and still pending is kept). */
static void helper_let_go_locked(int all)
{
    int kept = 0, freed = 0;
    for (int i = 0; i < held_n; i++) {
        int fd = held[i];
        if (hfd_want[fd] || (all && !q_pending[fd])) {
            real_close(hfd[fd] - 1);
            hfd[fd] = 0;
            hfd_want[fd] = 0;
            freed = 1;
        } else
            held[kept++] = fd;
    }
    held_n = kept;
    __atomic_store_n(&hfd_asked, 0, __ATOMIC_RELEASE);
    if (freed)
        pthread_cond_broadcast(&q_done);
}

/* An application thread is about to close or replace fd: wait until the helper holds
 * no duplicate of it. */
static void helper_let_go(int fd)
{
    if (!own_files || fd < 0 || fd >= FDMAX)
        return;
    pthread_mutex_lock(&q_mu);
    if (hfd[fd] && helper_running) {
        hfd_want[fd] = 1;
        __atomic_store_n(&hfd_asked, 1, __ATOMIC_RELEASE);
        if (helper_sleeping)
            pthread_cond_signal(&q_work);
        while (hfd[fd] && helper_running)
            pthread_cond_wait(&q_done, &q_mu);
    }
    pthread_mutex_unlock(&q_mu);
}

/* The writer token: one thread at a time (the helper, or an application thread
 * about to block) waits for the head chunk's time and writes it, so a chunk is
 * never written twice and the line stays in order.  Only the token holder
 * removes the head (drop_fd_locked runs under the token too). */
static int q_writer;            /* q_mu; read lock-free by flushers waiting for it */
static int q_flushers;          /* application threads flushing their own chunks */
static uint64_t q_seq;          /* q_mu: sequence number of the last chunk queued */
static uint64_t q_head_seq = UINT64_MAX; /* seq of the head chunk (UINT64_MAX: empty), read lock-free */
static int64_t q_head_release = INT64_MAX; /* and its time */
static __thread uint64_t my_seq; /* the last chunk this thread queued */

static void head_changed_locked(void)
{
    __atomic_store_n(&q_head_release, q_head ? q_head->release : INT64_MAX, __ATOMIC_RELEASE);
    __atomic_store_n(&q_head_seq, q_head ? q_head->seq : UINT64_MAX, __ATOMIC_RELEASE);
}

enum { D_DONE, D_AGAIN, D_ERR, D_STOPPED };

/* Wait for c's time (giving up when stop says so) and write it.  The caller
 * holds the token, not q_mu.  *err: errno of a failed write. */
static int deliver(struct chunk *c, int fd, int (*stop)(void *, int64_t), void *arg, int *err)
{
    size_t want = c->len - c->off;
    /* nothing between the wait and the write: every step there adds to L (the lateness
     * statistics, written here before session 19, cost a TCP hop ~50 ns: after it) */
    int64_t late = emu_wait_until_or(c->release, cfg.spin_ns, stop, arg);
    if (late < 0)
        return D_STOPPED;
    int first = c->off == 0;
    ssize_t r = real_sendto(fd, c->data + c->off, want, c->flags | MSG_DONTWAIT | MSG_NOSIGNAL,
                            c->alen ? (struct sockaddr *)&c->addr : NULL, c->alen);
    int e = errno;
    if (first) {
        st_late_n++;
        st_late_ns += (unsigned long long)late;
        st_late_hist[late_bin((uint64_t)late)]++;
        if ((unsigned long long)late > st_late_max)
            st_late_max = (unsigned long long)late;
    }
    if (r == (ssize_t)want)
        return D_DONE;
    if (r >= 0 || e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ENOBUFS) {
        if (r > 0)
            c->off += (size_t)r;
        return D_AGAIN;
    }
    *err = e;
    return D_ERR;
}

/* After deliver, with q_mu held again and the token still ours. */
static void delivered_locked(struct chunk *c, int st, int err)
{
    int fd = c->fd;
    if (st == D_DONE) {
        q_head = c->next;
        if (!q_head)
            q_tail = NULL;
        head_changed_locked();
        q_bytes -= c->len;
        if (fd < FDMAX)
            q_pending[fd]--;
        chunk_free(c);
        pthread_cond_broadcast(&q_done);
    } else if (st == D_ERR) {
        if (fd < FDMAX)
            q_err[fd] = err;
        drop_fd_locked(fd);
        head_changed_locked();
        pthread_cond_broadcast(&q_done);
    }
}

static int helper_stop(void *arg, int64_t now)
{
    (void)arg; /* an application thread wants the line (to write its own, or a descriptor let go) */
    (void)now;
    return __atomic_load_n(&q_flushers, __ATOMIC_ACQUIRE) > 0 || __atomic_load_n(&hfd_asked, __ATOMIC_ACQUIRE);
}

/* Work for the helper: a head chunk, the token free, and no application
 * thread flushing (it writes what it needs itself). */
static int helper_work(void)
{
    return __atomic_load_n(&q_head, __ATOMIC_ACQUIRE) && !__atomic_load_n(&q_writer, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&q_flushers, __ATOMIC_ACQUIRE);
}

static void *helper_main(void *arg)
{
    (void)arg;
    in_shim = 1;
    const int64_t hot = hot_ns;
    helper_own_table();
    pthread_mutex_lock(&q_mu);
    for (;;) {
        if (!helper_work() && hot > 0 && !q_flushers) {
            /* stay hot for a while: the next message usually follows soon */
            pthread_mutex_unlock(&q_mu);
            int64_t until = emu_now_ns() + hot;
            while (!helper_work() && !__atomic_load_n(&q_flushers, __ATOMIC_ACQUIRE) &&
                   !__atomic_load_n(&hfd_asked, __ATOMIC_ACQUIRE) && emu_now_ns() < until)
                sched_yield(); /* let the application's threads have the CPU */
            pthread_mutex_lock(&q_mu);
        }
        /* while an application thread flushes, sleep: it is about to block, and
         * its peer may need this CPU; it wakes us if it leaves chunks behind */
        while (!helper_work()) {
            if (held_n)
                helper_let_go_locked(1); /* idle: no duplicate kept (and any asked for let go) */
            int64_t now = emu_now_ns();
            helper_sleeping = 1;
            helper_timed = now - __atomic_load_n(&q_last_flush, __ATOMIC_RELAXED) < LAZY_RECENT_NS;
            if (helper_timed) {
                int64_t until = now + LAZY_POLL_NS;
                struct timespec ts = {.tv_sec = until / 1000000000LL, .tv_nsec = until % 1000000000LL};
                pthread_cond_timedwait(&q_work, &q_mu, &ts);
            } else
                pthread_cond_wait(&q_work, &q_mu);
            helper_sleeping = 0;
            helper_timed = 0;
        }
        if (hfd_asked)
            helper_let_go_locked(0);
        struct chunk *c = q_head;
        int fd = c->fd, wfd = helper_fd_locked(fd); /* -1: gone (EBADF, as a write to it) */
        __atomic_store_n(&q_writer, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&q_mu);
        int err = 0;
        int st = deliver(c, wfd, helper_stop, NULL, &err);
        pthread_mutex_lock(&q_mu);
        __atomic_store_n(&q_writer, 0, __ATOMIC_RELEASE);
        if (st != D_STOPPED && c->lazy && emu_now_ns() - c->release > LAZY_MISS_NS)
        {
            q_miss_gen++; /* its thread did not come: every streak starts again, and must be longer */
            if (q_lazy_need < LAZY_STREAK_MAX)
                q_lazy_need *= 2;
            st_miss++;
        }
        delivered_locked(c, st, err);
        if (own_files && fd < FDMAX && hfd[fd] && !q_pending[fd]) {
            hfd_want[fd] = 1; /* its last chunk: let go at once */
            helper_let_go_locked(0);
        }
        if (st == D_AGAIN) {
            pthread_mutex_unlock(&q_mu);
            struct pollfd p = {.fd = wfd, .events = POLLOUT};
            poll(&p, 1, 1);
            pthread_mutex_lock(&q_mu);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- flushing before a block */

/* What the calling thread is about to block on, to see whether it would block
 * at all, and to stop flushing when it would no longer. */
struct waitfor {
    int kind; /* W_FD: fd readable; W_POLL: pfds; W_EPOLL: epfd readable; W_SELECT */
    int fd;
    struct pollfd *pfds;
    nfds_t npfds;
    int nfds;
    fd_set *rs, *ws, *es;
    int64_t next_check;
    int64_t due; /* of the chunk being waited for */
};
enum { W_FD, W_POLL, W_EPOLL, W_SELECT };

static int ready_now(struct waitfor *w)
{
    if (w->kind == W_FD || w->kind == W_EPOLL) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        return real_poll(&p, 1, 0) != 0; /* readable, hung up, or an error: the call returns */
    }
    if (w->kind == W_POLL)
        return real_poll(w->pfds, w->npfds, 0) != 0;
    fd_set r, wr, e;
    if (w->rs)
        r = *w->rs;
    if (w->ws)
        wr = *w->ws;
    if (w->es)
        e = *w->es;
    struct timeval tv = {0, 0};
    return real_select(w->nfds, w->rs ? &r : NULL, w->ws ? &wr : NULL, w->es ? &e : NULL, &tv) != 0;
}

/* While a flushing thread waits for a chunk's time, look every 5 us whether its
 * own call has become ready (a reply from another peer): then it stops and
 * leaves the rest to the helper, so flushing never delays what it receives by
 * more than that. */
#define FLUSH_CHECK_NS 5000
static int flush_stop(void *arg, int64_t now)
{
    struct waitfor *w = arg;
    if (now < w->next_check || w->due - now < FLUSH_CHECK_NS / 2)
        return 0; /* a check (a poll, 0.4 us here) must not make the write late */
    w->next_check = now + FLUSH_CHECK_NS;
    return ready_now(w);
}

/* A call that will not block (MSG_DONTWAIT, O_NONBLOCK, a zero timeout) comes
 * from a thread that polls, as MPI's progress engines and busy-polling servers
 * do.  It never blocks, so it would never write its own chunks, and the helper
 * that would has to share the CPU with a thread that does not yield: a chunk
 * then left up to a scheduler slice late (2 ms per message here).  So such a
 * call makes progress, as an MPI call does: it writes the thread's chunks due
 * within NONBLOCK_HORIZON_NS, spinning until their time, and returns at once
 * when none are.  A poller's calls come closer together than that, so each
 * chunk still leaves on time; the call costs at most that much longer. */
#define NONBLOCK_HORIZON_NS 2000

/* The calling thread is about to block in a receive, poll, select or
 * epoll_wait (timeout_ns: how long at most, -1 forever; 0: it polls, see
 * above).  If chunks it queued are still in the line, due within the spin
 * window and the call's timeout, it writes them itself at their times, with
 * every chunk queued before them (the line's order), instead of leaving them to
 * the helper thread: a ping-pong then never hands a message from one thread to
 * another, whose wake-up on a busy CPU would add to the latency. */
static void flush_before_block(struct waitfor *w, int64_t timeout_ns)
{
    int polling = timeout_ns == 0; /* the call will not block */
    if (polling)
        timeout_ns = NONBLOCK_HORIZON_NS;
    uint64_t mine = my_seq;
    if (!mine || __atomic_load_n(&q_head_seq, __ATOMIC_ACQUIRE) > mine)
        return;
    int64_t now = emu_now_ns();
    int64_t horizon = cfg.spin_ns > FLUSH_CHECK_NS ? cfg.spin_ns : FLUSH_CHECK_NS;
    if (timeout_ns > 0 && timeout_ns < horizon)
        horizon = timeout_ns;
    int64_t limit = now + horizon;
    if (polling && __atomic_load_n(&q_head_release, __ATOMIC_ACQUIRE) > limit)
        return; /* a poller: not due yet, it will be back (its next call costs no poll(2) here) */
    if (ready_now(w)) { /* the call will not block: the helper writes them */
        my_streak = 0;
        pthread_mutex_lock(&q_mu);
        if (q_head && helper_sleeping)
            pthread_cond_signal(&q_work);
        pthread_mutex_unlock(&q_mu);
        return;
    }
    w->next_check = now + FLUSH_CHECK_NS;
    __atomic_add_fetch(&q_flushers, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&q_mu);
    while (q_head && q_head->seq <= mine) {
        struct chunk *c = q_head;
        if (c->release > limit)
            break;
        if (q_writer) { /* the helper is on it: it lets go within a spin turn (or a write) */
            pthread_mutex_unlock(&q_mu);
            int64_t t0 = emu_now_ns();
            while (__atomic_load_n(&q_writer, __ATOMIC_ACQUIRE)) {
                if (emu_now_ns() - t0 > 20000)
                    sched_yield(); /* it was preempted */
                else
                    cpu_pause();
            }
            pthread_mutex_lock(&q_mu);
            continue;
        }
        __atomic_store_n(&q_writer, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&q_mu);
        int err = 0;
        w->due = c->release;
        int st = deliver(c, c->fd, flush_stop, w, &err);
        pthread_mutex_lock(&q_mu);
        __atomic_store_n(&q_writer, 0, __ATOMIC_RELEASE);
        delivered_locked(c, st, err);
        if (st == D_STOPPED || st == D_AGAIN)
            break;
        __atomic_add_fetch(&st_flushed, 1, __ATOMIC_RELAXED);
    }
    if (q_head && q_head->seq <= mine)
        my_streak = 0;
    else if (my_streak < LAZY_STREAK_MAX)
        my_streak++;
    __atomic_store_n(&q_last_flush, emu_now_ns(), __ATOMIC_RELAXED);
    __atomic_sub_fetch(&q_flushers, 1, __ATOMIC_ACQ_REL);
    if (q_head && helper_sleeping)
        pthread_cond_signal(&q_work); /* what we leave, the helper writes */
    pthread_mutex_unlock(&q_mu);
}

/* Queue len bytes (gathered from iov) for fd, to leave at `release`. */
static int enqueue(int fd, const struct iovec *iov, int iovcnt, size_t skip, size_t len, int flags,
                   const struct sockaddr *addr, socklen_t alen, int64_t release)
{
    struct chunk *c = chunk_new(len);
    if (!c) {
        errno = ENOBUFS;
        return -1;
    }
    c->next = NULL;
    c->seq = 0;
    c->lazy = 0;
    c->fd = fd;
    c->flags = flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL);
    c->release = release;
    c->len = len;
    c->off = 0;
    c->alen = 0;
    if (addr && alen > 0 && alen <= sizeof c->addr) {
        memcpy(&c->addr, addr, alen);
        c->alen = alen;
    }
    size_t got = 0;
    for (int i = 0; i < iovcnt && got < len; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        size_t take = l - skip;
        if (take > len - got)
            take = len - got;
        memcpy(c->data + got, (const char *)iov[i].iov_base + skip, take);
        got += take;
        skip = 0;
    }
    pthread_mutex_lock(&q_mu);
    while (q_bytes > 0 && q_bytes + len > (size_t)cfg.queue_max)
        pthread_cond_wait(&q_done, &q_mu);
    int mine_queued = my_seq && q_head_seq <= my_seq;
    c->seq = ++q_seq;
    my_seq = c->seq;
    if (q_tail)
        q_tail->next = c;
    else {
        __atomic_store_n(&q_head, c, __ATOMIC_RELEASE);
        head_changed_locked();
    }
    q_tail = c;
    q_bytes += len;
    if (fd < FDMAX)
        q_pending[fd]++;
    helper_start_locked();
    if (helper_sleeping) {
        if (my_gen != q_miss_gen) {
            my_gen = q_miss_gen;
            my_streak = 0;
        }
        if (helper_timed && my_streak >= q_lazy_need && !mine_queued)
        {
            c->lazy = 1; /* this thread will write it before it blocks (see LAZY_STREAK) */
            st_lazy++;
        } else {
            pthread_cond_signal(&q_work);
            st_kick++;
        }
    }
    pthread_mutex_unlock(&q_mu);
    return 0;
}

static void drain_fd(int fd)
{
    if (fd < 0 || fd >= FDMAX)
        return;
    pthread_mutex_lock(&q_mu);
    if (q_pending[fd] > 0 && helper_sleeping)
        pthread_cond_signal(&q_work);
    while (q_pending[fd] > 0)
        pthread_cond_wait(&q_done, &q_mu);
    pthread_mutex_unlock(&q_mu);
}

static void drain_all(void)
{
    pthread_mutex_lock(&q_mu);
    if (q_head && helper_sleeping)
        pthread_cond_signal(&q_work);
    while (q_head && helper_running)
        pthread_cond_wait(&q_done, &q_mu);
    pthread_mutex_unlock(&q_mu);
}

static int take_error(int fd)
{
    if (fd < 0 || fd >= FDMAX)
        return 0;
    int e = __atomic_exchange_n(&q_err[fd], 0, __ATOMIC_ACQ_REL);
    return e;
}

/* ---------------------------------------------------------------- the send paths */

static size_t iov_total(const struct iovec *iov, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

/* Build in out[] the part [skip, skip+len) of iov. Returns the count. */
static int iov_slice(const struct iovec *iov, int n, size_t skip, size_t len, struct iovec *out, int outmax)
{
    int k = 0;
    for (int i = 0; i < n && len > 0 && k < outmax; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        size_t take = l - skip;
        if (take > len)
            take = len;
        out[k].iov_base = (char *)iov[i].iov_base + skip;
        out[k].iov_len = take;
        k++;
        len -= take;
        skip = 0;
    }
    return k;
}

/* Pace one piece of n bytes handed over at `now`; returns its release time
 * (serialisation end, or earlier for a small message). */
static int64_t pace(size_t n, int large, int64_t now)
{
    if (cfg.bytes_per_ns <= 0)
        return now;
    pthread_mutex_lock(&link_mu);
    int64_t rel = emu_link_reserve(&link_out, cfg.bytes_per_ns, large ? 0 : cfg.threshold, now, n);
    pthread_mutex_unlock(&link_mu);
    return rel;
}

static void unpace(size_t n)
{
    if (cfg.bytes_per_ns <= 0 || n == 0)
        return;
    pthread_mutex_lock(&link_mu);
    emu_link_refund(&link_out, cfg.bytes_per_ns, n);
    pthread_mutex_unlock(&link_mu);
}

/* The wire: a message is scheduled on the process's link when it is handed
 * over (serialisation end, +L), like a NIC queue.  What is due now, with
 * nothing of the same socket still queued, is written at once by the calling
 * thread (the native path, no hand-off); the rest goes to the delay line,
 * whose thread writes each piece at its time.  The schedule never depends on
 * when our threads run, so a late wake-up is caught up from the queue (as a
 * NIC keeps sending while the program is descheduled), while the program's
 * own idle time leaves the wire idle.  Senders block only while the line
 * holds PERFLEARN_EMU_QUEUE bytes (the socket buffer). */
/* Leaves the wire at `rel` (in the past for a small message running ahead of
 * the link), arrives L later: latency is never run ahead of. */
static int64_t wire_due(int64_t rel, int64_t now)
{
    return (rel > now ? rel : now) + cfg.latency_ns;
}

static int queued_for(int fd)
{
    return fd < FDMAX && __atomic_load_n(&q_pending[fd], __ATOMIC_ACQUIRE) > 0;
}

/* A stream message (send/write/writev/sendmsg on a matching TCP socket). */
static ssize_t stream_send(int fd, const struct iovec *iov, int iovcnt, int flags)
{
    /* the message is handed over now: one clock read, first, for the schedule and
     * the decision (every step before it would add to L) */
    int64_t now = emu_now_ns();
    int e = take_error(fd);
    if (e) {
        errno = e;
        return -1;
    }
    size_t total = iov_total(iov, iovcnt);
    if (total == 0) {
        struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
        return real_sendmsg(fd, &m, flags);
    }
    __atomic_add_fetch(&st_msgs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&st_bytes, total, __ATOMIC_RELAXED);
    int large = (int64_t)total >= cfg.threshold;
    size_t piece = cfg.bytes_per_ns > 0 && large ? (size_t)(cfg.threshold > 4096 ? cfg.threshold : 4096) : total;
    size_t done = 0;
    now = emu_spin_for(now, cfg.overhead_ns); /* o: the bookkeeping above is part of it */
    while (done < total) {
        size_t n = total - done < piece ? total - done : piece;
        if (done)
            now = emu_now_ns(); /* a later piece: time has passed writing the earlier ones */
        int64_t due = wire_due(pace(n, large, now), now);
        if (fd < FDMAX && (due > now || queued_for(fd))) {
            if (enqueue(fd, iov, iovcnt, done, n, flags, NULL, 0, due) != 0) {
                unpace(n);
                return done ? (ssize_t)done : -1;
            }
            done += n;
            continue;
        }
        if (fd >= FDMAX) /* beyond the delay line's table: pace in the caller, no latency */
            emu_wait_until(due - cfg.latency_ns, cfg.spin_ns); /* no delay line here */
        struct iovec sl[64];
        int k = iov_slice(iov, iovcnt, done, n, sl, 64);
        ssize_t r;
        if (k == 1) /* send(2): sendmsg(2) also copies the header and the iovec in, 0.13 us more here */
            r = real_send(fd, sl[0].iov_base, sl[0].iov_len, flags);
        else {
            struct msghdr m = {.msg_iov = sl, .msg_iovlen = (size_t)k};
            r = real_sendmsg(fd, &m, flags);
        }
        if (r == (ssize_t)n) {
            done += n;
            continue;
        }
        int se = errno;
        unpace(r > 0 ? n - (size_t)r : n);
        if (r < 0) {
            if (done)
                return (ssize_t)done;
            errno = se;
            return -1;
        }
        return (ssize_t)(done + (size_t)r);
    }
    return (ssize_t)done;
}

/* A datagram (or a message we cannot split): scheduled and delayed whole. */
static ssize_t dgram_send(int fd, const struct iovec *iov, int iovcnt, int flags, const struct sockaddr *to,
                          socklen_t tolen)
{
    int64_t now = emu_now_ns(); /* first: see stream_send */
    int e = take_error(fd);
    if (e) {
        errno = e;
        return -1;
    }
    size_t total = iov_total(iov, iovcnt);
    __atomic_add_fetch(&st_msgs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&st_bytes, total, __ATOMIC_RELAXED);
    now = emu_spin_for(now, cfg.overhead_ns);
    int64_t due = wire_due(pace(total, 0, now), now);
    if (fd < FDMAX && (due > now || queued_for(fd))) {
        if (enqueue(fd, iov, iovcnt, 0, total, flags, to, tolen, due) != 0)
            return -1;
        return (ssize_t)total;
    }
    if (fd >= FDMAX)
        emu_wait_until(due - cfg.latency_ns, cfg.spin_ns);
    struct msghdr m = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = (struct iovec *)iov,
                       .msg_iovlen = (size_t)iovcnt};
    return real_sendmsg(fd, &m, flags);
}

/* Which path does a send on fd (to `to`, if given) take? */
static int route(int fd, const struct sockaddr *to)
{
    int st = classify(fd);
    if (st == FD_DGRAM) {
        if (!to)
            return FD_PASS;
        int lport = sock_local_port(fd);
        return emu_peer_match(&cfg, to, lport) ? FD_DGRAM_EMU : FD_PASS;
    }
    return st;
}

/* ---------------------------------------------------------------- interposed functions */

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    ENSURE(send);
    if (!enabled || in_shim)
        return real_send(fd, buf, len, flags);
    in_shim = 1;
    ssize_t r;
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    switch (route(fd, NULL)) {
    case FD_STREAM:
        r = stream_send(fd, &v, 1, flags);
        break;
    case FD_DGRAM_EMU:
        r = dgram_send(fd, &v, 1, flags, NULL, 0);
        break;
    default:
        r = real_send(fd, buf, len, flags);
    }
    in_shim = 0;
    return r;
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to, socklen_t tolen)
{
    ENSURE(sendto);
    if (!enabled || in_shim)
        return real_sendto(fd, buf, len, flags, to, tolen);
    in_shim = 1;
    ssize_t r;
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    switch (route(fd, to)) {
    case FD_STREAM:
        r = stream_send(fd, &v, 1, flags); /* TCP ignores the address */
        break;
    case FD_DGRAM_EMU:
        r = dgram_send(fd, &v, 1, flags, to, tolen);
        break;
    default:
        r = real_sendto(fd, buf, len, flags, to, tolen);
    }
    in_shim = 0;
    return r;
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    ENSURE(sendmsg);
    if (!enabled || in_shim || m == NULL)
        return real_sendmsg(fd, m, flags);
    in_shim = 1;
    ssize_t r;
    int st = route(fd, (const struct sockaddr *)m->msg_name);
    if ((st == FD_STREAM || st == FD_DGRAM_EMU) && (m->msg_controllen > 0 || (flags & MSG_OOB))) {
        /* ancillary data (descriptors, credentials) is not queued: keep order, then send now */
        drain_fd(fd);
        st = FD_PASS;
    }
    switch (st) {
    case FD_STREAM:
        r = stream_send(fd, m->msg_iov, (int)m->msg_iovlen, flags);
        break;
    case FD_DGRAM_EMU:
        r = dgram_send(fd, m->msg_iov, (int)m->msg_iovlen, flags, (const struct sockaddr *)m->msg_name,
                       m->msg_namelen);
        break;
    default:
        r = real_sendmsg(fd, m, flags);
    }
    in_shim = 0;
    return r;
}

EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
    ENSURE(write);
    if (!enabled || in_shim)
        return real_write(fd, buf, len);
    in_shim = 1;
    ssize_t r;
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    switch (route(fd, NULL)) {
    case FD_STREAM:
        r = stream_send(fd, &v, 1, 0);
        break;
    case FD_DGRAM_EMU:
        r = dgram_send(fd, &v, 1, 0, NULL, 0);
        break;
    default:
        r = real_write(fd, buf, len);
    }
    if (r < 0 && errno == ENOTSOCK) { /* the descriptor was reused behind our back */
        forget(fd);
        r = real_write(fd, buf, len);
    }
    in_shim = 0;
    return r;
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    ENSURE(writev);
    if (!enabled || in_shim)
        return real_writev(fd, iov, iovcnt);
    in_shim = 1;
    ssize_t r;
    switch (route(fd, NULL)) {
    case FD_STREAM:
        r = stream_send(fd, iov, iovcnt, 0);
        break;
    case FD_DGRAM_EMU:
        r = dgram_send(fd, iov, iovcnt, 0, NULL, 0);
        break;
    default:
        r = real_writev(fd, iov, iovcnt);
    }
    if (r < 0 && errno == ENOTSOCK) {
        forget(fd);
        r = real_writev(fd, iov, iovcnt);
    }
    in_shim = 0;
    return r;
}

/* ---------------------------------------------------------------- about to block: flush first */

/* Would a read-like call on fd block?  Only asked when the thread has chunks
 * in the line.  flags: the call's MSG_* flags. */
static int fd_may_block(int fd, int flags)
{
    if (flags & MSG_DONTWAIT)
        return 0;
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK);
}

static inline int have_mine(void)
{
    return my_seq && __atomic_load_n(&q_head_seq, __ATOMIC_RELAXED) <= my_seq;
}

static void before_read(int fd, int flags)
{
    if (!enabled || in_shim || !have_mine())
        return;
    in_shim = 1;
    struct waitfor w = {.kind = W_FD, .fd = fd};
    flush_before_block(&w, fd_may_block(fd, flags) ? -1 : 0);
    in_shim = 0;
}

static int64_t ms_ns(int ms)
{
    return ms < 0 ? -1 : (int64_t)ms * 1000000;
}
static int64_t ts_ns(const struct timespec *t)
{
    return t ? (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec : -1;
}

static void before_poll(struct pollfd *fds, nfds_t n, int64_t timeout)
{
    if (!enabled || in_shim || !have_mine())
        return;
    in_shim = 1;
    struct waitfor w = {.kind = W_POLL, .pfds = fds, .npfds = n};
    flush_before_block(&w, timeout);
    in_shim = 0;
}

static void before_select(int nfds, fd_set *r, fd_set *wr, fd_set *e, int64_t timeout)
{
    if (!enabled || in_shim || !have_mine() || nfds > FD_SETSIZE)
        return;
    in_shim = 1;
    struct waitfor w = {.kind = W_SELECT, .nfds = nfds, .rs = r, .ws = wr, .es = e};
    flush_before_block(&w, timeout);
    in_shim = 0;
}

static void before_epoll(int epfd, int timeout_ms)
{
    if (!enabled || in_shim || !have_mine())
        return;
    in_shim = 1;
    struct waitfor w = {.kind = W_EPOLL, .fd = epfd}; /* an epoll fd is readable when events are ready */
    flush_before_block(&w, ms_ns(timeout_ms));
    in_shim = 0;
}

EXPORT ssize_t recv(int fd, void *b, size_t n, int flags)
{
    ENSURE(recv);
    before_read(fd, flags);
    return real_recv(fd, b, n, flags);
}
EXPORT ssize_t recvfrom(int fd, void *b, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
    ENSURE(recvfrom);
    before_read(fd, flags);
    return real_recvfrom(fd, b, n, flags, a, al);
}
EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    ENSURE(recvmsg);
    before_read(fd, flags);
    return real_recvmsg(fd, m, flags);
}
EXPORT ssize_t read(int fd, void *b, size_t n)
{
    ENSURE(read);
    before_read(fd, 0);
    return real_read(fd, b, n);
}
EXPORT ssize_t readv(int fd, const struct iovec *v, int n)
{
    ENSURE(readv);
    before_read(fd, 0);
    return real_readv(fd, v, n);
}
EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    ENSURE(poll);
    before_poll(fds, n, ms_ns(timeout));
    return real_poll(fds, n, timeout);
}
EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m)
{
    ENSURE(ppoll);
    before_poll(fds, n, ts_ns(t));
    return real_ppoll(fds, n, t, m);
}
EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
    ENSURE(select);
    before_select(nfds, r, w, e, t ? (int64_t)t->tv_sec * 1000000000LL + (int64_t)t->tv_usec * 1000 : -1);
    return real_select(nfds, r, w, e, t);
}
EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m)
{
    ENSURE(pselect);
    before_select(nfds, r, w, e, ts_ns(t));
    return real_pselect(nfds, r, w, e, t, m);
}
EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int n, int timeout)
{
    ENSURE(epoll_wait);
    before_epoll(epfd, timeout);
    return real_epoll_wait(epfd, ev, n, timeout);
}
EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int n, int timeout, const sigset_t *m)
{
    ENSURE(epoll_pwait);
    before_epoll(epfd, timeout);
    return real_epoll_pwait(epfd, ev, n, timeout, m);
}
/* _FORTIFY_SOURCE builds call these instead */
EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t bl)
{
    ENSURE(__read_chk);
    before_read(fd, 0);
    return real___read_chk(fd, b, n, bl);
}
EXPORT ssize_t __recv_chk(int fd, void *b, size_t n, size_t bl, int flags)
{
    ENSURE(__recv_chk);
    before_read(fd, flags);
    return real___recv_chk(fd, b, n, bl, flags);
}
EXPORT ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t bl, int flags, struct sockaddr *a, socklen_t *al)
{
    ENSURE(__recvfrom_chk);
    before_read(fd, flags);
    return real___recvfrom_chk(fd, b, n, bl, flags, a, al);
}
EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fl)
{
    ENSURE(__poll_chk);
    before_poll(fds, n, ms_ns(timeout));
    return real___poll_chk(fds, n, timeout, fl);
}

EXPORT int close(int fd)
{
    ENSURE(close);
    if (enabled && !in_shim && fd >= 0 && fd < FDMAX) {
        if (q_pending[fd] > 0)
            drain_fd(fd);
        helper_let_go(fd);
        forget(fd);
        q_err[fd] = 0;
    }
    return real_close(fd);
}

EXPORT int shutdown(int fd, int how)
{
    ENSURE(shutdown);
    if (enabled && !in_shim && (how == SHUT_WR || how == SHUT_RDWR))
        drain_fd(fd);
    return real_shutdown(fd, how);
}

EXPORT int connect(int fd, const struct sockaddr *a, socklen_t l)
{
    ENSURE(connect);
    forget(fd);
    return real_connect(fd, a, l);
}

EXPORT int socket(int d, int t, int p)
{
    ENSURE(socket);
    int fd = real_socket(d, t, p);
    forget(fd);
    return fd;
}

EXPORT int accept(int s, struct sockaddr *a, socklen_t *l)
{
    ENSURE(accept);
    int fd = real_accept(s, a, l);
    forget(fd);
    return fd;
}

EXPORT int accept4(int s, struct sockaddr *a, socklen_t *l, int f)
{
    ENSURE(accept4);
    int fd = real_accept4(s, a, l, f);
    forget(fd);
    return fd;
}

EXPORT int dup2(int o, int n)
{
    ENSURE(dup2);
    if (enabled && n >= 0 && n < FDMAX && n != o) {
        if (q_pending[n] > 0)
            drain_fd(n);
        helper_let_go(n);
        forget(n);
    }
    return real_dup2(o, n);
}

EXPORT int dup3(int o, int n, int f)
{
    ENSURE(dup3);
    if (enabled && n >= 0 && n < FDMAX && n != o) {
        if (q_pending[n] > 0)
            drain_fd(n);
        helper_let_go(n);
        forget(n);
    }
    return real_dup3(o, n, f);
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    ENSURE(sendfile);
    if (enabled)
        drain_fd(out); /* not emulated, but never overtakes queued bytes */
    return real_sendfile(out, in, off, count);
}

/* exec discards the process: deliver what the delay line holds first */
EXPORT int execve(const char *p, char *const a[], char *const e[])
{
    ENSURE(execve);
    if (enabled)
        drain_all();
    return real_execve(p, a, e);
}
EXPORT int execv(const char *p, char *const a[])
{
    ENSURE(execv);
    if (enabled)
        drain_all();
    return real_execv(p, a);
}
EXPORT int execvp(const char *p, char *const a[])
{
    ENSURE(execvp);
    if (enabled)
        drain_all();
    return real_execvp(p, a);
}
EXPORT int execvpe(const char *p, char *const a[], char *const e[])
{
    ENSURE(execvpe);
    if (enabled)
        drain_all();
    return real_execvpe(p, a, e);
}

static int collect_args(const char *first, va_list ap, char **argv, int max, char ***envp)
{
    int n = 0;
    argv[n++] = (char *)first;
    while (n < max - 1) {
        char *s = va_arg(ap, char *);
        argv[n++] = s;
        if (!s)
            break;
    }
    if (n >= max - 1 && argv[n - 1] != NULL)
        return -1;
    if (envp)
        *envp = va_arg(ap, char **);
    return 0;
}

EXPORT int execl(const char *p, const char *arg, ...)
{
    char *argv[1024];
    va_list ap;
    va_start(ap, arg);
    int ok = collect_args(arg, ap, argv, 1024, NULL);
    va_end(ap);
    if (ok != 0) {
        errno = E2BIG;
        return -1;
    }
    return execv(p, argv);
}
EXPORT int execlp(const char *p, const char *arg, ...)
{
    char *argv[1024];
    va_list ap;
    va_start(ap, arg);
    int ok = collect_args(arg, ap, argv, 1024, NULL);
    va_end(ap);
    if (ok != 0) {
        errno = E2BIG;
        return -1;
    }
    return execvp(p, argv);
}
EXPORT int execle(const char *p, const char *arg, ...)
{
    char *argv[1024];
    char **envp = NULL;
    va_list ap;
    va_start(ap, arg);
    int ok = collect_args(arg, ap, argv, 1024, &envp);
    va_end(ap);
    if (ok != 0) {
        errno = E2BIG;
        return -1;
    }
    return execve(p, argv, envp);
}

/* _exit skips destructors: deliver what the delay line holds first */
EXPORT void _exit(int status)
{
    static void (*real__exit)(int);
    if (!real__exit)
        real__exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    if (enabled && !in_shim)
        drain_all();
    real__exit(status);
    __builtin_unreachable();
}

/* ---------------------------------------------------------------- fork, load, exit */

static void atfork_prepare(void)
{
    if (enabled)
        drain_all(); /* the child must not inherit (and resend) queued bytes */
    pthread_mutex_lock(&q_mu);
    pthread_mutex_lock(&link_mu);
    pthread_mutex_lock(&pool_mu);
}
static void atfork_parent(void)
{
    pthread_mutex_unlock(&pool_mu);
    pthread_mutex_unlock(&link_mu);
    pthread_mutex_unlock(&q_mu);
}
static void init_conds(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q_work, &ca);
    pthread_cond_init(&q_done, &ca);
    pthread_condattr_destroy(&ca);
}

static void atfork_child(void)
{
    /* threads do not survive fork, and condition variables copied with a
     * waiter (the parent's sleeping helper) would swallow our signals */
    pthread_mutex_init(&link_mu, NULL);
    pthread_mutex_init(&q_mu, NULL);
    pthread_mutex_init(&pool_mu, NULL);
    init_conds();
    helper_running = 0;
    helper_sleeping = 0;
    q_writer = 0;
    q_flushers = 0;
    helper_timed = 0;
    my_streak = 0;
    for (int i = 0; i < held_n; i++) /* the parent helper's, in a table the child does not have */
        hfd[held[i]] = 0, hfd_want[held[i]] = 0;
    held_n = 0;
    own_files = 0;
    own_pidfd = -1;
    hfd_asked = 0;
}

static const char *env_get(const char *n)
{
    return getenv(n);
}

__attribute__((constructor)) static void emu_init(void)
{
    pthread_once(&resolve_once, resolve_all);
    init_conds();
    emu_link_init(&link_out);
    char err[320];
    if (emu_config_load(&cfg, env_get, err, sizeof err) != 0) {
        say(err);
        enabled = 0;
        return;
    }
    enabled = emu_config_active(&cfg);
    const char *hot = getenv("PERFLEARN_EMU_HOT");
    if (hot && *hot && emu_parse_duration(hot, &hot_ns) != 0) {
        snprintf(err, sizeof err, "PERFLEARN_EMU_HOT=%s is not a duration (e.g. 50us); emulation disabled", hot);
        say(err);
        enabled = 0;
        return;
    }
    if (hot_ns < 0)
        hot_ns = 50000 + 2 * (cfg.latency_ns + cfg.overhead_ns);
    const char *table = getenv("PERFLEARN_EMU_HELPER_TABLE");
    if (table && *table && strcmp(table, "own") && strcmp(table, "shared")) {
        snprintf(err, sizeof err, "PERFLEARN_EMU_HELPER_TABLE=%.40s is not own or shared; emulation disabled", table);
        say(err);
        enabled = 0;
        return;
    }
    want_own_files = !(table && !strcmp(table, "shared"));
    int64_t early = enabled && (cfg.latency_ns > 0 || cfg.overhead_ns > 0) ? emu_calibrate() : 0;
    if (cfg.verbose) {
        char d[256], line[340];
        emu_config_describe(&cfg, d, sizeof d);
        snprintf(line, sizeof line, "pid %d sockets %s (%s); waits end %lld ns early (measured)", (int)getpid(),
                 enabled ? "active" : "inactive", d, (long long)early);
        say(line);
    }
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void emu_fini(void)
{
    if (!enabled)
        return;
    drain_all();
    if (cfg.verbose) {
        char line[300];
        snprintf(line, sizeof line, "pid %d emulated %llu messages, %llu bytes; %llu written by their own thread as it blocked or polled "
                 "(%llu queued without waking the helper, %llu of them missed; %llu wake-ups); "
                 "delay line late by %.0f ns mean, %llu ns median, %llu ns p90, %llu ns p99, %llu ns max",
                 (int)getpid(), st_msgs, st_bytes, st_flushed, st_lazy, st_miss, st_kick, st_late_n ? (double)st_late_ns / (double)st_late_n : 0.0, late_pct(0.5), late_pct(0.9), late_pct(0.99), st_late_max);
        say(line);
    }
}

