/* STREAM triad reference for benchmarks/kernel_fidelity.py.
 *
 * a[j] = b[j] + q * c[j] over N doubles with OpenMP, after McCalpin's STREAM
 * (https://www.cs.virginia.edu/stream/ref.html): arrays are initialized in
 * parallel with the same static schedule as the kernel (first touch places
 * pages near the threads that use them), bytes counted as 3 * N * 8 (read b,
 * c; write a; no write-allocate), one untimed warm-up pass. Prints one
 * per-iteration time in seconds per line, then "check <value>".
 *
 * Build: gcc -O3 -march=native -fopenmp stream.c -o stream
 * Usage: ./stream N NTIMES
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N NTIMES\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    int ntimes = atoi(argv[2]);
    double *a = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *b = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    double *c = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    if (!a || !b || !c) {
        fprintf(stderr, "allocation failed\n");
        return 1;
    }
    const double q = 3.0;
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0 + (double)(j % 7);
        c[j] = 0.5 + (double)(j % 5);
    }
    for (int k = 0; k <= ntimes; k++) {
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) a[j] = b[j] + q * c[j];
        t = omp_get_wtime() - t;
        if (k > 0) printf("%.9e\n", t); /* k == 0 is the warm-up */
    }
    double s = 0;
    for (long j = 0; j < n; j += 4096) s += a[j];
    printf("check %.6e\n", s);
    free(a);
    free(b);
    free(c);
    return 0;
}
