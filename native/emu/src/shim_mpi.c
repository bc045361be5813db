/* perflearn-emu PMPI shim: the same three knobs for MPI programs.
 *
 * Built against the MPI in use (mpicc), preloaded into every rank.
 *
 *   overhead  o: the sending rank spins o ns in every send-type call
 *                (Send family, Isend family, Start of a persistent send,
 *                Sendrecv, Put/Get/Accumulate).
 *   bandwidth B: one link per rank; a send of n bytes does not start before
 *                the link has serialised the previous ones, and a message of at
 *                least `threshold` bytes is handed to MPI at its serialisation
 *                end (store and forward); smaller ones run ahead by at most
 *                threshold bytes.
 *   latency   L: delayed completion at the receiver.  A receive (Recv,
 *                Sendrecv, a receive request completed by Wait/Test and their
 *                all/any/some forms) returns L after MPI completed it.
 *                Receives completed together pay L once (Waitall on a window
 *                of 64 Irecvs pays L, not 64 L), so pipelined messages overlap
 *                as on a wire.  Limitation: a receiver that arrives after the
 *                message still waits L (we do not know when it was sent).
 *   collectives: MPI's own algorithms do not go through MPI_Send, so each
 *                collective is charged a LogGP cost after it returns
 *                (p ranks, n bytes per rank, r = ceil(log2 p)):
 *                  Barrier               r L
 *                  Bcast, Reduce         r (L + n/B)
 *                  Allreduce, Allgather, Reduce_scatter(_block), Scan
 *                                        2 r L + 2 n (p-1)/p / B
 *                  Gather, Scatter       r L + n (p-1) / B
 *                  Alltoall              (p-1) (L + n/B)
 *   one-sided:   Put/Accumulate complete L after issue, Get 2 L; the
 *                synchronisation call (Win_fence, Win_complete, Win_unlock(_all),
 *                Win_flush(_all)) waits for the latest of them.
 *
 * Configuration: PERFLEARN_EMU_* (see emu_pace.h); a bad value disables the
 * shim with one line on stderr.
 */
#define _GNU_SOURCE
#include "emu_pace.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static emu_config cfg;
static int enabled;
/* serialisation time of one threshold-sized piece: the most lateness we take back */
static int64_t piece_ns(void);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static emu_link link_out;
static int64_t rma_deadline;

/* ---------------------------------------------------------------- request table */

enum { K_RECV = 1, K_PSEND = 2, K_PRECV = 3 };
#define TBL 8192
struct ent {
    MPI_Request req;
    int kind;
    size_t bytes;
};
static struct ent tbl[TBL];
static int tbl_used;

static size_t h(MPI_Request r)
{
    uintptr_t v = 0;
    memcpy(&v, &r, sizeof r < sizeof v ? sizeof r : sizeof v);
    v ^= v >> 17;
    v *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(v >> 7) % TBL;
}

static int tbl_dead; /* tombstones */

static void tbl_rehash_locked(void)
{
    static struct ent live[TBL];
    int n = 0;
    for (int i = 0; i < TBL; i++)
        if (tbl[i].kind > 0)
            live[n++] = tbl[i];
    memset(tbl, 0, sizeof tbl);
    tbl_dead = 0;
    for (int j = 0; j < n; j++) {
        size_t i = h(live[j].req);
        while (tbl[i].kind)
            i = (i + 1) % TBL;
        tbl[i] = live[j];
    }
}

static void tbl_put(MPI_Request r, int kind, size_t bytes)
{
    if (r == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&mu);
    if (tbl_used + tbl_dead > TBL * 3 / 4)
        tbl_rehash_locked();
    if (tbl_used < TBL / 2) { /* beyond that, requests go unemulated rather than slow */
        size_t i = h(r), free_at = TBL;
        while (tbl[i].kind && !(tbl[i].kind > 0 && tbl[i].req == r)) {
            if (tbl[i].kind < 0 && free_at == TBL)
                free_at = i;
            i = (i + 1) % TBL;
        }
        if (tbl[i].kind <= 0) { /* new */
            if (free_at != TBL) {
                i = free_at;
                tbl_dead--;
            }
            tbl_used++;
        }
        tbl[i].req = r;
        tbl[i].kind = kind;
        tbl[i].bytes = bytes;
    }
    pthread_mutex_unlock(&mu);
}

static size_t tbl_find_locked(MPI_Request r)
{
    size_t i = h(r);
    for (int n = 0; n < TBL && tbl[i].kind; n++, i = (i + 1) % TBL)
        if (tbl[i].kind > 0 && tbl[i].req == r)
            return i;
    return TBL;
}

/* Returns the entry's kind (0 if absent) and its bytes. */
static int tbl_get(MPI_Request r, size_t *bytes)
{
    if (r == MPI_REQUEST_NULL || __atomic_load_n(&tbl_used, __ATOMIC_RELAXED) == 0)
        return 0;
    int k = 0;
    pthread_mutex_lock(&mu);
    size_t i = tbl_find_locked(r);
    if (i != TBL) {
        k = tbl[i].kind;
        if (bytes)
            *bytes = tbl[i].bytes;
    }
    pthread_mutex_unlock(&mu);
    return k;
}

static void tbl_del(MPI_Request r)
{
    pthread_mutex_lock(&mu);
    size_t i = tbl_find_locked(r);
    if (i != TBL) {
        tbl[i].kind = -1;
        tbl_used--;
        tbl_dead++;
    }
    pthread_mutex_unlock(&mu);
}

/* ---------------------------------------------------------------- the knobs */

static size_t bytes_of(int count, MPI_Datatype t)
{
    int s = 0;
    if (count <= 0 || PMPI_Type_size(t, &s) != MPI_SUCCESS || s <= 0)
        return 0;
    return (size_t)count * (size_t)s;
}

/* o, then B: called before a message of n bytes is handed to MPI */
static void before_send(size_t n)
{
    if (!enabled || (cfg.overhead_ns <= 0 && cfg.bytes_per_ns <= 0))
        return; /* no clock read when neither knob is set: it would add to L */
    int64_t now = emu_spin_for(emu_now_ns(), cfg.overhead_ns);
    if (cfg.bytes_per_ns <= 0)
        return;
    pthread_mutex_lock(&mu);
    int64_t rel = emu_link_reserve(&link_out, cfg.bytes_per_ns, cfg.threshold, now, n);
    pthread_mutex_unlock(&mu);
    if (rel > now) /* a small message running ahead of the link costs no second clock read */
        emu_wait_until(rel, cfg.spin_ns);
    if ((int64_t)n >= cfg.threshold) {
        pthread_mutex_lock(&mu);
        emu_link_done(&link_out, emu_now_ns(), piece_ns());
        pthread_mutex_unlock(&mu);
    }
}

/* L: a receive (or several, together) just completed */
static void after_recv(void)
{
    if (enabled && cfg.latency_ns > 0)
        emu_wait_until(emu_now_ns() + cfg.latency_ns, cfg.spin_ns);
}

static void charge(int64_t ns)
{
    if (enabled && ns > 0)
        emu_wait_until(emu_now_ns() + ns, cfg.spin_ns);
}

static int log2ceil(int p)
{
    int r = 0;
    while ((1 << r) < p)
        r++;
    return r;
}

static int comm_size(MPI_Comm c)
{
    int p = 1;
    PMPI_Comm_size(c, &p);
    return p;
}

static int64_t xfer(double n)
{
    return cfg.bytes_per_ns > 0 ? (int64_t)(n / cfg.bytes_per_ns) : 0;
}

/* ---------------------------------------------------------------- point to point */

int MPI_Send(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm)
{
    before_send(bytes_of(c, t));
    return PMPI_Send(b, c, t, d, tag, comm);
}
int MPI_Ssend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm)
{
    before_send(bytes_of(c, t));
    return PMPI_Ssend(b, c, t, d, tag, comm);
}
int MPI_Rsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm)
{
    before_send(bytes_of(c, t));
    return PMPI_Rsend(b, c, t, d, tag, comm);
}
int MPI_Bsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm)
{
    before_send(bytes_of(c, t));
    return PMPI_Bsend(b, c, t, d, tag, comm);
}
int MPI_Isend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r)
{
    before_send(bytes_of(c, t));
    return PMPI_Isend(b, c, t, d, tag, comm, r);
}
int MPI_Issend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r)
{
    before_send(bytes_of(c, t));
    return PMPI_Issend(b, c, t, d, tag, comm, r);
}
int MPI_Irsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r)
{
    before_send(bytes_of(c, t));
    return PMPI_Irsend(b, c, t, d, tag, comm, r);
}
int MPI_Ibsend(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r)
{
    before_send(bytes_of(c, t));
    return PMPI_Ibsend(b, c, t, d, tag, comm, r);
}

int MPI_Recv(void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st)
{
    int rc = PMPI_Recv(b, c, t, s, tag, comm, st);
    if (rc == MPI_SUCCESS && s != MPI_PROC_NULL)
        after_recv();
    return rc;
}

int MPI_Irecv(void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r)
{
    int rc = PMPI_Irecv(b, c, t, s, tag, comm, r);
    if (rc == MPI_SUCCESS && enabled && cfg.latency_ns > 0 && s != MPI_PROC_NULL)
        tbl_put(*r, K_RECV, 0);
    return rc;
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int d, int stag, void *rb, int rc_, MPI_Datatype rt,
                 int s, int rtag, MPI_Comm comm, MPI_Status *status)
{
    before_send(bytes_of(sc, st));
    int rc = PMPI_Sendrecv(sb, sc, st, d, stag, rb, rc_, rt, s, rtag, comm, status);
    if (rc == MPI_SUCCESS && s != MPI_PROC_NULL)
        after_recv();
    return rc;
}

int MPI_Sendrecv_replace(void *b, int c, MPI_Datatype t, int d, int stag, int s, int rtag, MPI_Comm comm,
                         MPI_Status *status)
{
    before_send(bytes_of(c, t));
    int rc = PMPI_Sendrecv_replace(b, c, t, d, stag, s, rtag, comm, status);
    if (rc == MPI_SUCCESS && s != MPI_PROC_NULL)
        after_recv();
    return rc;
}

/* persistent requests */
int MPI_Send_init(const void *b, int c, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r)
{
    int rc = PMPI_Send_init(b, c, t, d, tag, comm, r);
    if (rc == MPI_SUCCESS && enabled)
        tbl_put(*r, K_PSEND, bytes_of(c, t));
    return rc;
}
int MPI_Recv_init(void *b, int c, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r)
{
    int rc = PMPI_Recv_init(b, c, t, s, tag, comm, r);
    if (rc == MPI_SUCCESS && enabled && s != MPI_PROC_NULL)
        tbl_put(*r, K_PRECV, 0);
    return rc;
}
int MPI_Start(MPI_Request *r)
{
    size_t n = 0;
    if (enabled && tbl_get(*r, &n) == K_PSEND)
        before_send(n);
    return PMPI_Start(r);
}
int MPI_Startall(int count, MPI_Request r[])
{
    for (int i = 0; enabled && i < count; i++) {
        size_t n = 0;
        if (tbl_get(r[i], &n) == K_PSEND)
            before_send(n);
    }
    return PMPI_Startall(count, r);
}
int MPI_Request_free(MPI_Request *r)
{
    if (enabled && tbl_get(*r, NULL))
        tbl_del(*r);
    return PMPI_Request_free(r);
}

/* ---------------------------------------------------------------- completion */

/* kinds[i]: 1 if request i is a receive we delay */
static int mark(int count, MPI_Request r[], char *kinds)
{
    int any = 0;
    for (int i = 0; i < count; i++) {
        int k = tbl_get(r[i], NULL);
        kinds[i] = (char)(k == K_RECV || k == K_PRECV ? k : 0);
        any |= kinds[i] != 0;
    }
    return any;
}

/* request i (old handle `old`) completed */
static int completed(MPI_Request old, char kind)
{
    if (kind == K_RECV) {
        tbl_del(old);
        return 1;
    }
    return kind == K_PRECV;
}

int MPI_Wait(MPI_Request *r, MPI_Status *st)
{
    if (!enabled || cfg.latency_ns <= 0)
        return PMPI_Wait(r, st);
    MPI_Request old = *r;
    char k;
    mark(1, &old, &k);
    int rc = PMPI_Wait(r, st);
    if (rc == MPI_SUCCESS && k && completed(old, k))
        after_recv();
    return rc;
}

int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st)
{
    if (!enabled || cfg.latency_ns <= 0)
        return PMPI_Test(r, flag, st);
    MPI_Request old = *r;
    char k;
    mark(1, &old, &k);
    int rc = PMPI_Test(r, flag, st);
    if (rc == MPI_SUCCESS && *flag && k && completed(old, k))
        after_recv();
    return rc;
}

#define SMALL 64
int MPI_Waitall(int count, MPI_Request r[], MPI_Status st[])
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Waitall(count, r, st);
    char kb[SMALL];
    MPI_Request ob[SMALL];
    char *k = count <= SMALL ? kb : malloc((size_t)count);
    MPI_Request *old = count <= SMALL ? ob : malloc(sizeof(MPI_Request) * (size_t)count);
    memcpy(old, r, sizeof(MPI_Request) * (size_t)count);
    int any = mark(count, old, k);
    int rc = PMPI_Waitall(count, r, st);
    if (any) {
        int d = 0;
        for (int i = 0; i < count; i++)
            if (k[i])
                d |= completed(old[i], k[i]);
        if (d)
            after_recv(); /* once for all of them: they overlap */
    }
    if (k != kb)
        free(k);
    if (old != ob)
        free(old);
    return rc;
}

int MPI_Testall(int count, MPI_Request r[], int *flag, MPI_Status st[])
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Testall(count, r, flag, st);
    char kb[SMALL];
    MPI_Request ob[SMALL];
    char *k = count <= SMALL ? kb : malloc((size_t)count);
    MPI_Request *old = count <= SMALL ? ob : malloc(sizeof(MPI_Request) * (size_t)count);
    memcpy(old, r, sizeof(MPI_Request) * (size_t)count);
    int any = mark(count, old, k);
    int rc = PMPI_Testall(count, r, flag, st);
    if (any && *flag) {
        int d = 0;
        for (int i = 0; i < count; i++)
            if (k[i])
                d |= completed(old[i], k[i]);
        if (d)
            after_recv();
    }
    if (k != kb)
        free(k);
    if (old != ob)
        free(old);
    return rc;
}

int MPI_Waitany(int count, MPI_Request r[], int *index, MPI_Status *st)
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Waitany(count, r, index, st);
    char kb[SMALL];
    MPI_Request ob[SMALL];
    char *k = count <= SMALL ? kb : malloc((size_t)count);
    MPI_Request *old = count <= SMALL ? ob : malloc(sizeof(MPI_Request) * (size_t)count);
    memcpy(old, r, sizeof(MPI_Request) * (size_t)count);
    mark(count, old, k);
    int rc = PMPI_Waitany(count, r, index, st);
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED && k[*index] && completed(old[*index], k[*index]))
        after_recv();
    if (k != kb)
        free(k);
    if (old != ob)
        free(old);
    return rc;
}

int MPI_Testany(int count, MPI_Request r[], int *index, int *flag, MPI_Status *st)
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Testany(count, r, index, flag, st);
    char kb[SMALL];
    MPI_Request ob[SMALL];
    char *k = count <= SMALL ? kb : malloc((size_t)count);
    MPI_Request *old = count <= SMALL ? ob : malloc(sizeof(MPI_Request) * (size_t)count);
    memcpy(old, r, sizeof(MPI_Request) * (size_t)count);
    mark(count, old, k);
    int rc = PMPI_Testany(count, r, index, flag, st);
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED && k[*index] && completed(old[*index], k[*index]))
        after_recv();
    if (k != kb)
        free(k);
    if (old != ob)
        free(old);
    return rc;
}

static int some(int count, MPI_Request r[], int *outcount, int idx[], MPI_Status st[], int wait)
{
    char kb[SMALL];
    MPI_Request ob[SMALL];
    char *k = count <= SMALL ? kb : malloc((size_t)count);
    MPI_Request *old = count <= SMALL ? ob : malloc(sizeof(MPI_Request) * (size_t)count);
    memcpy(old, r, sizeof(MPI_Request) * (size_t)count);
    mark(count, old, k);
    int rc = wait ? PMPI_Waitsome(count, r, outcount, idx, st) : PMPI_Testsome(count, r, outcount, idx, st);
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
        int d = 0;
        for (int i = 0; i < *outcount; i++)
            if (k[idx[i]])
                d |= completed(old[idx[i]], k[idx[i]]);
        if (d)
            after_recv();
    }
    if (k != kb)
        free(k);
    if (old != ob)
        free(old);
    return rc;
}
int MPI_Waitsome(int count, MPI_Request r[], int *outcount, int idx[], MPI_Status st[])
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Waitsome(count, r, outcount, idx, st);
    return some(count, r, outcount, idx, st, 1);
}
int MPI_Testsome(int count, MPI_Request r[], int *outcount, int idx[], MPI_Status st[])
{
    if (!enabled || cfg.latency_ns <= 0 || count <= 0)
        return PMPI_Testsome(count, r, outcount, idx, st);
    return some(count, r, outcount, idx, st, 0);
}

/* ---------------------------------------------------------------- collectives */

int MPI_Barrier(MPI_Comm c)
{
    int rc = PMPI_Barrier(c);
    if (enabled)
        charge(log2ceil(comm_size(c)) * cfg.latency_ns);
    return rc;
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    int rc = PMPI_Bcast(b, n, t, root, c);
    if (enabled)
        charge(log2ceil(comm_size(c)) * (cfg.latency_ns + xfer((double)bytes_of(n, t))));
    return rc;
}
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c)
{
    int rc = PMPI_Reduce(s, r, n, t, op, root, c);
    if (enabled)
        charge(log2ceil(comm_size(c)) * (cfg.latency_ns + xfer((double)bytes_of(n, t))));
    return rc;
}
static int64_t allcost(MPI_Comm c, size_t n)
{
    int p = comm_size(c);
    return 2 * log2ceil(p) * cfg.latency_ns + xfer(2.0 * (double)n * (p - 1) / p);
}
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    int rc = PMPI_Allreduce(s, r, n, t, op, c);
    if (enabled)
        charge(allcost(c, bytes_of(n, t)));
    return rc;
}
int MPI_Scan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    int rc = PMPI_Scan(s, r, n, t, op, c);
    if (enabled)
        charge(allcost(c, bytes_of(n, t)));
    return rc;
}
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm c)
{
    int rc = PMPI_Allgather(s, sc, st, r, rc_, rt, c);
    if (enabled)
        charge(allcost(c, bytes_of(rc_, rt) * (size_t)comm_size(c)));
    return rc;
}
int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    int rc = PMPI_Reduce_scatter_block(s, r, n, t, op, c);
    if (enabled)
        charge(allcost(c, bytes_of(n, t) * (size_t)comm_size(c)));
    return rc;
}
int MPI_Reduce_scatter(const void *s, void *r, const int counts[], MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    int rc = PMPI_Reduce_scatter(s, r, counts, t, op, c);
    if (enabled) {
        size_t n = 0;
        for (int i = 0, p = comm_size(c); i < p; i++)
            n += bytes_of(counts[i], t);
        charge(allcost(c, n));
    }
    return rc;
}
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm c)
{
    int rc = PMPI_Gather(s, sc, st, r, rc_, rt, root, c);
    if (enabled) {
        int p = comm_size(c);
        charge(log2ceil(p) * cfg.latency_ns + xfer((double)bytes_of(sc, st) * (p - 1)));
    }
    return rc;
}
int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm c)
{
    int rc = PMPI_Scatter(s, sc, st, r, rc_, rt, root, c);
    if (enabled) {
        int p = comm_size(c);
        charge(log2ceil(p) * cfg.latency_ns + xfer((double)bytes_of(rc_, rt) * (p - 1)));
    }
    return rc;
}
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm c)
{
    int rc = PMPI_Alltoall(s, sc, st, r, rc_, rt, c);
    if (enabled) {
        int p = comm_size(c);
        charge((p - 1) * (cfg.latency_ns + xfer((double)bytes_of(sc, st))));
    }
    return rc;
}

/* ---------------------------------------------------------------- one-sided */

static void rma_issue(size_t n, int trips)
{
    if (!enabled)
        return;
    before_send(n);
    int64_t d = emu_now_ns() + trips * cfg.latency_ns;
    pthread_mutex_lock(&mu);
    if (d > rma_deadline)
        rma_deadline = d;
    pthread_mutex_unlock(&mu);
}
static void rma_sync(void)
{
    if (!enabled)
        return;
    pthread_mutex_lock(&mu);
    int64_t d = rma_deadline;
    rma_deadline = 0;
    pthread_mutex_unlock(&mu);
    if (d > 0)
        emu_wait_until(d, cfg.spin_ns);
}

int MPI_Put(const void *o, int oc, MPI_Datatype ot, int tr, MPI_Aint td, int tc, MPI_Datatype tt, MPI_Win w)
{
    rma_issue(bytes_of(oc, ot), 1);
    return PMPI_Put(o, oc, ot, tr, td, tc, tt, w);
}
int MPI_Get(void *o, int oc, MPI_Datatype ot, int tr, MPI_Aint td, int tc, MPI_Datatype tt, MPI_Win w)
{
    rma_issue(0, 2);
    return PMPI_Get(o, oc, ot, tr, td, tc, tt, w);
}
int MPI_Accumulate(const void *o, int oc, MPI_Datatype ot, int tr, MPI_Aint td, int tc, MPI_Datatype tt, MPI_Op op,
                   MPI_Win w)
{
    rma_issue(bytes_of(oc, ot), 1);
    return PMPI_Accumulate(o, oc, ot, tr, td, tc, tt, op, w);
}
int MPI_Win_fence(int a, MPI_Win w)
{
    rma_sync();
    return PMPI_Win_fence(a, w);
}
int MPI_Win_complete(MPI_Win w)
{
    rma_sync();
    return PMPI_Win_complete(w);
}
int MPI_Win_unlock(int r, MPI_Win w)
{
    rma_sync();
    return PMPI_Win_unlock(r, w);
}
int MPI_Win_unlock_all(MPI_Win w)
{
    rma_sync();
    return PMPI_Win_unlock_all(w);
}
int MPI_Win_flush(int r, MPI_Win w)
{
    rma_sync();
    return PMPI_Win_flush(r, w);
}
int MPI_Win_flush_all(MPI_Win w)
{
    rma_sync();
    return PMPI_Win_flush_all(w);
}

/* ---------------------------------------------------------------- load */

static const char *env_get(const char *n)
{
    return getenv(n);
}

__attribute__((constructor)) static void emu_mpi_init(void)
{
    char err[320];
    emu_link_init(&link_out);
    if (emu_config_load(&cfg, env_get, err, sizeof err) != 0) {
        fprintf(stderr, "perflearn-emu: %s\n", err);
        enabled = 0;
        return;
    }
    enabled = emu_config_active(&cfg);
    int64_t early = enabled && (cfg.latency_ns > 0 || cfg.overhead_ns > 0) ? emu_calibrate() : 0;
    if (cfg.verbose) {
        char d[256];
        emu_config_describe(&cfg, d, sizeof d);
        fprintf(stderr, "perflearn-emu: pid %d mpi %s (%s); waits end %lld ns early (measured)\n", (int)getpid(),
                enabled ? "active" : "inactive", d, (long long)early);
    }
}

static int64_t piece_ns(void)
{
    static int64_t catchup = -2;
    if (catchup == -2) {
        const char *v = getenv("PERFLEARN_EMU_CATCHUP");
        catchup = -1;
        if (v && *v && emu_parse_duration(v, &catchup) != 0)
            catchup = -1;
    }
    if (catchup >= 0)
        return catchup;
    /* a NIC keeps sending what was handed to it while the rank is descheduled:
     * take back lateness up to one send queue (PERFLEARN_EMU_QUEUE) worth */
    double t = cfg.bytes_per_ns > 0 ? (double)cfg.queue_max / cfg.bytes_per_ns : 0;
    return (int64_t)t;
}
