/* perflearn-emu pacing core: see emu_pace.h. */
#define _GNU_SOURCE
#include "emu_pace.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* ------------------------------------------------------------------ parsing */

/* Parse a non-negative decimal number at the start of s; *end after it. */
static int parse_number(const char *s, double *v, const char **end)
{
    const char *p = s;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '-' || *p == '+')
        return -1; /* no signs: negative values are rejected, "+" is noise */
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
        return -1;
    char *e = NULL;
    errno = 0;
    double x = strtod(p, &e);
    if (errno != 0 || e == p || !isfinite(x) || x < 0)
        return -1;
    /* strtod accepts hex and inf/nan; we only want plain decimals */
    for (const char *q = p; q < e; q++)
        if (!(isdigit((unsigned char)*q) || *q == '.' || *q == 'e' || *q == 'E' || *q == '-' || *q == '+'))
            return -1;
    *v = x;
    while (*e == ' ' || *e == '\t')
        e++;
    *end = e;
    return 0;
}

static int unit_is(const char *u, const char *want)
{
    size_t n = strlen(want);
    if (strncmp(u, want, n) != 0)
        return 0;
    const char *r = u + n;
    while (*r == ' ' || *r == '\t')
        r++;
    return *r == '\0';
}

int emu_parse_duration(const char *s, int64_t *ns)
{
    double v;
    const char *u;
    if (!s || parse_number(s, &v, &u) != 0)
        return -1;
    double mul;
    if (*u == '\0') {
        if (v != 0)
            return -1; /* a unit is required, except for 0 */
        mul = 1;
    } else if (unit_is(u, "ns"))
        mul = 1;
    else if (unit_is(u, "us") || unit_is(u, "\xc2\xb5s") /* µs */)
        mul = 1e3;
    else if (unit_is(u, "ms"))
        mul = 1e6;
    else if (unit_is(u, "s"))
        mul = 1e9;
    else
        return -1;
    double r = v * mul;
    if (r > 3.6e12 * 24) /* a day is plenty */
        return -1;
    *ns = (int64_t)llround(r);
    return 0;
}

int emu_parse_rate(const char *s, double *bytes_per_ns)
{
    if (!s)
        return -1;
    const char *p = s;
    while (*p == ' ')
        p++;
    if (*p == '\0' || strcmp(p, "unlimited") == 0) {
        *bytes_per_ns = 0;
        return 0;
    }
    double v;
    const char *u;
    if (parse_number(s, &v, &u) != 0)
        return -1;
    if (*u == '\0') {
        if (v != 0)
            return -1;
        *bytes_per_ns = 0;
        return 0;
    }
    /* strip an optional "/s" or trailing "ps" (bits per second spellings) */
    char unit[16];
    size_t n = strcspn(u, " \t");
    if (n == 0 || n >= sizeof unit)
        return -1;
    memcpy(unit, u, n);
    unit[n] = '\0';
    for (const char *r = u + n; *r; r++)
        if (*r != ' ' && *r != '\t')
            return -1;
    size_t ul = strlen(unit);
    if (ul > 2 && strcmp(unit + ul - 2, "/s") == 0)
        unit[ul -= 2] = '\0';
    double bits = 0, bytes = 0;
    static const struct { const char *name; double bits; } bitu[] = {
        {"bit", 1}, {"kbit", 1e3}, {"Kbit", 1e3}, {"Mbit", 1e6}, {"mbit", 1e6}, {"Gbit", 1e9}, {"gbit", 1e9},
        {"Tbit", 1e12}, {"tbit", 1e12}, {"bps", 1}, {"kbps", 1e3}, {"Kbps", 1e3}, {"Mbps", 1e6}, {"Gbps", 1e9},
        {"Tbps", 1e12}, {"b", 1}, {"kb", 1e3}, {"Kb", 1e3}, {"Mb", 1e6}, {"Gb", 1e9}, {"Tb", 1e12},
    };
    static const struct { const char *name; double bytes; } byteu[] = {
        {"B", 1}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof bitu / sizeof bitu[0]; i++)
        if (strcmp(unit, bitu[i].name) == 0)
            bits = bitu[i].bits;
    for (size_t i = 0; i < sizeof byteu / sizeof byteu[0]; i++)
        if (strcmp(unit, byteu[i].name) == 0)
            bytes = byteu[i].bytes;
    double bps; /* bytes per second */
    if (bits > 0)
        bps = v * bits / 8.0;
    else if (bytes > 0)
        bps = v * bytes;
    else
        return -1;
    if (bps == 0) {
        *bytes_per_ns = 0;
        return 0;
    }
    if (bps < 1.0) /* slower than one byte per second is a typo */
        return -1;
    *bytes_per_ns = bps / 1e9;
    return 0;
}

int emu_parse_size(const char *s, int64_t *bytes)
{
    double v;
    const char *u;
    if (!s || parse_number(s, &v, &u) != 0)
        return -1;
    double mul;
    if (*u == '\0' || unit_is(u, "B"))
        mul = 1;
    else if (unit_is(u, "KiB"))
        mul = 1024.0;
    else if (unit_is(u, "MiB"))
        mul = 1048576.0;
    else if (unit_is(u, "GiB"))
        mul = 1073741824.0;
    else if (unit_is(u, "kB") || unit_is(u, "KB"))
        mul = 1e3;
    else if (unit_is(u, "MB"))
        mul = 1e6;
    else if (unit_is(u, "GB"))
        mul = 1e9;
    else
        return -1;
    double r = v * mul;
    if (r > 1e15 || r != floor(r))
        return -1;
    *bytes = (int64_t)r;
    return 0;
}

/* ------------------------------------------------------------------ peers */

static int parse_port(const char *s, int *port)
{
    if (*s == '\0' || strcmp(s, "*") == 0) {
        *port = 0;
        return 0;
    }
    char *e;
    long p = strtol(s, &e, 10);
    if (*e != '\0' || p <= 0 || p > 65535 || !isdigit((unsigned char)*s))
        return -1;
    *port = (int)p;
    return 0;
}

static int parse_one_peer(const char *tok, emu_peer *pe)
{
    char host[64];
    const char *port = "";
    memset(pe, 0, sizeof *pe);
    if (tok[0] == '[') { /* [v6]:port */
        const char *rb = strchr(tok, ']');
        if (!rb || (size_t)(rb - tok - 1) >= sizeof host)
            return -1;
        memcpy(host, tok + 1, (size_t)(rb - tok - 1));
        host[rb - tok - 1] = '\0';
        if (rb[1] == ':')
            port = rb + 2;
        else if (rb[1] != '\0')
            return -1;
    } else {
        const char *c = strchr(tok, ':');
        if (c && strchr(c + 1, ':')) { /* bare IPv6 without port */
            if (strlen(tok) >= sizeof host)
                return -1;
            strcpy(host, tok);
        } else {
            size_t hl = c ? (size_t)(c - tok) : strlen(tok);
            if (hl >= sizeof host)
                return -1;
            memcpy(host, tok, hl);
            host[hl] = '\0';
            if (c)
                port = c + 1;
        }
    }
    if (parse_port(port, &pe->port) != 0)
        return -1;
    if (host[0] == '\0' || strcmp(host, "*") == 0)
        pe->family = 0;
    else if (strcmp(host, "localhost") == 0) {
        pe->family = AF_INET;
        inet_pton(AF_INET, "127.0.0.1", pe->addr);
    } else if (inet_pton(AF_INET, host, pe->addr) == 1)
        pe->family = AF_INET;
    else if (inet_pton(AF_INET6, host, pe->addr) == 1)
        pe->family = AF_INET6;
    else
        return -1;
    return 0;
}

int emu_parse_peers(const char *s, emu_config *cfg)
{
    cfg->npeers = 0;
    if (!s)
        return 0;
    char buf[1024];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (cfg->npeers >= EMU_MAX_PEERS)
            return -1;
        if (parse_one_peer(tok, &cfg->peers[cfg->npeers]) != 0)
            return -1;
        cfg->npeers++;
    }
    return 0;
}

int emu_peer_match(const emu_config *cfg, const void *peer_sa, int local_port)
{
    if (cfg->npeers == 0)
        return 1;
    const struct sockaddr *sa = peer_sa;
    int fam = sa->sa_family;
    unsigned char addr[16];
    int port;
    if (fam == AF_INET) {
        const struct sockaddr_in *in = peer_sa;
        memcpy(addr, &in->sin_addr, 4);
        port = ntohs(in->sin_port);
    } else if (fam == AF_INET6) {
        const struct sockaddr_in6 *in6 = peer_sa;
        port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            fam = AF_INET;
            memcpy(addr, (const unsigned char *)&in6->sin6_addr + 12, 4);
        } else
            memcpy(addr, &in6->sin6_addr, 16);
    } else
        return 0;
    for (int i = 0; i < cfg->npeers; i++) {
        const emu_peer *p = &cfg->peers[i];
        if (p->family != 0) {
            if (p->family != fam)
                continue;
            if (memcmp(p->addr, addr, fam == AF_INET ? 4 : 16) != 0)
                continue;
        }
        if (p->port != 0 && p->port != port && p->port != local_port)
            continue;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ config */

int emu_config_active(const emu_config *c)
{
    return c->latency_ns > 0 || c->overhead_ns > 0 || c->bytes_per_ns > 0;
}

int emu_config_load(emu_config *cfg, const char *(*getenv_fn)(const char *), char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->threshold = 65536;
    cfg->spin_ns = 100000;
    cfg->queue_max = 4 << 20;
    const char *v;
#define BAD(name, what)                                                                                \
    do {                                                                                               \
        snprintf(err, errlen, "%s=%s is not a %s; emulation disabled", name, v, what);                \
        return -1;                                                                                     \
    } while (0)
    if ((v = getenv_fn("PERFLEARN_EMU_LATENCY")) && *v && emu_parse_duration(v, &cfg->latency_ns) != 0)
        BAD("PERFLEARN_EMU_LATENCY", "duration (e.g. 2us)");
    if ((v = getenv_fn("PERFLEARN_EMU_OVERHEAD")) && *v && emu_parse_duration(v, &cfg->overhead_ns) != 0)
        BAD("PERFLEARN_EMU_OVERHEAD", "duration (e.g. 500ns)");
    if ((v = getenv_fn("PERFLEARN_EMU_BANDWIDTH")) && *v && emu_parse_rate(v, &cfg->bytes_per_ns) != 0)
        BAD("PERFLEARN_EMU_BANDWIDTH", "rate (e.g. 10Gbit)");
    if ((v = getenv_fn("PERFLEARN_EMU_THRESHOLD")) && *v && emu_parse_size(v, &cfg->threshold) != 0)
        BAD("PERFLEARN_EMU_THRESHOLD", "size (e.g. 64KiB)");
    if ((v = getenv_fn("PERFLEARN_EMU_SPIN")) && *v && emu_parse_duration(v, &cfg->spin_ns) != 0)
        BAD("PERFLEARN_EMU_SPIN", "duration (e.g. 100us)");
    if ((v = getenv_fn("PERFLEARN_EMU_QUEUE")) && *v &&
        (emu_parse_size(v, &cfg->queue_max) != 0 || cfg->queue_max < 65536))
        BAD("PERFLEARN_EMU_QUEUE", "size of at least 64KiB");
    if ((v = getenv_fn("PERFLEARN_EMU_PEERS")) && *v && emu_parse_peers(v, cfg) != 0)
        BAD("PERFLEARN_EMU_PEERS", "list of ADDR[:PORT] (e.g. 127.0.0.1:11211,:6379)");
    if ((v = getenv_fn("PERFLEARN_EMU_VERBOSE")) && *v && strcmp(v, "0") != 0)
        cfg->verbose = 1;
#undef BAD
    return 0;
}

void emu_config_describe(const emu_config *c, char *buf, size_t len)
{
    snprintf(buf, len, "latency=%lldns overhead=%lldns bandwidth=%.0fbit/s threshold=%lldB peers=%d",
             (long long)c->latency_ns, (long long)c->overhead_ns, c->bytes_per_ns * 8e9, (long long)c->threshold,
             c->npeers);
}

/* ------------------------------------------------------------------ link */

void emu_link_init(emu_link *l)
{
    l->free_ns = 0;
    l->free_frac = 0;
    l->copy_ns_per_byte = 0;
    l->slack_ns = 0;
}

void emu_link_done(emu_link *l, int64_t t_end, int64_t max_ns)
{
    int64_t late = t_end > l->free_ns ? t_end - l->free_ns : 0;
    l->slack_ns = late < max_ns ? late : max_ns;
}

int64_t emu_link_reserve(emu_link *l, double bpns, int64_t threshold, int64_t now, size_t n)
{
    if (bpns <= 0)
        return now;
    if (l->free_ns < now) { /* the wire was idle: it starts now, less our own lateness */
        int64_t from = now - l->slack_ns;
        if (l->free_ns < from) {
            l->free_ns = from;
            l->free_frac = 0;
        }
    }
    l->slack_ns = 0;
    double t = (double)n / bpns + l->free_frac;
    double whole = floor(t);
    l->free_ns += (int64_t)whole;
    l->free_frac = t - whole; /* carried forward, never lost */
    int64_t end = l->free_ns;
    if ((int64_t)n < threshold) {
        int64_t ahead = (int64_t)((double)threshold / bpns);
        return end - ahead; /* may be in the past: no wait */
    }
    return end;
}

void emu_link_refund(emu_link *l, double bpns, size_t n)
{
    if (bpns <= 0 || n == 0)
        return;
    double t = (double)n / bpns;
    double back = (double)l->free_ns + l->free_frac - t;
    double whole = floor(back);
    l->free_ns = (int64_t)whole;
    l->free_frac = back - whole;
}

int64_t emu_link_start_for(const emu_link *l, int64_t deliver, size_t n)
{
    return deliver - (int64_t)(l->copy_ns_per_byte * (double)n);
}

void emu_link_observe(emu_link *l, size_t n, int64_t took)
{
    if (n == 0 || took < 0)
        return;
    double per = (double)took / (double)n;
    if (l->copy_ns_per_byte == 0)
        l->copy_ns_per_byte = per;
    else
        l->copy_ns_per_byte += (per - l->copy_ns_per_byte) / 8.0;
}

/* ------------------------------------------------------------------ clock */

int64_t emu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* What a wait costs past its deadline: the clock read that sets it, the loop's last
 * read (a wait leaves up to one read late), the call and the return (tens of ns).
 * emu_calibrate measures it once; waits then end that much early, so L = 2 us adds
 * 2 us and not 2.03 (1.4 % of it, measured). */
static int64_t early_ns;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t emu_calibrate(void)
{
    /* Back-to-back waits as the shims make them (deadline from a fresh read), timed
     * as a batch: the observer's own two clock reads are shared by BATCH waits, so
     * they do not count (timing each wait alone added one read, ~23 ns here, and
     * made every wait end that much short).  Median over batches: a preempted batch
     * must not make every wait end early. */
    enum { BATCHES = 21, BATCH = 64, WAIT = 1000 };
    int64_t excess[BATCHES];
    early_ns = 0;
    for (int i = 0; i < 8; i++) /* warm the code and the clock's cache lines */
        emu_wait_until(emu_now_ns() + WAIT, INT64_MAX);
    for (int b = 0; b < BATCHES; b++) {
        int64_t t0 = emu_now_ns();
        for (int i = 0; i < BATCH; i++)
            emu_wait_until(emu_now_ns() + WAIT, INT64_MAX);
        excess[b] = (emu_now_ns() - t0) / BATCH - WAIT;
    }
    qsort(excess, BATCHES, sizeof excess[0], cmp_i64);
    int64_t m = excess[BATCHES / 2];
    early_ns = m < 0 ? 0 : m > EMU_EARLY_MAX_NS ? EMU_EARLY_MAX_NS : m;
    return early_ns;
}

int64_t emu_wait_until(int64_t deadline, int64_t spin_ns)
{
    deadline -= early_ns;
    int64_t now = emu_now_ns();
    if (now >= deadline)
        return now - deadline;
    if (deadline - now > spin_ns) {
        int64_t wake = deadline - spin_ns;
        struct timespec ts = {.tv_sec = wake / 1000000000LL, .tv_nsec = wake % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    /* pause (tens of ns on recent cores) only while it cannot carry us past the
     * deadline: the last stretch polls the clock alone, so we leave within one read */
    while ((now = emu_now_ns()) < deadline)
        if (deadline - now > 300)
            cpu_relax();
    return now - deadline;
}

int64_t emu_wait_until_or(int64_t deadline, int64_t spin_ns, int (*stop)(void *, int64_t), void *arg)
{
    deadline -= early_ns;
    int64_t now = emu_now_ns();
    if (now >= deadline)
        return now - deadline;
    if (deadline - now > spin_ns) {
        int64_t wake = deadline - spin_ns;
        struct timespec ts = {.tv_sec = wake / 1000000000LL, .tv_nsec = wake % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while ((now = emu_now_ns()) < deadline) {
        if (stop(arg, now))
            return -1;
        if (deadline - now > 300)
            cpu_relax();
    }
    return now - deadline;
}

int64_t emu_spin_for(int64_t start, int64_t d)
{
    if (d <= 0)
        return start;
    int64_t end = start + d - early_ns, now;
    while ((now = emu_now_ns()) < end)
        if (end - now > 300) /* as in emu_wait_until: no pause in the last stretch */
            cpu_relax();
    return now;
}
