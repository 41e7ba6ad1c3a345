/*
 * The floor of a broker's produce path on this machine: receive bytes from a TCP
 * socket and write them to a file in the page cache, nothing else (no parsing, no
 * CRC, no index, no response). Prints the CPU seconds this process spent (user +
 * system, getrusage) and the bytes it took, as JSON on stdout.
 *
 *     ingest_floor PORT OUTFILE RECV_BYTES      -- listens on 127.0.0.1:PORT, one client
 *     ingest_floor --send PORT TOTAL CHUNK      -- the client: TOTAL bytes in CHUNK writes
 *
 * RECV_BYTES is the receiver's buffer (and so its write size); the receiver stops at
 * the client's EOF. bench/bench_floor.py builds it with gcc -O2 and runs both sides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../native/cpu_clock.h"

static int die(const char *what) {
    perror(what);
    return 1;
}

static int send_side(int port, long long total, int chunk) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    for (int tries = 0; connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0; tries++) {
        if (tries > 200) return die("connect");
        usleep(10000);
    }
    char *buf = malloc(chunk);
    memset(buf, 'x', chunk);
    long long sent = 0;
    while (sent < total) {
        int n = total - sent < chunk ? (int)(total - sent) : chunk;
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return die("write");
        }
        sent += w;
    }
    close(fd);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--send") == 0)
        return send_side(atoi(argv[2]), atoll(argv[3]), atoi(argv[4]));
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT OUTFILE RECV_BYTES | --send PORT TOTAL CHUNK\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    int bufsize = atoi(argv[3]);
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) return die("open");
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0) return die("bind");
    if (listen(ls, 1) != 0) return die("listen");
    printf("{\"listening\": %d}\n", port);
    fflush(stdout);
    int c = accept(ls, NULL, NULL);
    if (c < 0) return die("accept");
    char *buf = malloc(bufsize);
    double cpu0 = cpu_seconds(), t0 = now();
    long long got = 0;
    for (;;) {
        ssize_t r = read(c, buf, bufsize);
        if (r < 0) {
            if (errno == EINTR) continue;
            return die("read");
        }
        if (r == 0) break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, r - off);
            if (w < 0) {
                if (errno == EINTR) continue;
                return die("write");
            }
            off += w;
        }
        got += r;
    }
    double cpu = cpu_seconds() - cpu0, elapsed = now() - t0;
    printf("{\"bytes\": %lld, \"cpu_s\": %.6f, \"elapsed_s\": %.6f}\n", got, cpu, elapsed);
    close(c);
    close(out);
    free(buf);
    return 0;
}
