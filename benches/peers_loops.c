/* The two leanest peers of benches/peers.py, compiled there at run time with `cc -O2`.
 *
 *   peers_loops tsc-hz
 *       The TSC's rate in Hz, measured against CLOCK_MONOTONIC_RAW over 200 ms (what
 *       t/io_uring's -T wants).
 *   peers_loops pread FILE SIZE_BYTES SECONDS DIRECT
 *       The bare pread loop: 4 KiB reads at random aligned offsets in the first SIZE_BYTES of
 *       FILE (O_DIRECT when DIRECT is 1), one at a time, for SECONDS. Per I/O: draw an offset,
 *       read the TSC, pread, read the TSC, count the difference in a log-linear histogram. The
 *       least a tool that times each I/O can do (two clock reads, one counter increment).
 *   peers_loops floor SIZE_BYTES SECONDS
 *       The recording floor: no I/O. Per I/O: draw a random offset, read the TSC once, count
 *       the difference from the previous read in the histogram. Nothing else.
 *   peers_loops floor-qd1 SIZE_BYTES SECONDS
 *       The floor with the clock reads iolab's accuracy rule allows at QD1: per I/O a random
 *       offset, a TSC read at submission, a TSC read at completion (nothing in between: no I/O),
 *       the difference counted. Two reads per I/O, where `floor` has one.
 *   peers_loops floor-batch SIZE_BYTES SECONDS QD BATCH
 *       The same at depth QD with submit and reap batches of BATCH (QD a multiple of BATCH): per
 *       batch submitted, BATCH offsets and one TSC read stamping them; per completion (the oldest
 *       BATCH, in order) one TSC read and the difference from its batch's stamp counted. One read
 *       per I/O plus one per batch: the most the rule allows.
 *
 * Every floor also measures, in the same run and just before its loop, what one TSC read costs
 * back to back (the least mean over 256 runs of 4096 reads) and prints it with the reads per I/O
 * its loop makes, so the clock's share of the floor's time per I/O can be told from the rest.
 *
 * The offsets come from xoshiro256++ and Lemire's multiply-high, and the histogram has
 * iolab's bucket layout (src/engine/recorder.rs, LatCounts::index): the same work per I/O as
 * iolab's hot loop, without anything iolab adds. Latencies stay in TSC ticks (iolab scales each
 * to ns with one multiply). Output: one JSON object on stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#elif defined(__aarch64__)
static inline uint64_t ticks(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#else
static inline uint64_t ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}
#endif

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static double tsc_hz(void)
{
	/* Each end: the TSC read between two clock reads, the closest pair of a few (a busy
	 * machine may preempt between them). */
	uint64_t t[2], n[2];
	for (int e = 0; e < 2; e++) {
		uint64_t best = UINT64_MAX;
		for (int k = 0; k < 20; k++) {
			uint64_t a = mono_ns(), tt = ticks(), b = mono_ns();
			if (b - a < best) {
				best = b - a;
				t[e] = tt;
				n[e] = a + (b - a) / 2;
			}
		}
		if (!e) {
			struct timespec d = { 0, 200 * 1000 * 1000 };
			nanosleep(&d, NULL);
		}
	}
	return (double)(t[1] - t[0]) * 1e9 / (double)(n[1] - n[0]);
}

static uint64_t s[4];

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t next_u64(void)
{
	uint64_t result = rotl(s[0] + s[3], 23) + s[0];
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

static inline uint64_t below(uint64_t n) { return (uint64_t)(((unsigned __int128)next_u64() * n) >> 64); }

#define SLOTS 8192
static uint64_t counts[SLOTS];

/* iolab's LatCounts::index: 128 sub-buckets per power of two, 256 exact values below 256. */
static inline unsigned slot(uint64_t v)
{
	unsigned b = 56 - __builtin_clzll(v | 255);
	return ((b << 7) + (unsigned)(v >> b)) & (SLOTS - 1);
}

static uint64_t value_of(unsigned i)
{
	if (i < 256)
		return i;
	unsigned b = (i >> 7) - 1;
	return (uint64_t)(i - (b << 7)) << b;
}

static uint64_t p50(uint64_t n)
{
	uint64_t seen = 0;
	for (unsigned i = 0; i < SLOTS; i++) {
		seen += counts[i];
		if (seen * 2 >= n)
			return value_of(i);
	}
	return 0;
}

static uint64_t recorded(void)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < SLOTS; i++)
		n += counts[i];
	return n;
}

/* The floors' extra figures: a TSC read's cost back to back (ns) and the reads per I/O. */
static double clock_read_ns = -1, clock_reads_per_io = -1;

static void report(const char *mode, uint64_t ios, uint64_t t_start, uint64_t t_end, double hz, uint64_t sink)
{
	double secs = (double)(t_end - t_start) / hz;
	printf("{\"mode\": \"%s\", \"ios\": %" PRIu64 ", \"lat_samples\": %" PRIu64 ", \"seconds\": %.6f, "
	       "\"iops\": %.1f, \"tsc_hz\": %.0f, \"lat_p50_ns\": %.1f, \"sink\": %" PRIu64,
	       mode, ios, recorded(), secs, ios / secs, hz, p50(ios) * 1e9 / hz, sink & 1);
	if (clock_read_ns >= 0)
		printf(", \"clock_read_ns\": %.3f, \"clock_reads_per_io\": %.4f", clock_read_ns, clock_reads_per_io);
	printf("}\n");
}

/* One TSC read's cost back to back, in ns: the least over 256 runs of 4096 reads (each read's
 * value consumed, so none is optimised away). Short runs, and the least of them: a run the
 * scheduler preempted (a shared machine) is not taken for the clock's cost. */
static double measure_clock_read(double hz)
{
	const uint64_t n = 4096;
	double best = 1e30;
	for (int k = 0; k < 256; k++) {
		uint64_t sink = 0, a = ticks();
		for (uint64_t i = 0; i < n; i++)
			sink += ticks();
		uint64_t b = ticks();
		__asm__ volatile("" : : "r"(sink));
		double ns = (double)(b - a) * 1e9 / hz / (double)n;
		if (ns < best)
			best = ns;
	}
	return best;
}

static void usage(void)
{
	fprintf(stderr, "usage: peers_loops tsc-hz | pread FILE SIZE_BYTES SECONDS DIRECT | floor SIZE_BYTES SECONDS | "
			"floor-qd1 SIZE_BYTES SECONDS | floor-batch SIZE_BYTES SECONDS QD BATCH\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	uint64_t x = 1; /* seeded as iolab seeds Rng::new(1) */
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&x);
	const uint64_t bs = 4096;

	if (!strcmp(argv[1], "tsc-hz") && argc == 2) {
		printf("%.0f\n", tsc_hz());
		return 0;
	}
	if (!strcmp(argv[1], "floor") && argc == 4) {
		uint64_t blocks = strtoull(argv[2], NULL, 10) / bs;
		double hz = tsc_hz();
		if (!blocks)
			usage();
		clock_read_ns = measure_clock_read(hz);
		clock_reads_per_io = 1;
		uint64_t prev = ticks(), start = prev, deadline = start + (uint64_t)(atof(argv[3]) * hz);
		uint64_t n = 0, sink = 0, t;
		do {
			sink += below(blocks) * bs;
			t = ticks();
			counts[slot(t - prev)]++;
			prev = t;
			n++;
		} while (t < deadline);
		report("floor", n, start, t, hz, sink);
		return 0;
	}
	if (!strcmp(argv[1], "floor-qd1") && argc == 4) {
		uint64_t blocks = strtoull(argv[2], NULL, 10) / bs;
		double hz = tsc_hz();
		if (!blocks)
			usage();
		clock_read_ns = measure_clock_read(hz);
		clock_reads_per_io = 2;
		uint64_t start = ticks(), deadline = start + (uint64_t)(atof(argv[3]) * hz);
		uint64_t n = 0, sink = 0, t0, t1;
		do {
			sink += below(blocks) * bs;
			t0 = ticks(); /* submitted */
			t1 = ticks(); /* completed: no I/O in between */
			counts[slot(t1 - t0)]++;
			n++;
		} while (t1 < deadline);
		report("floor-qd1", n, start, t1, hz, sink);
		return 0;
	}
	if (!strcmp(argv[1], "floor-batch") && argc == 6) {
		uint64_t blocks = strtoull(argv[2], NULL, 10) / bs;
		unsigned qd = (unsigned)atoi(argv[4]), batch = (unsigned)atoi(argv[5]);
		double hz = tsc_hz();
		if (!blocks || !batch || qd < batch || qd % batch || qd > 4096)
			usage();
		clock_read_ns = measure_clock_read(hz);
		clock_reads_per_io = 1 + 1.0 / batch;
		/* Each slot's submit stamp, and its offset (kept, as a request would be); the slots
		 * complete in submission order, the oldest batch at a time. */
		static uint64_t stamp[4096], offset[4096];
		unsigned head = 0; /* the oldest in flight */
		uint64_t start = ticks(), deadline = start + (uint64_t)(atof(argv[3]) * hz);
		uint64_t n = 0, sink = 0, t = start;
		/* Fill the queue: qd / batch submissions. */
		for (unsigned i = 0; i < qd; i += batch) {
			for (unsigned j = 0; j < batch; j++)
				offset[i + j] = below(blocks) * bs;
			uint64_t ts = ticks();
			for (unsigned j = 0; j < batch; j++)
				stamp[i + j] = ts;
		}
		do {
			/* Reap the oldest batch, a clock read per completion. */
			for (unsigned j = 0; j < batch; j++) {
				t = ticks();
				counts[slot(t - stamp[head + j])]++;
				sink += offset[head + j];
			}
			n += batch;
			/* Submit a batch into the slots just freed: the offsets, then one stamp. */
			for (unsigned j = 0; j < batch; j++)
				offset[head + j] = below(blocks) * bs;
			uint64_t ts = ticks();
			for (unsigned j = 0; j < batch; j++)
				stamp[head + j] = ts;
			head += batch;
			if (head == qd)
				head = 0;
		} while (t < deadline);
		report("floor-batch", n, start, t, hz, sink);
		return 0;
	}
	if (!strcmp(argv[1], "pread") && argc == 6) {
		int direct = atoi(argv[5]);
		int fd = open(argv[2], O_RDONLY | (direct ? O_DIRECT : 0));
		if (fd < 0) {
			fprintf(stderr, "peers_loops: open %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		uint64_t blocks = strtoull(argv[3], NULL, 10) / bs;
		void *buf;
		if (!blocks || posix_memalign(&buf, 4096, bs))
			usage();
		memset(buf, 0, bs);
		double hz = tsc_hz();
		uint64_t start = ticks(), deadline = start + (uint64_t)(atof(argv[4]) * hz);
		uint64_t n = 0, t0, t1;
		do {
			off_t off = (off_t)(below(blocks) * bs);
			t0 = ticks();
			ssize_t r = pread(fd, buf, bs, off);
			t1 = ticks();
			if (r != (ssize_t)bs) {
				fprintf(stderr, "peers_loops: pread at %lld returned %zd: %s\n", (long long)off, r,
					r < 0 ? strerror(errno) : "short read");
				return 1;
			}
			counts[slot(t1 - t0)]++;
			n++;
		} while (t1 < deadline);
		report("pread", n, start, t1, hz, 0);
		return 0;
	}
	usage();
}
