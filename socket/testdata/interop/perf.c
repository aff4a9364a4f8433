/* libzmq local_thr/remote_thr/local_lat/remote_lat in one small program.
 * Declares the few libzmq calls it needs itself, so it builds without the
 * libzmq headers: cc -O2 -o perf perf.c /path/to/libzmq.so.5
 * Usage: perf local_thr|remote_thr|local_lat|remote_lat|local_sub|remote_pub ENDPOINT SIZE COUNT [curve]
 * With "curve" the binding end is a CURVE server and the connecting end its
 * client, with libzmq's test key pairs (RFC 26's examples).
 * Output matches perf.py's worker modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *zmq_ctx_new(void);
int zmq_ctx_term(void *);
void *zmq_socket(void *, int);
int zmq_close(void *);
int zmq_bind(void *, const char *);
int zmq_connect(void *, const char *);
int zmq_send(void *, const void *, size_t, int);
int zmq_recv(void *, void *, size_t, int);
int zmq_setsockopt(void *, int, const void *, size_t);

/* libzmq's test keys (RFC 26), binary: server public, server secret,
 * client public, client secret. */
static const unsigned char server_pub[32] = {
	0x54, 0xfc, 0xba, 0x24, 0xe9, 0x32, 0x49, 0x96, 0x93, 0x16, 0xfb, 0x61, 0x7c, 0x87, 0x2b, 0xb0,
	0xc1, 0xd1, 0xff, 0x14, 0x80, 0x04, 0x27, 0xc5, 0x94, 0xcb, 0xfa, 0xcf, 0x1b, 0xc2, 0xd6, 0x52};
static const unsigned char server_sec[32] = {
	0x8e, 0x0b, 0xdd, 0x69, 0x76, 0x28, 0xb9, 0x1d, 0x8f, 0x24, 0x55, 0x87, 0xee, 0x95, 0xc5, 0xb0,
	0x4d, 0x48, 0x96, 0x3f, 0x79, 0x25, 0x98, 0x77, 0xb4, 0x9c, 0xd9, 0x06, 0x3a, 0xea, 0xd3, 0xb7};
static const unsigned char client_pub[32] = {
	0xbb, 0x88, 0x47, 0x1d, 0x65, 0xe2, 0x65, 0x9b, 0x30, 0xc5, 0x5a, 0x53, 0x21, 0xce, 0xbb, 0x5a,
	0xab, 0x2b, 0x70, 0xa3, 0x98, 0x64, 0x5c, 0x26, 0xdc, 0xa2, 0xb2, 0xfc, 0xb4, 0x3f, 0xc5, 0x18};
static const unsigned char client_sec[32] = {
	0x7b, 0xb8, 0x64, 0xb4, 0x89, 0xaf, 0xa3, 0x67, 0x1f, 0xbe, 0x69, 0x10, 0x1f, 0x94, 0xb3, 0x89,
	0x72, 0xf2, 0x48, 0x16, 0xdf, 0xb0, 0x1b, 0x51, 0x65, 0x6b, 0x3f, 0xec, 0x8d, 0xfd, 0x08, 0x88};

enum { CURVE_SERVER = 47, CURVE_PUBLICKEY = 48, CURVE_SECRETKEY = 49, CURVE_SERVERKEY = 50 };

enum { PUB = 1, SUB = 2, REQ = 3, REP = 4, PULL = 7, PUSH = 8, SUBSCRIBE = 6, SNDHWM = 23, RCVHWM = 24, LINGER = 17 };

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
	perror(what);
	exit(1);
}

static int curve;

/* secure makes s a CURVE server (server != 0) or client, when curve is on. */
static void secure(void *s, int server) {
	if (!curve)
		return;
	if (server) {
		int one = 1;
		if (zmq_setsockopt(s, CURVE_SERVER, &one, sizeof one) ||
		    zmq_setsockopt(s, CURVE_SECRETKEY, server_sec, 32))
			die("curve server options");
		return;
	}
	if (zmq_setsockopt(s, CURVE_SERVERKEY, server_pub, 32) ||
	    zmq_setsockopt(s, CURVE_PUBLICKEY, client_pub, 32) ||
	    zmq_setsockopt(s, CURVE_SECRETKEY, client_sec, 32))
		die("curve client options");
}

int main(int argc, char **argv) {
	if (argc == 6 && !strcmp(argv[5], "curve"))
		curve = 1;
	else if (argc != 5) {
		fprintf(stderr, "usage: perf MODE ENDPOINT SIZE COUNT [curve]\n");
		return 2;
	}
	const char *mode = argv[1], *ep = argv[2];
	size_t size = (size_t)atol(argv[3]);
	long count = atol(argv[4]);
	char *buf = calloc(1, size + 1);
	void *ctx = zmq_ctx_new();
	int zero = 0, minus1 = -1;
	if (!strcmp(mode, "local_thr")) {
		void *s = zmq_socket(ctx, PULL);
		zmq_setsockopt(s, RCVHWM, &zero, sizeof zero);
		secure(s, 1);
		if (zmq_bind(s, ep)) die("bind");
		printf("READY\n");
		fflush(stdout);
		if (zmq_recv(s, buf, size, 0) < 0) die("recv");
		double t0 = now();
		for (long i = 0; i < count - 1; i++)
			if (zmq_recv(s, buf, size, 0) < 0) die("recv");
		printf("{\"elapsed_s\": %.9f, \"count\": %ld}\n", now() - t0, count - 1);
		zmq_close(s);
	} else if (!strcmp(mode, "local_sub")) {
		void *s = zmq_socket(ctx, SUB);
		zmq_setsockopt(s, RCVHWM, &zero, sizeof zero);
		zmq_setsockopt(s, SUBSCRIBE, "", 0);
		secure(s, 1);
		if (zmq_bind(s, ep)) die("bind");
		printf("READY\n");
		fflush(stdout);
		if (zmq_recv(s, buf, size, 0) < 0) die("recv");
		double t0 = now();
		for (long i = 0; i < count - 1; i++)
			if (zmq_recv(s, buf, size, 0) < 0) die("recv");
		printf("{\"elapsed_s\": %.9f, \"count\": %ld}\n", now() - t0, count - 1);
		zmq_close(s);
	} else if (!strcmp(mode, "remote_pub")) {
		void *s = zmq_socket(ctx, PUB);
		zmq_setsockopt(s, SNDHWM, &zero, sizeof zero);
		zmq_setsockopt(s, LINGER, &minus1, sizeof minus1);
		secure(s, 0);
		if (zmq_connect(s, ep)) die("connect");
		/* Let the subscription arrive first (the slow joiner). */
		struct timespec wait = {1, 0};
		nanosleep(&wait, NULL);
		for (long i = 0; i < count; i++)
			if (zmq_send(s, buf, size, 0) < 0) die("send");
		zmq_close(s);
	} else if (!strcmp(mode, "remote_thr")) {
		void *s = zmq_socket(ctx, PUSH);
		zmq_setsockopt(s, SNDHWM, &zero, sizeof zero);
		zmq_setsockopt(s, LINGER, &minus1, sizeof minus1);
		secure(s, 0);
		if (zmq_connect(s, ep)) die("connect");
		for (long i = 0; i < count; i++)
			if (zmq_send(s, buf, size, 0) < 0) die("send");
		zmq_close(s);
	} else if (!strcmp(mode, "local_lat")) {
		void *s = zmq_socket(ctx, REP);
		secure(s, 1);
		if (zmq_bind(s, ep)) die("bind");
		printf("READY\n");
		fflush(stdout);
		for (long i = 0; i < count; i++) {
			int n = zmq_recv(s, buf, size, 0);
			if (n < 0) die("recv");
			if (zmq_send(s, buf, (size_t)n, 0) < 0) die("send");
		}
		zmq_close(s);
	} else if (!strcmp(mode, "remote_lat")) {
		void *s = zmq_socket(ctx, REQ);
		secure(s, 0);
		if (zmq_connect(s, ep)) die("connect");
		long *lat = calloc((size_t)count, sizeof *lat);
		for (long i = 0; i < count; i++) {
			double t = now();
			if (zmq_send(s, buf, size, 0) < 0) die("send");
			if (zmq_recv(s, buf, size, 0) < 0) die("recv");
			lat[i] = (long)((now() - t) * 1e9);
		}
		printf("{\"lat_ns\": [");
		for (long i = 0; i < count; i++) printf(i ? ",%ld" : "%ld", lat[i]);
		printf("]}\n");
		zmq_close(s);
	} else {
		fprintf(stderr, "perf: unknown mode %s\n", mode);
		return 2;
	}
	zmq_ctx_term(ctx);
	return 0;
}
