/*
 * Is io_uring worth it for kbroker's append path? The same appends two ways:
 *
 *   pwrite    one pwrite(2) per batch, as LogSegment.append does today
 *   uring     every partition's batch of one Produce request as one io_uring
 *             submission (N write SQEs, io_uring_submit_and_wait, N CQEs)
 *
 * PARTITIONS files in DIR; each round appends one BATCH-byte batch to every file (a
 * Produce request carrying PARTITIONS partitions); ROUNDS rounds. Prints one JSON line
 * per mode: CPU seconds (user + system, getrusage) and wall seconds per GiB written.
 *
 *     append_uring DIR PARTITIONS BATCH ROUNDS [uring-first]
 *
 * bench/bench_uring.py builds it (gcc -O2 -luring) and runs it over request shapes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../native/cpu_clock.h"

static int open_files(const char *dir, const char *mode, int n, int *fds) {
    char path[4096];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s-%d.log", dir, mode, i);
        fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) {
            perror("open");
            return -1;
        }
    }
    return 0;
}

static void close_files(const char *dir, const char *mode, int n, int *fds) {
    char path[4096];
    for (int i = 0; i < n; i++) {
        close(fds[i]);
        snprintf(path, sizeof path, "%s/%s-%d.log", dir, mode, i);
        unlink(path);
    }
}

static void report(const char *mode, int partitions, int batch, long rounds, double cpu, double wall) {
    double gib = (double)partitions * batch * rounds / (1 << 30);
    printf("{\"mode\": \"%s\", \"partitions\": %d, \"batch\": %d, \"rounds\": %ld, "
           "\"cpu_s_per_gib\": %.4f, \"wall_s_per_gib\": %.4f, \"cpu_us_per_request\": %.3f}\n",
           mode, partitions, batch, rounds, cpu / gib, wall / gib, cpu / rounds * 1e6);
    fflush(stdout);
}

static int run_pwrite(const char *dir, int partitions, int batch, long rounds, int *fds, const char *buf) {
    if (open_files(dir, "pwrite", partitions, fds) != 0) return 1;
    double c0 = cpu_seconds(), t0 = now();
    for (long r = 0; r < rounds; r++)
        for (int p = 0; p < partitions; p++)
            if (pwrite(fds[p], buf, batch, (off_t)r * batch) != batch) {
                perror("pwrite");
                return 1;
            }
    report("pwrite", partitions, batch, rounds, cpu_seconds() - c0, now() - t0);
    close_files(dir, "pwrite", partitions, fds);
    return 0;
}

static int run_uring(const char *dir, int partitions, int batch, long rounds, int *fds, const char *buf) {
    struct io_uring ring;
    int rc = io_uring_queue_init(partitions < 8 ? 8 : partitions, &ring, 0);
    if (rc < 0) {
        fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
        return 3;
    }
    if (open_files(dir, "uring", partitions, fds) != 0) return 1;
    double c0 = cpu_seconds(), t0 = now();
    for (long r = 0; r < rounds; r++) {
        for (int p = 0; p < partitions; p++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_write(sqe, fds[p], buf, batch, (off_t)r * batch);
        }
        rc = io_uring_submit_and_wait(&ring, partitions);
        if (rc < 0) {
            fprintf(stderr, "submit: %s\n", strerror(-rc));
            return 1;
        }
        for (int done = 0; done < partitions; done++) {
            struct io_uring_cqe *cqe;
            rc = io_uring_wait_cqe(&ring, &cqe);
            if (rc < 0 || cqe->res != batch) {
                fprintf(stderr, "write: %s\n", strerror(rc < 0 ? -rc : -cqe->res));
                return 1;
            }
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    report("uring", partitions, batch, rounds, cpu_seconds() - c0, now() - t0);
    close_files(dir, "uring", partitions, fds);
    io_uring_queue_exit(&ring);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s DIR PARTITIONS BATCH ROUNDS [uring-first]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int partitions = atoi(argv[2]), batch = atoi(argv[3]);
    long rounds = atol(argv[4]);
    int uring_first = argc == 6 && strcmp(argv[5], "uring-first") == 0;
    int *fds = calloc(partitions, sizeof(int));
    char *buf = malloc(batch);
    memset(buf, 'r', batch);
    int rc = uring_first ? run_uring(dir, partitions, batch, rounds, fds, buf)
                         : run_pwrite(dir, partitions, batch, rounds, fds, buf);
    if (rc == 0)
        rc = uring_first ? run_pwrite(dir, partitions, batch, rounds, fds, buf)
                         : run_uring(dir, partitions, batch, rounds, fds, buf);
    free(buf);
    free(fds);
    return rc;
}
