/* perflearn-emu pacing core: configuration parsing, the rate/delay arithmetic
 * and the clock.  No interposition here, so it is unit-tested on its own
 * (tests/test_pace.c), as trickle keeps bwstat.c apart.
 *
 * Time is CLOCK_MONOTONIC in integer nanoseconds.  A link rate is held as
 * bytes per nanosecond (double); serialisation times are carried with their
 * fractional nanoseconds so that rounding error never accumulates.
 */
#ifndef PERFLEARN_EMU_PACE_H
#define PERFLEARN_EMU_PACE_H

#include <stddef.h>
#include <stdint.h>

/* Internal to each shim: never exported, so a program with functions of these names
 * is not interposed (the PMPI shim is built without -fvisibility=hidden, since its
 * MPI_* wrappers must be exported). */
#pragma GCC visibility push(hidden)

/* ---- parsing (0 on success, -1 on a bad value; nothing negative parses) ---- */

/* "0", "500ns", "2us", "2.5µs", "1ms", "0.5s"; a bare non-zero number has no unit and is rejected. */
int emu_parse_duration(const char *s, int64_t *ns);
/* "0" or "" or "unlimited" (no limit, *bpns = 0), "10Gbit", "100Mbit/s", "1Gbps",
 * "1.25GB/s", "100MiB/s", "500kB".  Result in bytes per nanosecond. */
int emu_parse_rate(const char *s, double *bytes_per_ns);
/* "0", "4096", "64KiB", "1MiB", "64kB", "1MB". */
int emu_parse_size(const char *s, int64_t *bytes);

/* ---- configuration ---- */

#define EMU_MAX_PEERS 16

typedef struct {
    int family;               /* 0 any, AF_INET, AF_INET6 */
    unsigned char addr[16];   /* network order */
    int port;                 /* 0 any; matches the peer's or the local port */
} emu_peer;

typedef struct {
    int64_t latency_ns;       /* L: one-way delay, overlapping like a wire */
    int64_t overhead_ns;      /* o: sender CPU time per message */
    double bytes_per_ns;      /* 1/G: link rate, 0 = unlimited */
    int64_t threshold;        /* messages below this many bytes are not paced (batched) */
    int64_t spin_ns;          /* waits shorter than this spin; longer ones sleep, then spin */
    int64_t queue_max;        /* delay-line bytes in flight per process before senders block */
    int npeers;               /* 0 = every AF_INET/AF_INET6 socket */
    emu_peer peers[EMU_MAX_PEERS];
    int verbose;
} emu_config;

/* Fill cfg from PERFLEARN_EMU_* through getenv_fn (getenv in the shims, a
 * table in tests).  On a bad value returns -1 and writes one line (no newline)
 * naming the variable to err. */
int emu_config_load(emu_config *cfg, const char *(*getenv_fn)(const char *), char *err, size_t errlen);
int emu_config_active(const emu_config *cfg); /* any knob non-zero */
int emu_parse_peers(const char *s, emu_config *cfg);
/* Does a socket with this peer (sockaddr) and local port match the filter? */
int emu_peer_match(const emu_config *cfg, const void *peer_sa, int local_port);
void emu_config_describe(const emu_config *cfg, char *buf, size_t len);

/* ---- the link ---- */

typedef struct {
    int64_t free_ns;          /* the wire is busy until free_ns (+ free_frac) */
    double free_frac;         /* fractional nanoseconds carried forward, in [0,1) */
    double copy_ns_per_byte;  /* running estimate of our own write cost */
    int64_t slack_ns;         /* our own lateness at the last write, forgiven once */
} emu_link;

void emu_link_init(emu_link *l);

/* A message of n bytes is handed to the link at `now`.  Returns the time its
 * last byte leaves the wire (serialisation end), advancing the link.  Messages
 * shorter than threshold may leave early: the returned "release" time is the
 * end minus threshold/rate, so small messages run ahead of the wire by at most
 * `threshold` bytes (InterSense's batched padding) while the link keeps their
 * debt and later large messages pay it. */
int64_t emu_link_reserve(emu_link *l, double bytes_per_ns, int64_t threshold, int64_t now, size_t n);
/* Give back bytes that were reserved but not written (short write). */
void emu_link_refund(emu_link *l, double bytes_per_ns, size_t n);
/* The time to start a write of n bytes so that it completes at `deliver`:
 * deliver minus the estimated cost of the write itself. */
int64_t emu_link_start_for(const emu_link *l, int64_t deliver, size_t n);
/* A paced write finished at t_end: lateness past the link's schedule (a
 * late wake-up, a slow copy, a short write) is ours, not the application's
 * idle time, so the next reserve may take it back instead of losing it, up
 * to max_ns (one piece's serialisation time: catching up after a long stall
 * must not become a burst above the link rate). */
void emu_link_done(emu_link *l, int64_t t_end, int64_t max_ns);
/* Record that writing n bytes took `took` ns (updates the estimate). */
void emu_link_observe(emu_link *l, size_t n, int64_t took);

/* ---- clock ---- */

int64_t emu_now_ns(void);
/* Wait until `deadline` (CLOCK_MONOTONIC ns): sleep with clock_nanosleep
 * (TIMER_ABSTIME) while more than spin_ns remain, then spin.  Returns the lateness. */
int64_t emu_wait_until(int64_t deadline, int64_t spin_ns);
/* As emu_wait_until, but the spinning part calls stop(arg, now) on each turn, with
 * the clock the loop just read (a second read per turn would make the wait leave up
 * to two reads late), and gives up as soon as it returns non-zero: returns -1 then
 * (the deadline not reached), else the lateness.  The sleeping part (more than
 * spin_ns ahead) is not interrupted.  stop must be cheap, or limit its own cost. */
int64_t emu_wait_until_or(int64_t deadline, int64_t spin_ns, int (*stop)(void *, int64_t), void *arg);
/* Spin for d ns of CPU time from `start` (a clock read; the overhead knob: the sender
 * is busy).  Returns the clock at its end, or start if d <= 0, so the caller needs no
 * read of its own. */
int64_t emu_spin_for(int64_t start, int64_t d);
/* Measure once what a wait costs past its deadline (clock reads, call, return: the
 * median over batches of back-to-back waits of 1 us, each batch timed as a whole so
 * the measuring reads do not count; capped at EMU_EARLY_MAX_NS) and end every later
 * wait and spin that much early.  Returns it.  Called by the shims when L or o is set. */
#define EMU_EARLY_MAX_NS 200
int64_t emu_calibrate(void);

#pragma GCC visibility pop

#endif
