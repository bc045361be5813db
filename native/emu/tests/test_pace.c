/* Unit tests of the pacing core (no interposition). Prints "N passed, N failed". */
#include "../src/emu_pace.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int passed, failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond)                                                                   \
            passed++;                                                               \
        else {                                                                      \
            failed++;                                                               \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                           \
    } while (0)

static int dur(const char *s, long long want)
{
    int64_t ns = -7;
    return emu_parse_duration(s, &ns) == 0 && ns == want;
}
static int dur_bad(const char *s)
{
    int64_t ns;
    return emu_parse_duration(s, &ns) == -1;
}
static int rate(const char *s, double bits_per_s)
{
    double b = -1;
    if (emu_parse_rate(s, &b) != 0)
        return 0;
    return fabs(b * 8e9 - bits_per_s) <= 1e-6 * (bits_per_s + 1);
}
static int rate_bad(const char *s)
{
    double b;
    return emu_parse_rate(s, &b) == -1;
}
static int size(const char *s, long long want)
{
    int64_t b = -1;
    return emu_parse_size(s, &b) == 0 && b == want;
}

static void test_parse(void)
{
    CHECK(dur("0", 0));
    CHECK(dur("2us", 2000));
    CHECK(dur("2.5us", 2500));
    CHECK(dur("2 us", 2000));
    CHECK(dur("500ns", 500));
    CHECK(dur("1ms", 1000000));
    CHECK(dur("0.5s", 500000000));
    CHECK(dur("1\xc2\xb5s", 1000));
    CHECK(dur("1e3ns", 1000));
    CHECK(dur_bad("-2us"));
    CHECK(dur_bad("2"));
    CHECK(dur_bad("abc"));
    CHECK(dur_bad("2 parsecs"));
    CHECK(dur_bad("2usx"));
    CHECK(dur_bad("0x10ns"));
    CHECK(dur_bad("nanus"));
    CHECK(dur_bad(""));
    CHECK(dur_bad("inf"));

    CHECK(rate("10Gbit", 1e10));
    CHECK(rate("10Gbit/s", 1e10));
    CHECK(rate("1Gbps", 1e9));
    CHECK(rate("100Mbit", 1e8));
    CHECK(rate("1.25GB/s", 1e10));
    CHECK(rate("1MiB/s", 8.0 * 1048576));
    CHECK(rate("0", 0));
    CHECK(rate("", 0));
    CHECK(rate("unlimited", 0));
    CHECK(rate_bad("-1Gbit"));
    CHECK(rate_bad("10"));
    CHECK(rate_bad("10Gbitz"));
    CHECK(rate_bad("fast"));
    CHECK(rate_bad("0.1bit"));

    CHECK(size("0", 0));
    CHECK(size("4096", 4096));
    CHECK(size("64KiB", 65536));
    CHECK(size("1MiB", 1048576));
    CHECK(size("64kB", 64000));
    int64_t b;
    CHECK(emu_parse_size("1.5", &b) == -1);
    CHECK(emu_parse_size("-4", &b) == -1);
}

static const char *table[][2] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}};
static const char *fake_getenv(const char *name)
{
    for (int i = 0; table[i][0]; i++)
        if (strcmp(table[i][0], name) == 0)
            return table[i][1];
    return NULL;
}

static void test_config(void)
{
    emu_config c;
    char err[256] = "";
    table[0][0] = "PERFLEARN_EMU_LATENCY";
    table[0][1] = "5us";
    table[1][0] = "PERFLEARN_EMU_BANDWIDTH";
    table[1][1] = "8Gbit";
    table[2][0] = NULL;
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == 0);
    CHECK(c.latency_ns == 5000);
    CHECK(fabs(c.bytes_per_ns - 1.0) < 1e-12);
    CHECK(c.threshold == 65536);
    CHECK(emu_config_active(&c));

    table[0][1] = "-5us";
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == -1);
    CHECK(strstr(err, "PERFLEARN_EMU_LATENCY=-5us") != NULL);
    CHECK(strchr(err, '\n') == NULL);

    table[0][1] = "0";
    table[1][1] = "0";
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == 0);
    CHECK(!emu_config_active(&c));

    table[0][0] = "PERFLEARN_EMU_PEERS";
    table[0][1] = "127.0.0.1:11211,:6379,[::1]:80";
    table[1][0] = NULL;
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == 0);
    CHECK(c.npeers == 3);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(11211)};
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    CHECK(emu_peer_match(&c, &in, 40000));
    in.sin_port = htons(11212);
    CHECK(!emu_peer_match(&c, &in, 40000));
    CHECK(emu_peer_match(&c, &in, 6379)); /* a server's accepted socket: local port */
    inet_pton(AF_INET, "127.0.0.2", &in.sin_addr);
    in.sin_port = htons(6379);
    CHECK(emu_peer_match(&c, &in, 1)); /* ":6379" matches any address */
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    inet_pton(AF_INET6, "::1", &in6.sin6_addr);
    CHECK(emu_peer_match(&c, &in6, 1));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
    in6.sin6_port = htons(11211);
    CHECK(emu_peer_match(&c, &in6, 1)); /* v4-mapped matches the v4 entry */

    table[0][1] = "127.0.0.1:99999";
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == -1);
    table[0][1] = "not-an-address";
    CHECK(emu_config_load(&c, fake_getenv, err, sizeof err) == -1);
    table[0][0] = NULL;
}

static void test_link(void)
{
    emu_link l;
    emu_link_init(&l);
    double bpns = 1.25; /* 10 Gbit/s */
    /* a stream of large messages leaves at exactly the rate, fractions carried */
    int64_t t0 = 1000000;
    int64_t end = 0;
    for (int i = 0; i < 1000; i++)
        end = emu_link_reserve(&l, bpns, 65536, t0, 100003); /* 80002.4 ns each */
    double want = 1000 * 100003 / 1.25;
    CHECK(llabs((end - t0) - (int64_t)want) <= 1);

    /* small messages on an idle wire: no wait, but the debt stays on the link */
    emu_link_init(&l);
    int64_t now = 5000000;
    int64_t rel = emu_link_reserve(&l, bpns, 65536, now, 64);
    CHECK(rel <= now);
    CHECK(l.free_ns == now + 51);
    for (int i = 0; i < 1000; i++) /* 64000 B < threshold: still no wait */
        rel = emu_link_reserve(&l, bpns, 65536, now, 64);
    CHECK(rel <= now);
    /* a large message pays the small messages' debt */
    rel = emu_link_reserve(&l, bpns, 65536, now, 65536);
    CHECK(rel >= now + (int64_t)((1001 * 64 + 65536) / 1.25) - 1);
    /* but small messages keep going once the backlog is over threshold? they wait */
    rel = emu_link_reserve(&l, bpns, 65536, now, 64);
    CHECK(rel > now);

    /* an idle gap resets the wire; no credit is carried for idleness */
    emu_link_init(&l);
    emu_link_reserve(&l, bpns, 65536, 0, 125000); /* busy until 100000 */
    end = emu_link_reserve(&l, bpns, 65536, 1000000, 125000);
    CHECK(end == 1100000);

    /* our own lateness is taken back once, the application's idle time is not */
    emu_link_init(&l);
    emu_link_reserve(&l, bpns, 0, 0, 125000);  /* busy until 100000 */
    emu_link_done(&l, 130000, 50000);          /* we finished the write 30 us late */
    end = emu_link_reserve(&l, bpns, 0, 130000, 125000);
    CHECK(end == 200000);                      /* schedule kept: no time lost */
    emu_link_done(&l, 200000, 50000);
    end = emu_link_reserve(&l, bpns, 0, 500000, 125000);
    CHECK(end == 600000);                      /* real idle: the wire restarts now */
    /* after a long stall of ours, catching up is capped: no burst above the rate */
    emu_link_done(&l, 900000, 50000);          /* 300 us late */
    end = emu_link_reserve(&l, bpns, 0, 900000, 125000);
    CHECK(end == 950000);                      /* 50 us taken back, not 300 */

    /* refund gives back exactly what was reserved */
    emu_link_init(&l);
    emu_link_reserve(&l, bpns, 0, 0, 1000);
    int64_t f = l.free_ns;
    emu_link_reserve(&l, bpns, 0, 0, 333);
    emu_link_refund(&l, bpns, 333);
    CHECK(l.free_ns == f && l.free_frac < 1e-6);

    /* unlimited: release is now */
    CHECK(emu_link_reserve(&l, 0, 0, 42, 1 << 20) == 42);

    /* copy estimate */
    emu_link_init(&l);
    emu_link_observe(&l, 1000, 500);
    CHECK(emu_link_start_for(&l, 10000, 2000) == 9000);
}

static void test_clock(void)
{
    int64_t a = emu_now_ns();
    int64_t late = emu_wait_until(a + 200000, 100000);
    int64_t b = emu_now_ns();
    CHECK(b - a >= 200000);
    CHECK(late >= 0);
    a = emu_now_ns();
    int64_t end = emu_spin_for(a, 50000);
    b = emu_now_ns();
    CHECK(b - a >= 50000);
    CHECK(end >= a + 50000 && end <= b); /* the clock at its end, read by the spin itself */
    CHECK(emu_spin_for(a, 0) == a);     /* no spin, no read: the start comes back */
    CHECK(emu_wait_until(a - 10, 0) >= 0);
}

static int64_t last_seen; /* the clock a stop callback was given */
static int stop_after(void *arg, int64_t now)
{
    int *left = arg;
    last_seen = now;
    return --*left < 0;
}
static int never(void *arg, int64_t now)
{
    (void)arg;
    last_seen = now;
    return 0;
}

/* an interruptible wait gives up when told to, and otherwise waits as emu_wait_until */
static void test_wait_or(void)
{
    int left = 3;
    int64_t a = emu_now_ns();
    CHECK(emu_wait_until_or(a + 1000000000LL, 2000000000LL, stop_after, &left) == -1);
    CHECK(last_seen >= a && last_seen <= emu_now_ns()); /* the loop's own clock, not a stale value */
    CHECK(emu_now_ns() - a < 500000000LL); /* it did not wait the second */
    CHECK(left == -1);                     /* asked on each turn: 3 times no, then yes */
    a = emu_now_ns();
    CHECK(emu_wait_until_or(a + 200000, 100000, never, NULL) >= 0);
    CHECK(emu_now_ns() - a >= 200000 - EMU_EARLY_MAX_NS);
    left = 0;
    CHECK(emu_wait_until_or(a - 10, 0, stop_after, &left) >= 0); /* already due: no question asked */
    CHECK(left == 0);
}

/* after calibration a wait ends early by the measured cost, never by more than the cap */
static void test_calibrate(void)
{
    int64_t early = emu_calibrate();
    CHECK(early >= 0 && early <= EMU_EARLY_MAX_NS);
    int64_t a = emu_now_ns();
    emu_wait_until(a + 200000, 100000);
    int64_t took = emu_now_ns() - a;
    CHECK(took >= 200000 - early);
    a = emu_now_ns();
    emu_spin_for(a, 50000);
    CHECK(emu_now_ns() - a >= 50000 - early);
}

int main(void)
{
    test_parse();
    test_config();
    test_link();
    test_clock();
    test_calibrate();
    test_wait_or();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
