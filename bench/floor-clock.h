// What both floor programs (floor-sqlite.c, floor-postgres.c) measure with:
// the process's CPU, a monotonic clock, and the pace of their commits.
#include <sys/resource.h>
#include <time.h>

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec + time.tv_nsec / 1e9;
}

// Sleeps until commit `commits` of `batch` receipts is due at `rate` receipts per second from `started`.
static void pace(double started, long commits, int batch, double rate) {
    double wait = started + commits * batch / rate - now();
    if (wait > 0) {
        struct timespec pause = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
        nanosleep(&pause, NULL);
    }
}
