/* Wall and CPU clocks shared by the C benchmarks (floor/, uring/). */
#ifndef KBROKER_BENCH_CPU_CLOCK_H
#define KBROKER_BENCH_CPU_CLOCK_H

#include <sys/resource.h>
#include <time.h>

/* Monotonic wall time, seconds. */
static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's CPU time (user + system, all its threads), seconds. */
static inline double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

#endif
