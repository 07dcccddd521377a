/* Runtime CPU dispatch levels for the kernels in ops/. The best level this CPU supports is
 * probed with __builtin_cpu_supports on every call (cheap; no mutable global). */
#ifndef MLA_OPS_CPU_H
#define MLA_OPS_CPU_H

enum ops_level { OPS_PORTABLE = 0, OPS_AVX2 = 1 }; /* AVX2 = AVX2 + FMA + F16C */

enum ops_level ops_level_best(void);
const char *ops_level_name(enum ops_level l);

#endif
