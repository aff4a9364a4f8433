/* libzmq local_thr/remote_thr/local_lat/remote_lat in one small program.
 * Declares the few libzmq calls it needs itself, so it builds without the
 * libzmq headers: cc -O2 -o perf perf.c /path/to/libzmq.so.5
 * Usage: perf local_thr|remote_thr|local_lat|remote_lat|local_sub|remote_pub ENDPOINT SIZE COUNT
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

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: perf MODE ENDPOINT SIZE COUNT\n");
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
		if (zmq_connect(s, ep)) die("connect");
		for (long i = 0; i < count; i++)
			if (zmq_send(s, buf, size, 0) < 0) die("send");
		zmq_close(s);
	} else if (!strcmp(mode, "local_lat")) {
		void *s = zmq_socket(ctx, REP);
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
